"""What earlier replays of a directory got through: `DIR/.replay-ledger.jsonl`, append-only.

One JSON line per settled batch: the file's name and identity (inode, sha256 of its first
line) and the byte offset (and line number) up to which every line was accepted by the
collector or permanently rejected and reported. The last record of a file wins. A record is
appended, and fsynced, only after the collector answered, so:

- a run stopped by SIGINT or SIGTERM (the batch in flight is finished and recorded first) or
  by a collector that stays away resumes exactly where it stopped;
- a SIGKILL (or a power cut) between an answer and its record sends that one batch again:
  delivery is at least once per batch, never less.

A file is the same file when its first line is: its inode is recorded but may differ (the
directory copied elsewhere keeps its ledger). A file whose first line changed, or that is now
shorter than its recorded offset, was replaced: it is sent from its start. One replay at a time
holds the ledger (an exclusive lock); a second one is refused instead of sending twice.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import UserFacingError

__all__ = ["LEDGER_NAME", "Ledger", "Position"]

LEDGER_NAME = ".replay-ledger.jsonl"


@dataclass(frozen=True)
class Position:
    inode: int
    head: str  # sha256 of the first line
    offset: int  # bytes settled
    line: int  # the number of the last settled line


class Ledger:
    """The ledger file, opened and locked for one run; `close()` releases it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ignored_lines = 0  # lines of the ledger that are not records (a torn last write)
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise UserFacingError(f"replay: cannot open the ledger {path}: "
                                  f"{exc.strerror or exc} (give a writable one with "
                                  "--ledger FILE)") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise UserFacingError(f"replay: another replay is using the ledger {path}; "
                                  "wait for it to end") from None
        self._positions = self._read()

    def _read(self) -> dict[str, Position]:
        positions: dict[str, Position] = {}
        with open(self._fd, "rb", closefd=False) as handle:
            handle.seek(0)
            data = handle.read()
        for raw in data.splitlines():
            try:
                record = json.loads(raw)
                positions[record["file"]] = Position(int(record["inode"]), str(record["head"]),
                                                     int(record["offset"]), int(record["line"]))
            except (ValueError, KeyError, TypeError):
                self.ignored_lines += 1
        if data and not data.endswith(b"\n"):
            os.write(self._fd, b"\n")  # a torn last record must not run into the next one
        return positions

    def position(self, name: str) -> Position | None:
        return self._positions.get(name)

    def record(self, name: str, position: Position) -> None:
        """Append one record and make it durable before going on."""
        line = json.dumps({"file": name, "inode": position.inode, "head": position.head,
                           "offset": position.offset, "line": position.line},
                          separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())
        os.fsync(self._fd)
        self._positions[name] = position

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1
