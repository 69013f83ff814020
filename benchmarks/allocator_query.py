#!/usr/bin/env python
"""Time one bounded host-allocator query: the process's query thread against a fresh thread per
call, in the same run.

Run by hand (not a test):

    python benchmarks/allocator_query.py            # 20 rounds x 500 passes, ~2-3 s here

What one timed call is, per variant (interleaved call by call, order rotated every pass):

* direct          `realistic()`, the stand-in allocator of `yeto_otel.testing` (a CUDA build's
                  flat stats dict), called inline with no bound: the query's own cost.
* fresh thread    the same query through the bound as it was first built (kept here as the
                  anchor): a new daemon thread started for every call, waited for on an Event.
* query thread    the same query through `BoundedCall` as the census uses it: handed to the
                  process's one long-lived query thread through a `SimpleQueue`, its answer
                  waited for on a bare lock.

The overhead of the bound is each bounded variant's time less `direct`'s. Means and medians in
microseconds; the machine is shared and its speed drifts, so the ratio is what counts.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # hostinfo beside this

import hostinfo  # noqa: E402
from yeto_otel.census._bounded_call import BoundedCall  # noqa: E402
from yeto_otel.testing import realistic  # noqa: E402

TIMEOUT_S = 0.1  # YETO_OTEL_ALLOCATOR_TIMEOUT's default; never reached by these queries


class _EventCall:
    """The anchor's call, as first built: answered on a `threading.Event`."""

    def __init__(self, fn: Callable[[], object]):
        self.fn = fn
        self.pid = os.getpid()
        self.done = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:
            self.error = exc
        finally:
            self.fn = None  # type: ignore[assignment]
            self.done.set()


class FreshThreadCall:
    """The bound as first built (the anchor): `BoundedCall`'s checks, but every call starts a
    daemon thread of its own and is waited for on an Event."""

    def __init__(self, fn: Callable[[], object], timeout_s: float):
        self._fn = fn
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._call: _EventCall | None = None

    def __call__(self) -> object:
        with self._lock:
            call = self._call
            if call is None or call.pid != os.getpid() or call.done.is_set():
                call = _EventCall(self._fn)
                threading.Thread(target=call.run, name="anchor-allocator-query",
                                 daemon=True).start()
                self._call = call
        if not call.done.wait(self.timeout_s):
            raise RuntimeError("the anchor's query did not answer")
        return call.result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20, help="rounds (default 20)")
    p.add_argument("--repeat", type=int, default=500,
                   help="passes per round, each calling every variant once (default 500)")
    p.add_argument("--warmup", type=int, default=200, help="calls of each variant first")
    return p.parse_args(argv)


def measure(variants: dict[str, Callable[[], object]], rounds: int, repeat: int,
            warmup: int) -> dict[str, list[int]]:
    """Nanoseconds of every call of every variant, interleaved call by call."""
    names = list(variants)
    for name in names:
        for _ in range(warmup):
            variants[name]()
    times: dict[str, list[int]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    for r in range(rounds):
        gc.collect()
        for i in range(repeat):
            shift = (r * repeat + i) % len(names)
            for name in names[shift:] + names[:shift]:
                call = variants[name]
                started = clock()
                call()
                times[name].append(clock() - started)
    return times


def report(times: dict[str, list[int]]) -> str:
    direct = statistics.mean(times["direct"]) / 1000
    lines = ["| variant | mean µs | median µs | p99 µs | overhead over direct µs (mean) |",
             "|---|---:|---:|---:|---:|"]
    for name, ns in times.items():
        us = sorted(t / 1000 for t in ns)
        mean = statistics.mean(us)
        overhead = "-" if name == "direct" else f"{mean - direct:.1f}"
        lines.append(f"| {name} | {mean:.1f} | {statistics.median(us):.1f} | "
                     f"{us[int(len(us) * 0.99)]:.1f} | {overhead} |")
    old = statistics.mean(times["fresh thread"]) / 1000 - direct
    new = statistics.mean(times["query thread"]) / 1000 - direct
    lines.append("")
    lines.append(f"overhead per query: query thread {new:.1f} µs vs fresh thread {old:.1f} µs "
                 f"({new / old:.2f}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants = {"direct": realistic,
                "fresh thread": FreshThreadCall(realistic, TIMEOUT_S),
                "query thread": BoundedCall(realistic, TIMEOUT_S, "realistic")}
    load = os.getloadavg()[0]
    times = measure(variants, args.rounds, args.repeat, args.warmup)
    print(f"{os.cpu_count()} CPUs ({hostinfo.cpu_model()}), Python {platform.python_version()}, "
          f"load average {load:.1f} at the start; {args.rounds} x {args.repeat} calls each")
    print(report(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
