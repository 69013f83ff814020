"""What a replay did, as it goes and at the end.

Progress goes to stderr: a bar redrawn in place when stderr is a terminal, otherwise one plain
line every `interval_s` seconds (a batch job's log). Each problem (a rejected line, a partial
success) is one line on stderr as it happens, the first `MAX_PROBLEM_LINES` of them; the
summary at the end (stdout) counts per signal what was sent, rejected and already sent.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import TextIO

from ...units import format_bytes

__all__ = ["MAX_PROBLEM_LINES", "Progress", "Summary", "Tally"]

MAX_PROBLEM_LINES = 20
_ITEM_NAMES = {"traces": "spans", "metrics": "points", "logs": "log records"}
_BAR = 24
_REDRAW_S = 0.1


@dataclass
class Tally:
    sent_lines: int = 0
    sent_items: int = 0
    rejected_lines: int = 0
    rejected_items: int = 0  # in rejected lines, and refused by partial successes
    already_lines: int = 0  # settled by earlier runs


class Progress:
    def __init__(self, total_bytes: int, stream: TextIO, interval_s: float,
                 clock=time.monotonic) -> None:
        self.total, self.done = total_bytes, 0
        self.stream, self.interval_s, self.clock = stream, interval_s, clock
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.file = ""
        self._at: dict[str, int] = {}
        self._shown = clock()
        self._drawn = False

    def start_file(self, name: str, offset: int) -> None:
        self.file, self._at[name] = name, offset
        self.done += offset
        self._show()

    def reached(self, name: str, offset: int) -> None:
        self.done += offset - self._at.get(name, 0)
        self._at[name] = offset
        self._show()

    def _show(self) -> None:
        now = self.clock()
        if now - self._shown < (_REDRAW_S if self.tty else self.interval_s):
            return
        self._shown = now
        share = min(1.0, self.done / self.total) if self.total else 1.0
        amounts = f"{format_bytes(self.done)} of {format_bytes(self.total)}"
        if self.tty:
            filled = int(share * _BAR)
            self.stream.write(f"\r[{'#' * filled}{'.' * (_BAR - filled)}] {share:4.0%} "
                              f"{amounts}  {self.file[:40]}\x1b[K")
            self._drawn = True
        else:
            self.stream.write(f"yeto-otel: replay: {share:.0%} ({amounts}), at {self.file}\n")
        self.stream.flush()

    def clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


class Summary:
    def __init__(self, progress: Progress, stream: TextIO = sys.stderr) -> None:
        self.progress = progress
        self.stream = stream
        self.tallies: dict[str, Tally] = {}
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.stopped: str | None = None

    def tally(self, signal: str) -> Tally:
        return self.tallies.setdefault(signal, Tally())

    def problem(self, text: str) -> None:
        self.problems.append(text)
        if len(self.problems) <= MAX_PROBLEM_LINES:
            self._say(f"yeto-otel: replay: {text}")

    def note(self, text: str) -> None:
        self.notes.append(text)
        self._say(f"yeto-otel: replay: {text}")

    def _say(self, line: str) -> None:
        self.progress.clear()
        print(line, file=self.stream, flush=True)

    @property
    def rejected(self) -> bool:
        return any(t.rejected_lines or t.rejected_items for t in self.tallies.values())

    def as_dict(self) -> dict:
        return {"signals": {s: asdict(t) for s, t in self.tallies.items()},
                "problems": self.problems, "notes": self.notes, "stopped": self.stopped}

    def text(self, directory: str) -> str:
        lines = [f"replay of {directory}:"]
        for signal, t in sorted(self.tallies.items()):
            items = _ITEM_NAMES[signal]
            lines.append(f"  {signal:<8} sent {t.sent_lines:,} lines ({t.sent_items:,} {items}), "
                         f"rejected {t.rejected_lines:,} lines and {t.rejected_items:,} "
                         f"{items}, already sent {t.already_lines:,} lines")
        if not self.tallies:
            lines.append("  no telemetry lines to send")
        if len(self.problems) > MAX_PROBLEM_LINES:
            lines.append(f"  {len(self.problems) - MAX_PROBLEM_LINES:,} more problems than "
                         "the ones shown above (--json lists them all)")
        if self.stopped:
            lines.append(f"  stopped: {self.stopped}")
            lines.append("  what was not sent is sent by the next run (the ledger says where "
                         "it stopped)")
        return "\n".join(lines)

    def print(self, directory: str, as_json: bool, out: TextIO) -> None:
        self.progress.clear()
        if as_json:
            print(json.dumps(self.as_dict()), file=out)
        else:
            print(self.text(directory), file=out)
