"""stopping_trainer.py as a rank, run and stopped by the exit flush and signal tests."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from signal_dispositions import default_stop_signals
from yeto_otel.census import CENSUS
from zero_code import instrument_bin, otlp_lines

__all__ = ["BOUND_MS", "CENSUS_NAMES", "MARGIN_S", "STEP_SPAN", "Trainer",
           "assert_last_export_written", "kill_leftover_trainers", "wait_until"]

# Every trainer started, so that one a failed test left running is killed after it.
_started: list[subprocess.Popen] = []


def kill_leftover_trainers() -> None:
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.kill()
            process.wait()

TRAINER = Path(__file__).with_name("stopping_trainer.py")
CENSUS_NAMES = {metric.name for metric in CENSUS}
STEP_SPAN = "trainer.step"
# Far above what exporting to local files takes (milliseconds), far below the SDK's own
# 10 s export timeout that an unreachable collector would otherwise hold the exit for.
BOUND_MS = 1000
MARGIN_S = 6.0


class Trainer:
    """stopping_trainer.py as a rank (RANK=0) with its stdout read line by line."""

    def __init__(self, tmp_path: Path, setup: str, wait: str = "signal", **env: str) -> None:
        self.local_dir = tmp_path / "telemetry"
        full_env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("OTEL_", "YETO_"))
                    and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        full_env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                        YETO_OTEL_LOCAL_DIR=str(self.local_dir), **env)
        command = [sys.executable, "-u", str(TRAINER), setup, wait]
        if setup.startswith("instrumented"):
            command.insert(0, instrument_bin())
        self.process = subprocess.Popen(command, env=full_env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, preexec_fn=default_stop_signals)
        _started.append(self.process)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def wait_for(self, text: str, timeout: float = 120, *, prefix: bool = False) -> str:
        """The first line that is `text` (or starts with it, with `prefix`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line == text or (prefix and line.startswith(text)):
                return line
        self.process.kill()
        pytest.fail(f"no {text!r} from the trainer:\n{self.process.stderr.read()}")

    def cpu_seconds(self) -> float:
        """User and system CPU time the trainer has used (/proc/PID/stat)."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def seen(self) -> list[str]:
        out = []
        while not self.lines.empty():
            out.append(self.lines.get())
        return out

    def stop(self, signum: int) -> tuple[int, float]:
        """Send `signum`; (exit status as Popen reports it, seconds until the process ended)."""
        started = time.monotonic()
        self.process.send_signal(signum)
        status = self.process.wait(timeout=120)
        return status, time.monotonic() - started

    def exit_normally(self, how: str = "exit") -> tuple[int, float]:
        started = time.monotonic()
        self.process.stdin.write(f"{how}\n")
        self.process.stdin.flush()
        status = self.process.wait(timeout=120)
        return status, time.monotonic() - started

    def exported(self) -> tuple[set[str], set[str]]:
        """(metric names, span names) in the trainer's local files."""
        metrics = {m["name"] for batch in otlp_lines(self.local_dir, "metrics")
                   for rm in batch["resourceMetrics"] for sm in rm["scopeMetrics"]
                   for m in sm["metrics"]}
        spans = {s["name"] for batch in otlp_lines(self.local_dir, "traces")
                 for rs in batch["resourceSpans"] for ss in rs["scopeSpans"]
                 for s in ss["spans"]}
        return metrics, spans


def assert_last_export_written(trainer: Trainer) -> None:
    metrics, spans = trainer.exported()
    assert CENSUS_NAMES & metrics, f"no census collection in the files: {sorted(metrics)}"
    assert STEP_SPAN in spans




def wait_until(condition, timeout: float = 60.0) -> bool:
    """Poll `condition` until it holds (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
