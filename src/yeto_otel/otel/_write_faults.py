"""What the local telemetry files' writers say when writing fails, and how often.

A full disk fails every export until space returns. Logging each failure (the upstream file
exporter logs a traceback per export) buries the trainer's own log, so here each kind of
failure (the disk is full, the file was deleted under us, permission denied, ...) is logged the
first time it happens in the process and only counted after that. Each file's first recovery
is logged with what the failure cost (lines written late from memory, lines dropped), and at
exit one line sums up what was never written and not yet reported.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import threading
import weakref
from dataclasses import dataclass

__all__ = ["FAULTS", "WriteCounts", "WriteFaults", "failure_kind", "line_count"]

_log = logging.getLogger("yeto_otel.local_files")

GONE = "deleted or replaced"  # the failure kind of a file that is no longer at its path


@dataclass
class WriteCounts:
    """One file's running totals since its writer was made."""

    written_lines: int = 0  # lines that reached the file (late ones included)
    late_lines: int = 0  # of those, lines written from memory after a failure
    failed_writes: int = 0  # attempts to write a line that failed (and were retried)
    dropped_lines: int = 0  # lines dropped from the full in-memory backlog, never written
    dropped_bytes: int = 0
    recreated: int = 0  # times the file was found deleted or replaced and made again


def failure_kind(exc: OSError) -> str:
    """ENOSPC and EDQUOT are one kind (no room for the data); others go by their errno name."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space"
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def line_count(n: int) -> str:
    return "1 line" if n == 1 else f"{n} lines"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


class WriteFaults:
    """The process's record of which failure kinds were logged, and its writers (for the exit
    summary). One for the process (`FAULTS`); a forked child starts with a fresh record."""

    def __init__(self) -> None:
        self._logged: set[str] = set()
        self._writers: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()
        self._at_exit = False

    def first(self, kind: str) -> bool:
        """True the first time `kind` is seen in this process (the caller logs it)."""
        with self._lock:
            new = kind not in self._logged
            self._logged.add(kind)
            return new

    def register(self, writer) -> None:
        with self._lock:
            self._writers.add(writer)
            if not self._at_exit:
                # Registered before the SDK's providers (the writers are made first), so this
                # runs after their shutdown has exported the last batches.
                atexit.register(self.summarize_at_exit)
                self._at_exit = True

    def forget(self) -> None:
        """Start a fresh record of what was logged (a forked child logs its own failures)."""
        self._lock = threading.Lock()
        self._logged = set()

    @staticmethod
    def emit(messages: list[str]) -> None:
        for message in messages:
            _log.warning("%s", message)

    @staticmethod
    def failure_message(path: str, exc: OSError, backlog_bytes: int) -> str:
        return (f"yeto-otel: cannot write local telemetry file {path}: "
                f"{exc.strerror or exc} [{failure_kind(exc)}]; up to {_size(backlog_bytes)} "
                f"per file is kept in memory and written when writing works again, the oldest "
                f"dropped beyond that; further failures of this kind are counted, not logged")

    @staticmethod
    def gone_message(path: str) -> str:
        return (f"yeto-otel: local telemetry file {path} was {GONE} while this process wrote "
                f"it; created it again and writing on (lines written before are not in the new "
                f"file); further occurrences are counted, not logged")

    @staticmethod
    def recovery_message(path: str, counts: WriteCounts) -> str:
        return (f"yeto-otel: writing local telemetry file {path} again: "
                f"{line_count(counts.late_lines)} kept in memory written late, "
                f"{line_count(counts.dropped_lines)} ({_size(counts.dropped_bytes)}) dropped; "
                f"later failures of this file are counted and summed up at exit")

    @staticmethod
    def loss_message(parts: list[str]) -> str:
        return f"yeto-otel: local telemetry never written: {'; '.join(parts)}"

    def summarize_at_exit(self) -> None:
        """One line naming each file of this process whose losses were not yet reported."""
        try:
            with self._lock:
                writers = list(self._writers)
            parts = [part for writer in writers for part in writer.exit_report()]
            if parts:
                self.emit([self.loss_message(parts)])
        except Exception:  # at exit: never let telemetry fail the process
            pass


FAULTS = WriteFaults()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=FAULTS.forget)
