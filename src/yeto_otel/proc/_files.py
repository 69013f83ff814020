"""Kernel memory files: kept open, re-read with pread, parsed without OpenTelemetry.

/proc/self/status, /proc/self/smaps_rollup and /proc/meminfo are single-record seq files:
each read at offset 0 regenerates the whole text, so one pread per collection is enough
and saves the open/close pair (about half the cost of a read).
"""

from __future__ import annotations

import os
import threading
import weakref

__all__ = ["ProcFile", "ProcReadError", "parse_kb_fields", "read_anonymous_bytes", "read_kb_fields",
           "read_raw_field"]


class ProcReadError(Exception):
    """A /proc file could not be read or did not hold what we expected."""


class ProcFile:
    """One /proc file held open across collections.

    /proc/self resolves at open time, so after a fork the child would keep reading its
    parent's file through the inherited descriptor: reopen when the pid changes.

    Safe to share between threads: reads take a lock, so threads making their first read at
    once open the file once (unlocked, each opened its own and all but one leaked), and one
    thread never reads through a descriptor another has just closed and the kernel reused.
    """

    _INITIAL_BUFFER = 8192

    def __init__(self, path: str):
        self.path = path
        self.reads = 0
        self._fd: int | None = None
        self._pid = 0
        self._size = self._INITIAL_BUFFER
        self._lock = threading.Lock()
        _open_files.add(self)

    def read(self) -> bytes:
        with self._lock:
            pid = os.getpid()
            if self._fd is None or self._pid != pid:
                self._reopen(pid)
            self.reads += 1
            try:
                data = os.pread(self._fd, self._size, 0)
                while len(data) >= self._size:  # the buffer may have cut the text: grow, reread
                    self._size *= 2
                    data = os.pread(self._fd, self._size, 0)
            except OSError as exc:
                self._close_fd()
                raise ProcReadError(f"{self.path}: {exc.strerror or exc}") from None
            return data

    def _reopen(self, pid: int) -> None:
        self._close_fd()
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise ProcReadError(f"{self.path}: {exc.strerror or exc}") from None
        self._pid = pid

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        self._close_fd()  # nobody can be reading: no reference is left


# A fork copies each lock as it was, held by a thread that does not exist in the child: give
# the child's files fresh ones (the child is single-threaded while this runs).
_open_files: "weakref.WeakSet[ProcFile]" = weakref.WeakSet()


def _fresh_locks_after_fork() -> None:
    for proc_file in list(_open_files):
        proc_file._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks_after_fork)


KbFields = tuple[dict[str, int], list[str]]


def parse_kb_fields(path: str, data: bytes, wanted: dict[bytes, str]) -> KbFields:
    """Pick `Key:   123 kB` lines out of a /proc text; values come back in bytes.

    Returns the values found (keyed by `wanted`'s values) and a list of problems: keys that
    are missing or whose value is not a number. Never raises on content.
    """
    fast = _well_formed_fields(data, wanted)
    if len(fast) == len(wanted):  # the usual case: one C-level scan, nothing to report
        return {wanted[key]: value for key, value in fast.items()}, []
    return _parse_carefully(path, data, wanted)


def _line_fields(text: bytes, key: bytes) -> list[bytes] | None:
    """The fields after `key:` on its first line of `text` (which starts with a newline), or
    None when there is no such line or it is cut (no newline after it)."""
    start = text.find(b"\n" + key + b":")
    if start < 0:
        return None
    end = text.find(b"\n", start + 1)
    if end < 0:
        return None  # cut mid-line
    return text[start + len(key) + 2:end].split()


def _well_formed_fields(data: bytes, keys) -> dict[bytes, int]:
    """Each key's first line, when it is complete (ends in a newline) and plain digits.

    str.find on a few kilobytes is several times faster than a regex or a split of every
    line, and this runs for every file on every collection.
    """
    text = b"\n" + data
    values: dict[bytes, int] = {}
    for key in keys:
        fields = _line_fields(text, key)
        if fields and fields[0].isdigit():
            values[key] = int(fields[0]) * (1024 if len(fields) > 1 and fields[1] == b"kB" else 1)
    return values


def _parse_carefully(path: str, data: bytes, wanted: dict[bytes, str]) -> KbFields:
    """Line by line, saying what is wrong with each wanted field that is missing or bad."""
    found: dict[str, int] = {}
    problems: list[str] = []
    remaining = len(wanted)
    lines = data.split(b"\n")
    if lines[-1]:
        lines.pop()  # no final newline: the text was cut mid-line, and so maybe mid-value
    for line in lines:
        key, sep, rest = line.partition(b":")
        target = wanted.get(key) if sep else None
        if target is None or target in found:
            continue
        fields = rest.split()
        try:
            if not fields[0].isdigit():  # the kernel writes plain decimal digits only
                raise ValueError
            number = int(fields[0])
            scale = 1024 if len(fields) > 1 and fields[1] == b"kB" else 1
        except (IndexError, ValueError):
            problems.append(f"{path}: {key.decode(errors='replace')} is not a number: "
                            f"{rest.strip()[:40]!r}")
            found[target] = -1  # mark seen; removed below
            continue
        found[target] = number * scale
        remaining -= 1
        if remaining == 0:
            break
    for key, target in wanted.items():
        if target not in found:
            problems.append(f"{path}: {key.decode()} missing")
    return {k: v for k, v in found.items() if v >= 0}, problems


def read_kb_fields(path: str, wanted: dict[bytes, str]) -> dict[str, int]:
    """One-shot read of `Key: 123 kB` fields (bytes) from a /proc file, for code that reads
    once (a start-up check, a benchmark) rather than every collection. Fields that are
    missing or bad are left out; an unreadable file raises `ProcReadError`."""
    proc_file = ProcFile(path)
    try:
        found, _ = parse_kb_fields(path, proc_file.read(), wanted)
    finally:
        proc_file.close()
    return found


def read_raw_field(path: str, key: bytes) -> bytes | None:
    """The first token after `key:` in a /proc file (e.g. `Umask` -> b"0022"), or None when
    the file cannot be read or has no complete such line. For values that are not kB counts."""
    proc_file = ProcFile(path)
    try:
        data = proc_file.read()
    except ProcReadError:
        return None
    finally:
        proc_file.close()
    fields = _line_fields(b"\n" + data, key)
    return fields[0] if fields else None


def read_anonymous_bytes() -> int:
    """This process's resident anonymous memory: /proc/self/status `RssAnon`, the kernel's
    counter (~10 us at any size; not smaps_rollup, which walks every mapping under the
    process's memory lock). Raises ProcReadError when it cannot be read."""
    value = read_kb_fields("/proc/self/status", {b"RssAnon": "anonymous"}).get("anonymous")
    if value is None:
        raise ProcReadError("/proc/self/status has no RssAnon")
    return value
