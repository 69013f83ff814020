"""How far the report is, on stderr, for inputs that take a while: one line every few seconds
(never per file or per line), nothing at all for a run shorter than that."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ._format import human_bytes

__all__ = ["Progress"]

_EVERY_S = 3.0


class Progress:
    def __init__(self, stream=None, every_s: float = _EVERY_S, clock=time.monotonic):
        self._stream = stream if stream is not None else sys.stderr
        self._every, self._clock = every_s, clock
        self._began = self._last = clock()
        self._total = self._done = 0
        self._files = self._files_done = 0
        self.printed = 0

    def start(self, paths: list[Path]) -> None:
        """What is to be read: the files, by their sizes now."""
        self._files = len(paths)
        self._total = sum(_size(p) for p in paths)

    def at(self, path: Path, lines: int, size: int) -> None:
        """Reading `path` (`size` bytes), `lines` lines into it."""
        if self._clock() - self._last >= self._every:
            self._say(f"reading {path.name} (line {lines:,}, {human_bytes(size)})")

    def done(self, size: int) -> None:
        """A file was read to its end."""
        self._done += size
        self._files_done += 1
        if self._clock() - self._last >= self._every:
            self._say("reading")

    def finish(self) -> None:
        if self.printed:
            self._say("read; drawing the page", force=True)

    def _say(self, doing: str, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._last < self._every:
            return
        self._last = now
        share = f" ({100 * self._done / self._total:.0f}%)" if self._total else ""
        self._stream.write(f"yeto-otel: report: {doing}: {self._files_done} of {self._files} "
                           f"files, {human_bytes(self._done)} of {human_bytes(self._total)}"
                           f"{share}, {now - self._began:.0f} s\n")
        self._stream.flush()
        self.printed += 1


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
