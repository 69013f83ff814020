"""What each benchmark rank records: start-up, step times, resident memory; written as JSON."""

from __future__ import annotations

import json
import os
import statistics
import time


def process_start_s() -> float:
    """When this process started (unix seconds), from /proc: what `opentelemetry-instrument`
    and the interpreter spend before the script's first line counts too."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + start_ticks / os.sysconf("SC_CLK_TCK")


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def pin_to_local_rank() -> None:
    """Keep this rank (and the DataLoader workers it starts, which inherit it) on one CPU of its
    own: with 2 ranks and their workers on 2 CPUs, where the scheduler puts whom moves a run's
    step time by tens of percent from one run to the next, more than what is measured."""
    cpus = sorted(os.sched_getaffinity(0))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    os.sched_setaffinity(0, {cpus[local_rank % len(cpus)]})


class StepClock:
    """Start-up (process start to the first step) and every step's wall time."""

    def __init__(self, warmup: int):
        self.warmup = warmup
        self.first_step_at: float | None = None
        self.steps_ms: list[float] = []
        self._started = 0.0

    def begin(self) -> None:
        if self.first_step_at is None:
            self.first_step_at = time.time()
        self._started = time.perf_counter()

    def end(self) -> None:
        self.steps_ms.append((time.perf_counter() - self._started) * 1000)

    def write(self, path: str, rank: int) -> None:
        timed = self.steps_ms[self.warmup:]
        record = {"rank": rank, "startup_s": self.first_step_at - process_start_s(),
                  "median_step_ms": statistics.median(timed), "steps": len(timed),
                  "rss_mib": status_kib("VmRSS") / 1024, "hwm_mib": status_kib("VmHWM") / 1024}
        with open(path, "w") as f:
            json.dump(record, f)
