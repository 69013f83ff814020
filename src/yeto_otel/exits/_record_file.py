"""Where exit records live, how their owner holds them, and how a dead owner's record is claimed
by exactly one reporter.

Records are files in the user's private lock directory (`<lock dir>/yeto-otel-<euid>/`, /dev/shm
by default: node-local, memory-backed, hardened as the duty lock files are, `census._lock_files`),
named `exit-<pid>-<identity digest>.rec`. The owner makes its record under another name
(`.new`), takes an exclusive `flock` on it, sizes it, maps it, writes its header, and only then
renames it into place, so a reporter never meets a record half made; it holds the lock for its
whole life. The kernel drops that lock when the process
dies, however it dies (SIGKILL and the OOM killer included), so

- a record whose lock can be taken has no living owner: no pid to check, nothing a reused pid
  or another pid namespace can get wrong;
- the lock is also the claim: whoever takes it reads the record, reports it if it is still
  running, marks it reported and removes it, all while holding the lock; another reporter
  trying at the same time fails to take the lock, and one that opened the file before the
  removal finds it marked reported once it gets the lock. Nobody reports a death twice.

A record whose owner exits through the interpreter is marked closed (or reported, when the
process reported its own exception) and removed by its owner.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import mmap
import os
from dataclasses import dataclass, replace

from ..census import open_lock_file, private_file_names, private_lock_dir
from ._layout import (RECORD_SIZE, Header, RecordState, Slot, read_exit_status, read_header,
                      read_latest_slot, write_exit_status, write_slot)

__all__ = ["ClaimedRecord", "OwnedRecord", "RECORD_PREFIX", "claim_record", "identity_digest",
           "note_exit_status", "record_names"]

RECORD_PREFIX = "exit-"
_SUFFIX = ".rec"
_DRAFT_SUFFIX = ".new"


def identity_digest(instance_id: str) -> str:
    """A short name for an identity: `<job>/rank-3` has characters a file name must not."""
    return hashlib.sha256(instance_id.encode("utf-8")).hexdigest()[:16]


def record_name(pid: int, instance_id: str) -> str:
    return f"{RECORD_PREFIX}{pid}-{identity_digest(instance_id)}{_SUFFIX}"


def record_names(lock_dir: str, euid: int, instance_id: str | None = None) -> list[str]:
    """The records in the private lock directory (of one identity, when given)."""
    names = private_file_names(private_lock_dir(lock_dir, euid), euid, RECORD_PREFIX)
    if instance_id is not None:
        digest = identity_digest(instance_id)
        names = [n for n in names if n.rsplit(".", 1)[0].endswith(f"-{digest}")]
    return [n for n in names if n.endswith((_SUFFIX, _DRAFT_SUFFIX))]


class OwnedRecord:
    """This process's own record: made, locked and mapped; `buffer` is written in place, and
    `publish()` puts it where reporters look."""

    def __init__(self, lock_dir: str, euid: int, pid: int, instance_id: str):
        self.directory = private_lock_dir(lock_dir, euid)
        self.name = record_name(pid, instance_id)
        self.path = os.path.join(self.directory, self.name)
        self._draft = self.path[:-len(_SUFFIX)] + _DRAFT_SUFFIX
        fd = open_lock_file(self.directory, os.path.basename(self._draft), euid, writable=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)  # a draft a dead process of our pid left (another boot)
            os.ftruncate(fd, RECORD_SIZE)
            self.buffer = mmap.mmap(fd, RECORD_SIZE, mmap.MAP_SHARED,
                                    mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def publish(self) -> None:
        """Put the record (its header written) where reporters look."""
        os.rename(self._draft, self.path)

    def remove(self) -> None:
        """Unlink the record (its owner is done with it) and let go of it."""
        _remove(self.path)
        _remove(self._draft)  # never published (the start failed half-way)
        self.release()

    def release(self) -> None:
        """Close the mapping and the descriptor: the lock goes with it. (A forked child does
        this with its copy: the lock stays with the parent's descriptor.)"""
        try:
            self.buffer.close()
        except (BufferError, ValueError):
            pass
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class ClaimedRecord:
    """A dead process's record, locked by us until `finish()`."""

    path: str
    header: Header | None
    slot: Slot | None
    _fd: int
    _buffer: mmap.mmap
    exit_status: tuple[int, int] | None = None  # (signal, code) its parent wrote, if any

    def finish(self, mark_reported: bool) -> None:
        """Mark it reported (when it was reported) and remove it; let go of the lock."""
        try:
            if mark_reported and self.slot is not None:
                # the update after the newest whole one, into the other slot
                write_slot(self._buffer, self.slot.seq // 2,
                           replace(self.slot, state=RecordState.REPORTED))
            os.unlink(self.path)
        except OSError:
            pass
        finally:
            self._buffer.close()
            os.close(self._fd)


def claim_record(lock_dir: str, euid: int, name: str) -> ClaimedRecord | None:
    """The record `name`, locked, when its owner is dead; None when it is alive, gone, or not
    a record (a file of ours that is too short or was never finished is removed)."""
    directory = private_lock_dir(lock_dir, euid)
    try:
        fd = open_lock_file(directory, name, euid, writable=True, create=False)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None  # its owner lives (or another reporter has it now)
        raise
    path = os.path.join(directory, name)
    try:
        buffer = mmap.mmap(fd, RECORD_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError):  # shorter than a record: not one of ours to read
        os.close(fd)
        return None
    header = read_header(buffer)
    if header is None:  # a draft its owner never finished (killed while starting)
        _remove(path)
        buffer.close()
        os.close(fd)
        return None
    return ClaimedRecord(path, header, read_latest_slot(buffer), fd, buffer,
                         read_exit_status(buffer))


def note_exit_status(lock_dir: str, euid: int, pid: int, signal: int, code: int) -> bool:
    """Write into the record of the dead process `pid` how it ended (its parent saw it:
    `signal` 0 for none), without taking its lock: whoever reports it reads it there. False
    when it has no record (it kept none, exited normally, or was reported already)."""
    prefix = f"{RECORD_PREFIX}{pid}-"
    names = [n for n in record_names(lock_dir, euid) if n.startswith(prefix)
             and n.endswith(_SUFFIX)]
    directory = private_lock_dir(lock_dir, euid)
    for name in names:
        try:
            fd = open_lock_file(directory, name, euid, writable=True, create=False)
        except FileNotFoundError:
            continue
        try:
            with mmap.mmap(fd, RECORD_SIZE, mmap.MAP_SHARED,
                           mmap.PROT_READ | mmap.PROT_WRITE) as buffer:
                write_exit_status(buffer, signal, code)
        except (OSError, ValueError):
            continue
        finally:
            os.close(fd)
        return True
    return False


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
