"""The stream the local OTLP JSON file exporters write through: whole lines, never a raise.

The upstream exporters (opentelemetry-exporter-otlp-json-file) encode each export batch as one
JSON line, `write` it to their stream in one call and `flush`; whatever raises, they log with a
traceback and report the export failed. Given this stream instead of a path they get:

- Whole lines or nothing. Each line goes to the file with O_APPEND writes; when one fails part
  way (the disk filled after some blocks), the file is truncated back to its size before that
  line, so it stays valid JSON lines whatever happens.
- A bounded backlog. A line that cannot be written is kept in memory, and written (in order,
  before anything newer) at the next export, which also retries it when it has nothing new.
  At most `BACKLOG_BYTES` per file are kept; beyond that the oldest lines are dropped, counted.
- A file deleted or replaced under it (its directory removed, the file unlinked or renamed
  away) is noticed before each write, by comparing the device and inode at the path with the
  open file's, and created again (directory included).
- Failures counted in `counts`, each kind logged once per process (see `_write_faults`).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections import deque

from ._write_faults import FAULTS, GONE, WriteCounts, WriteFaults, failure_kind, line_count

__all__ = ["BACKLOG_BYTES", "JsonLinesWriter"]

# Per file. A rank's census batch is ~3.5 KiB (a node-reporting rank at the default 10 s
# interval), a span ~1 KiB: 4 MiB holds over 3 hours of census, or thousands of spans, across a
# full disk, and costs a process at most 12 MiB (three files) when the disk never frees up.
BACKLOG_BYTES = 4 * 2**20

_EXIT_WAIT_S = 1.0

# O_NOFOLLOW: never write through a symlink put at our path. O_NONBLOCK: a FIFO put there makes
# open fail (no reader) instead of blocking the export thread; regular files ignore it.
_OPEN_FLAGS = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
               | os.O_NONBLOCK)


class JsonLinesWriter:
    """A text stream (`write`, `flush`, `closed`, `close`) appending whole lines to `path`.
    The file is opened at the first write, so a process that never exports a signal leaves no
    file for it."""

    def __init__(self, path: str | os.PathLike, *, backlog_bytes: int = BACKLOG_BYTES,
                 faults: WriteFaults = FAULTS) -> None:
        self.path = os.fspath(path)
        self.backlog_bytes = backlog_bytes
        self.counts = WriteCounts()
        self.closed = False
        self._faults = faults
        self._pid = os.getpid()
        self._fd: int | None = None
        self._rollback_to: int | None = None  # a failed line's start, if truncating failed
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._failing = False
        self._just_failed = False  # the exporter flushes right after each write
        self._recovery_logged = False
        self._reported_dropped = 0
        self._notes: list[str] = []
        self._lock = threading.Lock()
        faults.register(self)

    # --- the stream surface the exporter uses ----------------------------------------------

    def write(self, text: str) -> int:
        with self._lock:
            if not self.closed:
                self._submit(text.encode("utf-8"))
            notes = self._take_notes()
        self._faults.emit(notes)  # outside the lock: a logging handler may export into us
        return len(text)

    def flush(self) -> None:
        """Write the backlog, if any: every export calls this, so it is retried even when
        there is nothing new (but not right after the same export's line just failed)."""
        with self._lock:
            just_failed, self._just_failed = self._just_failed, False
            notes = self._take_notes() if just_failed else self._retry()
        self._faults.emit(notes)

    def close(self) -> None:
        """A last try at the backlog, then close; what was still not written is said here
        (once) rather than at exit."""
        with self._lock:
            if self.closed:
                return
            notes = self._retry()
            self.closed = True
            losses = self._unreported_losses()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        self._faults.emit(notes + ([self._faults.loss_message(losses)] if losses else []))

    @property
    def pending_lines(self) -> int:
        return len(self._pending)

    def exit_report(self) -> list[str]:
        """At exit: one last try at the backlog, then what this file lost and no line said.
        An export thread stuck in a write (a hung network filesystem) holds the exit for at
        most `_EXIT_WAIT_S`."""
        if os.getpid() != self._pid or self.closed:
            return []  # a forked copy of another process's writer, or already reported
        if not self._lock.acquire(timeout=_EXIT_WAIT_S):
            return [f"{self.path}: a write still under way at exit"]
        try:
            notes = self._retry()
            losses = self._unreported_losses()
        finally:
            self._lock.release()
        self._faults.emit(notes)
        return losses

    # --- inside the lock ---------------------------------------------------------------------

    def _retry(self) -> list[str]:
        if self._pending and not self.closed and self._drain():
            self._settle()
        return self._take_notes()

    def _unreported_losses(self) -> list[str]:
        parts = []
        if self._pending:
            parts.append(f"{line_count(len(self._pending))} ({self._pending_bytes} bytes) "
                         f"still in memory")
        if self.counts.dropped_lines > self._reported_dropped:
            dropped = self.counts.dropped_lines - self._reported_dropped
            parts.append(f"{line_count(dropped)} dropped from the full backlog")
            self._reported_dropped = self.counts.dropped_lines
        return [f"{self.path}: {' and '.join(parts)}"] if parts else []

    def _take_notes(self) -> list[str]:
        notes, self._notes = self._notes, []
        return notes

    def _submit(self, line: bytes) -> None:
        if self._drain() and self._write_line(line):
            self._settle()
        else:
            self._keep(line)
            self._just_failed = True

    def _drain(self) -> bool:
        """Write the backlog oldest first; True when it is empty."""
        while self._pending:
            if not self._write_line(self._pending[0]):
                return False
            line = self._pending.popleft()
            self._pending_bytes -= len(line)
            self.counts.late_lines += 1
        return True

    def _keep(self, line: bytes) -> None:
        self._pending.append(line)
        self._pending_bytes += len(line)
        while self._pending_bytes > self.backlog_bytes:
            dropped = self._pending.popleft()
            self._pending_bytes -= len(dropped)
            self.counts.dropped_lines += 1
            self.counts.dropped_bytes += len(dropped)

    def _settle(self) -> None:
        """Everything is written: if that ends a failure, say so (the first time per file;
        later recoveries are summed up at exit)."""
        if not self._failing:
            return
        self._failing = False
        if not self._recovery_logged:
            self._recovery_logged = True
            self._reported_dropped = self.counts.dropped_lines
            self._notes.append(self._faults.recovery_message(self.path, self.counts))

    def _write_line(self, line: bytes) -> bool:
        try:
            self._append(self._current_fd(), line)
        except OSError as exc:
            self.counts.failed_writes += 1
            self._failing = True
            if self._faults.first(failure_kind(exc)):
                self._notes.append(self._faults.failure_message(self.path, exc,
                                                                self.backlog_bytes))
            return False
        self.counts.written_lines += 1
        return True

    def _current_fd(self) -> int:
        if self._fd is not None and not self._still_at_path(self._fd):
            os.close(self._fd)
            self._fd = None
            self._rollback_to = None
            self.counts.recreated += 1
            if self._faults.first(GONE):
                self._notes.append(self._faults.gone_message(self.path))
        if self._fd is None:
            self._fd = self._open()
        return self._fd

    def _still_at_path(self, fd: int) -> bool:
        try:
            at_path = os.stat(self.path, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return True  # cannot tell (no search permission): keep the file we have
        mine = os.fstat(fd)
        return mine.st_nlink > 0 and (at_path.st_dev, at_path.st_ino) == \
            (mine.st_dev, mine.st_ino)

    def _open(self) -> int:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, _OPEN_FLAGS, 0o666)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", self.path)
        except OSError:
            os.close(fd)
            raise
        return fd

    def _append(self, fd: int, line: bytes) -> None:
        if self._rollback_to is not None:  # an earlier half line is still there: cut it first
            if os.fstat(fd).st_size > self._rollback_to:
                os.ftruncate(fd, self._rollback_to)
            self._rollback_to = None
        start = os.fstat(fd).st_size
        view, done = memoryview(line), 0
        try:
            while done < len(line):
                written = os.write(fd, view[done:])
                if written <= 0:
                    raise OSError(errno.EIO, "short write", self.path)
                done += written
        except OSError:
            if done:
                self._roll_back(fd, start)
            raise

    def _roll_back(self, fd: int, start: int) -> None:
        try:
            os.ftruncate(fd, start)
        except OSError:
            self._rollback_to = start  # tried again before the next line
