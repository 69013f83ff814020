"""The files a replay sends and their complete lines.

The embedded default writes `traces-*.jsonl`, `metrics-*.jsonl`, `logs-*.jsonl` (one OTLP JSON
export batch per line) and the trainer's `steplog-*.jsonl` into one directory. A file may still
be written by a running job: only complete lines (ending in a newline) are read; a last line
without its newline is left for the next run. Files are taken in name order per signal, which
for one rank is launch order (the names carry the process's start time), so the samples of a
series restarted under the same identity arrive oldest first.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ...otel import LOCAL_FILE_PATTERNS, MAX_LINE_BYTES, skip_rest_of_line

__all__ = ["KINDS", "Line", "ReplayFile", "complete_lines", "discover", "identity"]

# kind -> (file pattern, signal it is sent as), traces first; the step log goes as logs.
KINDS = {kind: (LOCAL_FILE_PATTERNS[kind], "logs" if kind == "steplog" else kind)
         for kind in ("traces", "metrics", "logs", "steplog")}
_FIRST_LINE_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReplayFile:
    path: Path
    kind: str  # a KINDS key

    @property
    def signal(self) -> str:
        return KINDS[self.kind][1]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        """What pairs a step log with its process's telemetry files (`<kind>-<stem>.jsonl`)."""
        return self.path.stem.split("-", 1)[1]


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    start: int  # byte offset of its first byte
    end: int  # byte offset just past its newline
    raw: bytes | None  # None: longer than MAX_LINE_BYTES, not read


def discover(directory: Path, steplog: bool = True) -> list[ReplayFile]:
    """The telemetry files in `directory` (regular files only), traces first, in name order."""
    found = []
    for kind, (pattern, _) in KINDS.items():
        if kind == "steplog" and not steplog:
            continue
        found += [ReplayFile(p, kind) for p in sorted(directory.glob(pattern)) if p.is_file()
                  and not p.is_symlink()]
    return found


def identity(path: Path) -> tuple[int, str, int] | None:
    """(inode, sha256 of the first line, size) of a file, or None while it has no complete
    line. The first line carries the process's first export (its timestamps in nanoseconds),
    so a file replaced by another process's under the same name has another one."""
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        digest = hashlib.sha256()
        while True:
            piece = handle.readline(_FIRST_LINE_CHUNK)
            if not piece:
                return None  # no newline yet
            digest.update(piece)
            if piece.endswith(b"\n"):
                return stat.st_ino, digest.hexdigest(), stat.st_size


def complete_lines(path: Path, offset: int = 0, number: int = 0,
                   max_line: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """The complete lines of `path` from byte `offset` (line `number` ended there). Blank lines
    are skipped; a line longer than `max_line` is yielded with `raw=None`, never read whole."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        position = offset
        while raw := handle.readline(max_line + 1):
            if not raw.endswith(b"\n"):
                if len(raw) <= max_line:
                    return  # the last line, still being written
                rest = skip_rest_of_line(handle)
                if rest < 0:
                    return  # an overlong line still being written
                length = len(raw) + rest
                number += 1
                yield Line(number, position, position + length, None)
                position += length
                continue
            number += 1
            line = Line(number, position, position + len(raw), raw)
            position = line.end
            if raw.strip():
                yield line

