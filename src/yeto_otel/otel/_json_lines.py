"""Reading a JSON lines file (the local telemetry files, a step log) whatever a crash, a full
disk or another writer left in it: a line longer than `MAX_LINE_BYTES` (a file of NULs with no
newline) is skipped without being read whole, so memory stays bounded by the bound, not by the
file; a line that is not JSON, a half-written last line or one nested too deeply is skipped.
Each skipped line is returned with its reason, for the caller to count and show."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..units import format_bytes

__all__ = ["BadLine", "MAX_LINE_BYTES", "iter_json_lines", "read_json_lines",
           "skip_rest_of_line"]

# The longest line read. The largest lines a real export writes: a batch of 512 restart spans
# (the batch processor's most) with 32 fragment_done events each is 3.6 MiB, 512 spans at the
# SDK's default limits (128 attributes of 64 characters, 128 events) 20 MiB; a rank's census
# batch is under 10 KiB. Three times the largest leaves room for longer attribute values while
# a damaged file still costs at most this much memory, not its size.
MAX_LINE_BYTES = 64 << 20
_DISCARD_CHUNK = 1 << 20  # what a skipped line is read in


@dataclass(frozen=True)
class BadLine:
    path: Path
    line: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: {self.reason}"


def read_json_lines(path: Path, max_line: int = MAX_LINE_BYTES
                    ) -> tuple[list[tuple[int, object]], list[BadLine]]:
    """([(line number, decoded JSON value)], [bad lines]) of a JSON lines file. Blank lines are
    ignored; a line that is not valid UTF-8 JSON, a half-written last line and a line longer
    than `max_line` bytes (read in chunks, never whole) are bad lines; the rest are still read.
    Raises OSError when the file cannot be read."""
    good: list[tuple[int, object]] = []
    bad: list[BadLine] = []
    for number, value, problem in iter_json_lines(path, max_line):
        if problem is None:
            good.append((number, value))
        else:
            bad.append(problem)
    return good, bad


def iter_json_lines(path: Path, max_line: int = MAX_LINE_BYTES):
    """(line number, decoded JSON value, None) or (line number, None, BadLine) for each line
    of a JSON lines file, one at a time (what `read_json_lines` collects): memory holds one
    line, whatever the file's size. Raises OSError when the file cannot be opened or read."""
    with open(path, "rb") as handle:
        number = 0
        while raw := handle.readline(max_line + 1):
            number += 1
            ended = raw.endswith(b"\n")
            if not ended and len(raw) > max_line:
                del raw  # let it go before the rest of the line is read past
                skip_rest_of_line(handle)
                yield number, None, BadLine(path, number, f"longer than {format_bytes(max_line)}"
                                                          ": skipped unread (no export writes "
                                                          "such lines)")
                continue
            if not raw.strip():
                continue
            value, reason = _decode(raw)
            if reason is None:
                yield number, value, None
            else:
                cut = "" if ended else "half-written last line (no newline at its end), "
                yield number, None, BadLine(path, number, cut + reason)


def skip_rest_of_line(handle) -> int:
    """Read past the rest of an overlong line, a chunk at a time: the bytes up to and
    including its newline, or -1 when the file ends first (a line still being written)."""
    skipped = 0
    while True:
        piece = handle.readline(_DISCARD_CHUNK)
        skipped += len(piece)
        if not piece:
            return -1
        if piece.endswith(b"\n"):
            return skipped


def _decode(raw: bytes) -> tuple[object, str | None]:
    """(the JSON value, None) or (None, why the line is not one)."""
    if not raw.rstrip(b"\n").strip(b"\0"):
        return None, "only NUL bytes (what a crash can leave in a file)"
    try:
        return json.loads(raw.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except RecursionError:
        return None, "not JSON this reader follows (nested too deeply)"
    except ValueError as exc:  # json.JSONDecodeError
        msg, col = getattr(exc, "msg", str(exc)), getattr(exc, "colno", "?")
        return None, f"not JSON ({msg} at column {col})"
