"""Where this process's memory cgroup is: its version, its path and the directory of its files.

Read once from /proc/self/cgroup and /proc/self/mountinfo, pure parsing:

- cgroup v1 (the memory controller on its own hierarchy, as in the hybrid layout many Slurm
  clusters still run): the `N:...memory...:/path` line, and the `cgroup` mount whose super
  options name `memory`;
- cgroup v2: the `0::/path` line, and the `cgroup2` mount. Used only when no v1 hierarchy has
  the memory controller (a controller is on one hierarchy at a time).

The path in /proc/self/cgroup and a mount's root are both relative to the reader's cgroup
namespace, so the directory is the mount point plus the path below the mount's root. In a
container with its own cgroup namespace (Kubernetes on v2) the line reads `0::/` and the
mount's root is `/`: the mount point is the container's own cgroup, whose limit is the one
that kills it, and that is what is read. A path that is not under the mount's root (a mount
made in another namespace, shown with a `/..` root) cannot be reached and is refused, and so
is the host's root cgroup, which has no memory files: never a neighbour's or the host's
numbers under this process's name.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

__all__ = ["CgroupNotFound", "MemoryCgroup", "locate_memory_cgroup", "parse_mountinfo",
           "parse_proc_cgroup"]


class CgroupNotFound(Exception):
    """This process has no memory cgroup that can be read; the message says why."""


@dataclass(frozen=True)
class MemoryCgroup:
    version: int  # 1 or 2
    path: str  # as /proc/self/cgroup shows it (relative to the cgroup namespace)
    directory: str  # where its memory.* files are
    identity: str  # the same for every process in this cgroup on this host, whatever its view


@dataclass(frozen=True)
class Mount:
    root: str  # the path of the mounted directory within its filesystem
    mount_point: str
    fs_type: str
    super_options: tuple[str, ...]


def parse_proc_cgroup(text: str) -> tuple[str | None, str | None]:
    """The v1 memory hierarchy's path and the v2 path from /proc/self/cgroup (None if absent).

    Lines are `hierarchy-id:controllers:path`; the path may itself contain colons."""
    v1_memory = v2 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1_memory = path
    return v1_memory, v2


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (`\\040`)."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts in /proc/self/mountinfo (proc(5) format: optional fields
    end at a lone `-`, then fs type, source, super options)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            dash = fields.index("-", 6)
            fs_type, super_options = fields[dash + 1], fields[dash + 3]
        except (ValueError, IndexError):
            continue
        if fs_type in ("cgroup", "cgroup2"):
            mounts.append(Mount(_unescape(fields[3]), _unescape(fields[4]), fs_type,
                                tuple(super_options.split(","))))
    return mounts


def _below(path: str, root: str) -> str | None:
    """`path` relative to `root` ("" for the root itself), or None when it is not under it.
    A root with `..` in it lies outside this namespace's view (normpath would hide that)."""
    if ".." in root.split("/"):
        return None
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    if path == root:
        return ""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else None


def _directory(path: str, mounts: list[Mount], version: int) -> str:
    what = "cgroup v1 memory hierarchy" if version == 1 else "cgroup2 filesystem"
    if not mounts:
        raise CgroupNotFound(f"the {what} holding {path!r} is not mounted here")
    for mount in mounts:
        relative = _below(path, mount.root)
        if relative is not None:
            return posixpath.join(mount.mount_point, relative) if relative else mount.mount_point
    raise CgroupNotFound(f"the memory cgroup {path!r} is not under any mount of the {what} "
                         f"(mounted roots: {', '.join(m.root for m in mounts)})")


def _choose(proc_cgroup: str, mountinfo: str) -> tuple[int, str, str]:
    v1_memory, v2 = parse_proc_cgroup(proc_cgroup)
    mounts = parse_mountinfo(mountinfo)
    if v1_memory is not None:
        v1_mounts = [m for m in mounts if m.fs_type == "cgroup" and "memory" in m.super_options]
        return 1, v1_memory, _directory(v1_memory, v1_mounts, 1)
    if v2 is not None:
        return 2, v2, _directory(v2, [m for m in mounts if m.fs_type == "cgroup2"], 2)
    raise CgroupNotFound("no memory controller in /proc/self/cgroup (no v1 memory line, no v2 "
                         "`0::` line)")


# The file whose presence says the directory is a memory cgroup with its own accounting (the
# host's root cgroup has none: its numbers would be the whole machine's).
_USAGE_FILE = {1: "memory.usage_in_bytes", 2: "memory.current"}


def locate_memory_cgroup(proc_root: str = "/proc", *, fs_root: str = "/") -> MemoryCgroup:
    """This process's memory cgroup; raises `CgroupNotFound` with the reason when there is none
    that can be read (no /proc/self/cgroup, no memory controller, not mounted, not under the
    mount, the root cgroup). `fs_root`: where mount points are looked up (a test's tree)."""
    texts = []
    for name in ("self/cgroup", "self/mountinfo"):
        file = os.path.join(proc_root, name)
        try:
            with open(file, encoding="utf-8", errors="surrogateescape") as f:
                texts.append(f.read())
        except OSError as exc:
            raise CgroupNotFound(f"{file}: {exc.strerror or exc}") from None
    version, path, directory = _choose(*texts)
    directory = os.path.join(fs_root, directory.lstrip("/"))
    usage = os.path.join(directory, _USAGE_FILE[version])
    try:
        status = os.stat(directory)
        os.stat(usage)
    except OSError as exc:
        reason = ("the root cgroup or one without the memory controller enabled"
                  if isinstance(exc, FileNotFoundError) and os.path.isdir(directory)
                  else exc.strerror or str(exc))
        raise CgroupNotFound(f"memory cgroup {path!r} (v{version}): {usage}: {reason}") from None
    # The directory's inode is the cgroup's id on this host: the same for every process in it,
    # whatever namespace each sees it from (a namespaced `/` is not the host's `/`).
    return MemoryCgroup(version, path, directory,
                        f"memory-cgroup-v{version}:{status.st_dev}:{status.st_ino}")
