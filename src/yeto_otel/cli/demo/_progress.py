"""Progress lines on stderr, so stdout carries only the summary (and `--json` stays parseable)."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """`progress("message")` prints `[demo   1.23s] message`, timed from the demo's start."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[demo {time.monotonic() - self.started:6.2f}s] {message}", file=sys.stderr,
              flush=True)
