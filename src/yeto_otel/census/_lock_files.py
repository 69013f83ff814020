"""Opening a duty's lock file so that nothing found in the lock directory can hang the census,
hold the duty for someone else, or make us lock something that is not ours.

The lock directory (`YETO_OTEL_LOCK_DIR`, /dev/shm by default) is writable by every user and the
lock files' names are predictable, so anyone could put something at one of them before us. Lock
files therefore live in a directory of this user's own inside it, `<lock dir>/yeto-otel-<euid>`,
made mode 0700 when missing, which no other user (root aside) can enter, let alone plant a file
in. Both are checked on the descriptor we then use, never by a name that could change between
a check and the open:
- the directory is opened with `O_DIRECTORY | O_NOFOLLOW` (a symlink at its name is refused,
  never followed) and must be a directory of the effective uid with no group or other
  permission bit: one that others can write or read may already hold their files;
- the lock file is opened relative to that descriptor, `O_NONBLOCK` (opening a FIFO without it
  waits for a writer: the census callback would wait forever, holding the snapshot lock) and
  `O_NOFOLLOW`, and must be a regular file of the effective uid.
Anything else raises `ForeignLockPath`, whose message names the path, what was found there and
what was expected. Nothing found is removed or changed: it may be someone's evidence, and only
the user who can see why it is there should delete it.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Callable, NoReturn

__all__ = ["ForeignLockPath", "open_lock_file", "private_file_names", "private_lock_dir"]

_DIR_FLAGS = (os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
# O_NOCTTY: should a terminal device be found at the name, opening it never makes it ours.
_FILE_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
_OPEN_ATTEMPTS = 3  # opening and creating race only with our own processes: a few tries do

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a regular file"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class ForeignLockPath(Exception):
    """Something at a lock path that must not be used: `path`, what was `found`, and what was
    `expected` instead."""

    def __init__(self, path: str, found: str, expected: str):
        super().__init__(f"{path} is {found}: refused, since {expected}; it is left as found "
                         f"(remove it to let the election run)")
        self.path = path
        self.found = found


def private_lock_dir(lock_dir: str, euid: int) -> str:
    """The directory of `euid`'s lock files inside `lock_dir`."""
    return os.path.join(lock_dir, f"yeto-otel-{euid}")


def open_lock_file(directory: str, name: str, euid: int, *, writable: bool = False,
                   create: bool = True) -> int:
    """A descriptor of the lock file `name` in the private lock `directory` of `euid` (read-only
    unless `writable`), both made if missing (the file only with `create`). Raises
    `ForeignLockPath` for anything that is not ours, `OSError` for what stops the open itself
    (no lock directory, a read-only filesystem, no such file without `create`)."""
    dir_fd = _open_private_dir(directory, euid)
    try:
        flags = _FILE_FLAGS | os.O_RDWR if writable else _FILE_FLAGS  # O_RDONLY is 0
        return _open_file_in(dir_fd, directory, name, euid, flags, create)
    finally:
        os.close(dir_fd)


def private_file_names(directory: str, euid: int, prefix: str) -> list[str]:
    """The names in the private lock `directory` of `euid` that start with `prefix` (none when
    it does not exist); the directory is checked as `open_lock_file` checks it."""
    try:
        dir_fd = _open_private_dir(directory, euid, create=False)
    except FileNotFoundError:
        return []
    try:
        return sorted(name for name in os.listdir(dir_fd) if name.startswith(prefix))
    finally:
        os.close(dir_fd)


def _open_private_dir(path: str, euid: int, *, create: bool = True) -> int:
    expected = (f"the lock directory must be a directory of uid {euid} with no group or other "
                f"permission (mode 0700), so that no other user can plant or hold a lock file")
    made = False
    if create:
        try:
            os.mkdir(path, 0o700)
            made = True
        except FileExistsError:
            pass
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        _refuse_what_is_there(path, expected, exc, lambda st: _is_private_dir(st, euid))
    try:
        found = os.fstat(fd)
        if made and stat.S_ISDIR(found.st_mode) and found.st_uid == euid:
            os.fchmod(fd, 0o700)  # the umask may have taken our own bits away
            found = os.fstat(fd)
        if not _is_private_dir(found, euid):
            raise ForeignLockPath(path, _described(found), expected)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file_in(dir_fd: int, directory: str, name: str, euid: int, flags: int,
                  create: bool) -> int:
    path = os.path.join(directory, name)
    expected = (f"a lock file must be a regular file of uid {euid}, so that nothing put there "
                f"can block the census (a FIFO) or hold the duty for someone else")
    fd, made = _open_or_make(dir_fd, path, name, expected, euid, flags, create)
    try:
        found = os.fstat(fd)
        if not _is_lock_file(found, euid):
            raise ForeignLockPath(path, _described(found), expected)
        if made:
            os.fchmod(fd, 0o600)  # whatever the umask, our other processes can open it
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_or_make(dir_fd: int, path: str, name: str, expected: str, euid: int, flags: int,
                  create: bool) -> tuple[int, bool]:
    for _ in range(_OPEN_ATTEMPTS):
        try:
            return os.open(name, flags, dir_fd=dir_fd), False
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            _refuse_what_is_there(path, expected, exc, lambda st: _is_lock_file(st, euid),
                                  name=name, dir_fd=dir_fd)
        try:
            return os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o600,
                           dir_fd=dir_fd), True
        except FileExistsError:
            continue  # another process of ours made it between our two opens
    raise OSError(errno.EAGAIN, "the lock file kept appearing and vanishing", path)


def _is_private_dir(found: os.stat_result, euid: int) -> bool:
    return (stat.S_ISDIR(found.st_mode) and found.st_uid == euid
            and (found.st_mode & 0o077) == 0)


def _is_lock_file(found: os.stat_result, euid: int) -> bool:
    return stat.S_ISREG(found.st_mode) and found.st_uid == euid


def _refuse_what_is_there(path: str, expected: str, error: OSError,
                          acceptable: Callable[[os.stat_result], bool], *,
                          name: str | None = None, dir_fd: int | None = None) -> NoReturn:
    """After an open failed: `ForeignLockPath` when what is at the path (not followed) is not
    `acceptable` (a symlink fails O_NOFOLLOW with ELOOP, a FIFO or file O_DIRECTORY with
    ENOTDIR, a socket any open with ENXIO, another user's directory with EACCES); else the
    open's own error, which is about something else (a directory we cannot search)."""
    try:
        there = os.lstat(path if name is None else name, dir_fd=dir_fd)
    except OSError:
        raise error from None
    if acceptable(there):
        raise error
    raise ForeignLockPath(path, _described(there), expected) from None


def _described(found: os.stat_result) -> str:
    kind = next((what for is_kind, what in _KINDS if is_kind(found.st_mode)),
                "an unknown kind of file")
    return f"{kind} of uid {found.st_uid} with mode {stat.S_IMODE(found.st_mode):04o}"
