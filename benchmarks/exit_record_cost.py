#!/usr/bin/env python
"""What the exit record costs: per step, per yeto span and per collection, each against the same
work with the record off, in one run, alternating blocks (A B A B ...).

Run by hand (not a test):

    python benchmarks/exit_record_cost.py            # 20 blocks of each
    python benchmarks/exit_record_cost.py --quick    # 2 blocks: that it runs

The process keeps an exit record in a lock directory of its own (`start_exit_records`, as the
instrumentor does), beside 7 records of other living processes (8 ranks on a host), and times:

| what | on | off |
|---|---|---|
| step | `add_census_to_step_log({"step": n})` with the census off (the default) and the record's step hook set | the same call without the hook: the disabled path |
| span | start and end a `dcp.save` span on a provider with the record's `PhaseSpanProcessor` | the same span on a provider without it |
| collection | `ProcessExits.collect()` as the host's elected observer: the record's memory and OOM counts read, the 8 records looked at (7 locked by their owners) | nothing: the collection without the record |

Per call in µs: each block times `--calls` calls together; the figure is the median of the
blocks, and on - off is the record's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hostinfo  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from yeto_otel import add_census_to_step_log  # noqa: E402
from yeto_otel.census import set_step_hook  # noqa: E402
from yeto_otel.exits import PhaseSpanProcessor, note_step, start_exit_records  # noqa: E402
from yeto_otel.names import DCP_SAVE  # noqa: E402
from yeto_otel.settings import Settings  # noqa: E402

NEIGHBOUR = r"""
import os, sys
from yeto_otel.exits import ExitRecorder, Header
from yeto_otel.exits._record_file import OwnedRecord
rank = int(sys.argv[2])
record = OwnedRecord(sys.argv[1], os.geteuid(), os.getpid(), f"bench/rank-{rank}")
recorder = ExitRecorder(record, Header(pid=os.getpid(), rank=rank,
                                       instance_id=f"bench/rank-{rank}"))
print("ready", flush=True)
sys.stdin.readline()
recorder.close()
"""


def _per_call_us(call, calls: int) -> float:
    start = time.perf_counter_ns()
    for n in range(calls):
        call(n)
    return (time.perf_counter_ns() - start) / calls / 1000


def _blocks(on, off, calls: int, blocks: int) -> dict:
    times = {"on": [], "off": []}
    for block in range(blocks):
        order = (("on", on), ("off", off)) if block % 2 == 0 else (("off", off), ("on", on))
        for name, call in order:
            times[name].append(_per_call_us(call, calls))
    on_us, off_us = statistics.median(times["on"]), statistics.median(times["off"])
    return {"on_us": round(on_us, 3), "off_us": round(off_us, 3),
            "cost_us": round(on_us - off_us, 3), "blocks": blocks, "calls": calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    blocks = 2 if args.quick else args.blocks
    lock_dir = tempfile.mkdtemp(prefix="yeto-exit-bench-")
    neighbours = [subprocess.Popen([sys.executable, "-c", NEIGHBOUR, lock_dir, str(r)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                  for r in range(1, 8)]
    for n in neighbours:
        assert n.stdout.readline() == "ready\n"
    settings = Settings(rank=0, world_size=8, lock_dir=lock_dir)
    plain, traced = TracerProvider(), TracerProvider()
    exits = start_exit_records(settings, {"service.instance.id": "bench/rank-0"},
                               plain.get_tracer("bench"))
    traced.add_span_processor(PhaseSpanProcessor())
    assert exits is not None and exits.duty.held()
    off_settings = Settings()
    results = {}

    def step(hook):
        def timed(n):
            set_step_hook(hook)  # a store, in both: the off blocks call the disabled path
            add_census_to_step_log({"step": n}, settings=off_settings)
        return timed

    results["step"] = _blocks(step(note_step), step(None), 20_000, blocks)
    set_step_hook(note_step)
    span_on, span_off = traced.get_tracer("bench"), plain.get_tracer("bench")
    results["span"] = _blocks(lambda n: span_on.start_span(DCP_SAVE.name).end(),
                              lambda n: span_off.start_span(DCP_SAVE.name).end(), 5_000, blocks)
    results["collection"] = _blocks(lambda n: exits.collect(), lambda n: None, 200, blocks)
    for n in neighbours:
        n.communicate("done\n", timeout=30)
    exits.recorder.close()
    report = {"machine": {"cpu": hostinfo.cpu_model(), "cpus": os.cpu_count(),
                          "kernel": platform.release(), "python": platform.python_version()},
              "results": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['machine']}")
    print("| what | on (µs) | off (µs) | cost (µs) |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['on_us']} | {r['off_us']} | {r['cost_us']} |")


if __name__ == "__main__":
    main()
