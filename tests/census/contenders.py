"""Real processes that contend for a duty (duty_contender.py), asked one command at a time,
and polling with a deadline instead of sleeping."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

CONTENDER = Path(__file__).with_name("duty_contender.py")
DEADLINE_S = 30.0


class Contender:
    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, str(CONTENDER), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._line() == "ready"

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        assert line, f"the contender exited ({self.proc.wait()})"
        return line.strip()

    def ask(self, command: str = "check") -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line()

    def holds(self) -> bool:
        """`duty` mode: whether it holds the duty; `node` mode: whether its collection
        exported node metrics."""
        return self.ask() == "True"

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no atexit, no finally, nothing of ours runs
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()


@contextlib.contextmanager
def started_contenders():
    """Yields `start(*args) -> Contender`; kills every contender started when it ends."""
    started: list[Contender] = []

    def start(*args: str) -> Contender:
        started.append(Contender(*args))
        return started[-1]

    try:
        yield start
    finally:
        for c in started:
            c.stop()


def poll(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
