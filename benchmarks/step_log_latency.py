#!/usr/bin/env python
"""The step log's time on the training thread with gigabytes resident: the step log as it is
against its old inline way, in one run, and the disabled path.

Run by hand (not a test):

    python benchmarks/step_log_latency.py                # 4 GiB in 4 KiB pages, 60 s, 50 ms
    python benchmarks/step_log_latency.py --budget 1     # 1 %: a due read every few seconds
    python benchmarks/step_log_latency.py --quick        # 0 GiB, 3 s: that it runs

The process allocates and writes `--gib` GiB of private anonymous memory (4 KiB pages unless
`--pages huge`), then calls both variants every `--interval-ms` for `--seconds`, the order
swapped every tick, each call timed by itself:

* latest      `add_census_to_step_log({...}, rank=0, settings=...)` with the census on: the
              latest values; a smaps_rollup read that is due is handed to the census's
              background thread, the allocator answered by its last finished query.
* inline      the anchor, the step log's old way: the same record from a reader that waits
              (`CensusReader(wait=True)`, what the step log used), so a due smaps_rollup read
              walks the page tables on the caller's thread and the allocator query is waited
              for. Its own budget (a clock of its own), so each variant's reads fall due as
              they would alone.

Both use the same settings: the budget YETO_OTEL_SMAPS_BUDGET (`--budget`, the product's
default unless given) and the stand-in CUDA allocator of `yeto_otel.testing`. The first call
of each (its first take: files opened, the cgroup found, the first read due; both readers are
made before the window) is in the window and reported apart too. Each call is also reported
less the time its thread waited, runnable, for a CPU (`_RunQueue`): on a shared machine that
is other work's doing, not the call's. Then the disabled path: `add_census_to_step_log(record)`
with the census off (the default), per call over `--off-calls` calls, best of 5.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # hostinfo and collection/ beside this

import hostinfo  # noqa: E402
from collection.resident import make_resident, thp_setting  # noqa: E402
from yeto_otel import add_census_to_step_log  # noqa: E402
from yeto_otel.census import (PRIVATE_DIRTY, CensusReader, CgroupCensus,  # noqa: E402
                              resolve_allocator)
from yeto_otel.census import _step_log  # noqa: E402
from yeto_otel.census._step_log import _add_snapshot  # noqa: E402  (the anchor's record)
from yeto_otel.proc import read_kb_fields  # noqa: E402
from yeto_otel.settings import Settings, forget_current_settings  # noqa: E402

ALLOCATOR = "yeto_otel.testing:realistic"
OVER_MS = 5.0  # the target: no step-log call over this
GIB = 1 << 30


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gib", type=int, default=4, help="resident GiB (default 4)")
    p.add_argument("--pages", choices=("4k", "huge"), default="4k")
    p.add_argument("--seconds", type=float, default=60.0, help="timed window (default 60)")
    p.add_argument("--interval-ms", type=float, default=50.0, help="between ticks (default 50)")
    p.add_argument("--budget", type=float, default=Settings().smaps_budget_percent,
                   help="YETO_OTEL_SMAPS_BUDGET in %% of one core (default: the product's)")
    p.add_argument("--off-calls", type=int, default=1_000_000,
                   help="calls of the disabled path per repeat (default 1000000)")
    p.add_argument("--quick", action="store_true", help="0 GiB, 3 s, 100000 off calls")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.gib, args.seconds, args.off_calls = 0, 3.0, 100_000
    return args


def _anchor_clock() -> int:
    # A clock of its own gives the anchor a budget of its own (budgets are shared per clock).
    return time.monotonic_ns()


def _variants(settings: Settings):
    """(name, call, the reader whose smaps_rollup budget it spends) for both variants."""
    anchor = CensusReader(allocator=resolve_allocator(settings.host_allocator,
                                                      timeout_ms=settings.allocator_timeout_ms),
                          node_metrics=True, semconv=settings.semconv_metrics,
                          smaps_budget_percent=settings.smaps_budget_percent,
                          clock=_anchor_clock, cgroup=CgroupCensus(elected=False), wait=True)
    # Both readers made before the window: the step log makes its own at its first call.
    _step_log._census_reader(settings)
    records = {"latest": [], "inline": []}

    def latest():
        records["latest"].append(add_census_to_step_log({}, rank=0, settings=settings))

    def inline():
        records["inline"].append(_add_snapshot({}, anchor.take()))

    return [("latest", latest), ("inline", inline)], anchor, records


class _RunQueue:
    """How long this thread has waited, runnable, for a CPU another task held (nanoseconds,
    the second field of /proc/thread-self/schedstat): the machine's other load, not a wait of
    the call's own (the GIL, a lock, a read sleep and are not in it). On a shared 2-core
    machine a call of half a millisecond now and then waits a scheduler slice (~4 ms) here."""

    def __init__(self):
        self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)

    def __call__(self) -> int:
        return int(os.pread(self._fd, 128, 0).split()[1])


def _ticks(variants, seconds: float, interval_s: float) -> dict[str, list[tuple[int, int]]]:
    """Every `interval_s` (on an absolute schedule: a late tick runs at once), each variant
    once, the order swapped every tick; each call's (nanoseconds, of which waiting for a CPU)."""
    samples: dict[str, list[tuple[int, int]]] = {name: [] for name, _ in variants}
    clock = time.perf_counter_ns
    run_queue = _RunQueue()
    start = time.perf_counter()
    tick = 0
    while time.perf_counter() - start < seconds:
        due = start + tick * interval_s
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        order = variants if tick % 2 == 0 else variants[::-1]
        for name, call in order:
            queued = run_queue()
            t0 = clock()
            call()
            took = clock() - t0
            samples[name].append((took, run_queue() - queued))
        tick += 1
    return samples


def _stats(timed: list[tuple[int, int]]) -> dict:
    """Percentiles of the calls' times; after the first call, the calls over OVER_MS and the
    longest, with and without the time the thread waited for a CPU (`_RunQueue`)."""
    ns = [t for t, _ in timed]
    ordered = sorted(ns)
    n = len(ordered)

    def pct(p: float) -> float:
        return ordered[min(n - 1, int(p * n))] / 1e6

    own = [t - queued for t, queued in timed[1:]]
    return {"calls": n, "first_ms": ns[0] / 1e6, "median_ms": pct(0.5), "p99_ms": pct(0.99),
            "p999_ms": pct(0.999), "max_after_first_ms": max(ns[1:], default=0) / 1e6,
            "over": sum(1 for t in ns[1:] if t > OVER_MS * 1e6),
            "over_own": sum(1 for t in own if t > OVER_MS * 1e6),
            "max_own_ms": max(own, default=0) / 1e6}


def _private_dirty(records: list[dict]) -> dict:
    """How many records carried Private_Dirty, how many distinct values, the oldest age."""
    values = [r[PRIVATE_DIRTY.step_log_key] for r in records if PRIVATE_DIRTY.step_log_key in r]
    ages = [r[PRIVATE_DIRTY.step_log_age_key] for r in records
            if PRIVATE_DIRTY.step_log_age_key in r]
    return {"records_with_it": len(values), "distinct_values": len(set(values)),
            "max_age_s": max(ages, default=None)}


def disabled_path(calls: int) -> float:
    """Nanoseconds per `add_census_to_step_log(record)` with the census off (the default),
    the loop included, best of 5."""
    os.environ.pop("YETO_DILOCO_HOST_MEM_CENSUS", None)  # this process only: the default
    forget_current_settings()
    record = {"step": 1}
    add_census_to_step_log(record)
    best = None
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            add_census_to_step_log(record)
        per_call = (time.perf_counter_ns() - t0) / calls
        best = per_call if best is None else min(best, per_call)
    return best


def measure(args: argparse.Namespace) -> dict:
    area = make_resident(args.gib, args.pages)
    rollup = read_kb_fields("/proc/self/smaps_rollup", {b"Anonymous": "anonymous", b"Rss": "rss"})
    bare = []
    for _ in range(3):  # what one walk costs at this size, on this thread
        t0 = time.perf_counter_ns()
        read_kb_fields("/proc/self/smaps_rollup", {b"Private_Dirty": "private_dirty"})
        bare.append((time.perf_counter_ns() - t0) / 1e6)
    settings = Settings(step_log_census=True, host_allocator=ALLOCATOR,
                        smaps_budget_percent=args.budget)
    variants, anchor, records = _variants(settings)
    gc.collect()
    samples = _ticks(variants, args.seconds, args.interval_ms / 1000)
    budgets = {"latest": _step_log._reader.smaps_rollup, "inline": anchor.smaps_rollup}
    result = {
        "gib": args.gib, "pages": args.pages, "seconds": args.seconds,
        "interval_ms": args.interval_ms, "budget_percent": args.budget,
        "anonymous_bytes": rollup["anonymous"], "rss_bytes": rollup["rss"],
        "bare_smaps_rollup_ms": bare, "variants": {},
    }
    for name, ns in samples.items():
        budgeted = budgets[name]
        result["variants"][name] = {
            **_stats(ns), "smaps_rollup_reads": budgeted.reads if budgeted else 0,
            "smaps_rollup_read_ms": budgeted.spent_ns / 1e6 if budgeted else 0,
            "private_dirty": _private_dirty(records[name])}
    anchor.close()
    del area
    result["disabled_ns_per_call"] = disabled_path(args.off_calls)
    return result


def report(result: dict) -> str:
    lines = [f"machine: {hostinfo.cpu_model()}, {os.cpu_count()} CPUs, "
             f"{hostinfo.mem_total() / GIB:.0f} GiB, Linux {platform.release()}, "
             f"Python {platform.python_version()}, THP: {thp_setting()}",
             f"resident: {result['anonymous_bytes'] / GIB:.2f} GiB anonymous "
             f"({result['pages']} pages), a bare smaps_rollup read "
             + ", ".join(f"{ms:.1f}" for ms in result["bare_smaps_rollup_ms"]) + " ms",
             f"window: {result['seconds']:g} s, a tick every {result['interval_ms']:g} ms, "
             f"budget {result['budget_percent']:g} % of one core", "",
             "| variant | calls | first | median | p99 | p99.9 | after the first: max | "
             f"over {OVER_MS:g} ms | max less CPU waits | over {OVER_MS:g} ms less CPU waits | "
             "smaps_rollup reads (ms) | records with Private_Dirty (distinct values, "
             "oldest age) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in result["variants"].items():
        pd = v["private_dirty"]
        age = "-" if pd["max_age_s"] is None else f"{pd['max_age_s']:.1f} s"
        lines.append(
            f"| {name} | {v['calls']} | {v['first_ms']:.2f} ms | {v['median_ms']:.3f} ms | "
            f"{v['p99_ms']:.3f} ms | {v['p999_ms']:.2f} ms | {v['max_after_first_ms']:.2f} ms"
            f" | {v['over']} | {v['max_own_ms']:.2f} ms | {v['over_own']}"
            f" | {v['smaps_rollup_reads']} ({v['smaps_rollup_read_ms']:.0f}) | "
            f"{pd['records_with_it']} ({pd['distinct_values']}, {age}) |")
    lines += ["", f"disabled path (census off): {result['disabled_ns_per_call'] / 1000:.3f} µs "
                  "a call, the loop included (best of 5)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = measure(args)
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
