#!/usr/bin/env python
"""Throughput and memory of the per-node agent (collector/agent.yaml) under simulated ranks.

Run by hand (not a test); needs the local stack (collector/stack.py: the yeto-otelcol agent,
Jaeger, Prometheus):

    python benchmarks/agent_throughput.py                          # ranks 1, 8, 64 + headroom
    python benchmarks/agent_throughput.py --ranks 1,8,64 --seconds 60 --json out.json
    python benchmarks/agent_throughput.py --ranks 8 --seconds 30 --no-headroom

What a simulated rank is: what a real rank sends. Each rank has its own SDK `MeterProvider`
and `TracerProvider` with its own Resource (`rank_resource_attributes`: `service.instance.id`
= `<host>/rank-<r>`, `host.name`, `yeto.rank`, `yeto.local_rank`, `yeto.world_size`), the
product's census (`HostMemoryInstrumentor().instrument(meter_provider=..., settings=...)`, with
a fake host allocator so the 18 allocator metrics are exported too; node metrics from local
rank 0 only, as `YETO_OTEL_NODE_METRICS=auto` does), a `PeriodicExportingMetricReader` (10 s)
and a `BatchSpanProcessor`, both with the OTLP/gRPC exporters, sending to the agent. At the
start every rank resumes its anchors with `load_resume_anchors` on a small anchor file and
reports 8 fragments done (the `yeto.resume.anchors` span, its `yeto.resume.anchors.load`
child, 8 `fragment_done` events).

Ranks live in load-generator processes, one per simulated host of 8 ranks (this script with
`--loadgen`), so 64 ranks are 8 Python processes, not 64.

Phases, each with a fresh stack (agent, Jaeger, Prometheus):

* idle:      the agent with nothing sending (`--idle-seconds`).
* ranks N:   N ranks exporting every `--interval` s; the measurement window starts half an
             interval after every rank has started (its edges fall between exports, so a 60 s
             window holds exactly 6 exports of every rank) and lasts `--seconds`.
* headroom:  64 ranks (`--headroom-ranks`) in load generators that do not import torch
             (a census read costs ~0.2 ms there instead of ~7 ms, so they offer more load):
             1. points: shorter census intervals (`--headroom-intervals`), `--headroom-seconds`
                each, until the ranks no longer keep their schedule;
             2. spans: restarts replayed at a steady pace (`--span-rates` spans/s for
                `--span-seconds` each; the shape of a real restart, taken from one
                `load_resume_anchors` in a child process) while the census exports every 10 s,
                until a step drops or the load generators fall behind.

Measured for the agent process only: CPU (utime + stime from /proc/<pid>/stat over the window,
as % of one core), VmRSS (sampled every 0.5 s: mean and max) and VmHWM from
/proc/<pid>/status, and the Go heap (`otelcol_process_runtime_heap_alloc_bytes`, what the
memory_limiter compares with its limits). Points/s and spans/s are the agent's own counters
(`otelcol_receiver_accepted_*`) over the window.

Zero drops, checked after every phase (the run fails, exit status 1, otherwise):
* every refused / failed / dropped counter the agent exposes is 0 (receivers, memory_limiter,
  exporters' send and enqueue, remote-write translation);
* after the load generators have flushed (polled, not slept): what the SDK exporters
  reported as exported (and no failed export) == what the agent accepted == what it sent on,
  with its queues empty;
* the backends: Prometheus holds exactly one sample per exported point (sum of
  count_over_time over every `yeto_*` series), a series for every rank and the node metrics
  for local rank 0 of every host only; Jaeger received every span the agent sent (its own
  receiver and storage counters) and, for the restarts, one trace per rank with the product's
  span shape.

The parts live beside this script in `throughput/` (load generator, phases, checks, /proc
readings, Markdown); this script is the entry point, of the orchestrator and (with hidden
flags) of the load-generator and shape-capture processes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # throughput/ and hostinfo beside this

from throughput.common import COLLECTOR_DIR, BenchError, stack_module  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="1,8,64", help="comma-separated rank counts (default 1,8,64)")
    p.add_argument("--seconds", type=float, default=60.0,
                   help="measurement window of each rank count (default 60)")
    p.add_argument("--interval", type=float, default=10.0,
                   help="census export interval in s (default 10, the product's default)")
    p.add_argument("--idle-seconds", type=float, default=15.0,
                   help="window of the idle agent (default 15; 0 skips it)")
    p.add_argument("--no-headroom", action="store_true", help="skip the headroom phase")
    p.add_argument("--headroom-ranks", type=int, default=64)
    p.add_argument("--headroom-intervals", default="1,0.5,0.25,0.1",
                   help="export intervals in s, tried in order until the load generators fall "
                        "behind (default 1,0.5,0.25,0.1)")
    p.add_argument("--headroom-seconds", type=float, default=20.0,
                   help="window of each census-interval step (default 20)")
    p.add_argument("--span-rates", default="500,1000,2000,4000,8000",
                   help="spans/s of the span steps, tried in order until one drops or the load "
                        "generators fall behind (default 500,1000,2000,4000,8000; empty skips)")
    p.add_argument("--span-seconds", type=float, default=10.0,
                   help="how long each span step creates spans (default 10)")
    p.add_argument("--agent-config", default=str(COLLECTOR_DIR / "agent.yaml"),
                   help="the agent's configuration (default collector/agent.yaml)")
    p.add_argument("--json", metavar="FILE", help="write every number to FILE")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    p.add_argument("--loadgen", metavar="CONFIG", help=argparse.SUPPRESS)
    p.add_argument("--capture-shape", metavar="CONFIG", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _numbers(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def run_phases(args: argparse.Namespace, report: dict, workdir: Path) -> list[str]:
    """Every phase in order, each on a fresh stack; returns what failed."""
    from throughput.phases import run_headroom, run_idle, run_ranks

    agent_config = Path(args.agent_config).resolve()

    def make_stack(stack_dir: Path):
        return stack_module.Stack(stack_dir, agent_config=agent_config)

    failures: list[str] = []
    if args.idle_seconds > 0:
        report["phases"].append(run_idle(make_stack, workdir, args.idle_seconds))
    for n in (int(x) for x in args.ranks.split(",") if x.strip()):
        print(f"ranks {n}: {args.seconds:g} s window", file=sys.stderr, flush=True)
        result = run_ranks(make_stack, workdir, n, args.interval, args.seconds)
        report["phases"].append(result)
        failures += result["failures"]
    if not args.no_headroom:
        print("headroom", file=sys.stderr, flush=True)
        report["headroom"] = run_headroom(
            make_stack, workdir, args.headroom_ranks, _numbers(args.headroom_intervals),
            args.headroom_seconds, _numbers(args.span_rates), args.span_seconds)
        failures += report["headroom"]["failures"]
    return failures


def orchestrate(args: argparse.Namespace) -> int:
    from throughput.machine import loadavg, machine_info
    from throughput.markdown import markdown

    report = {"machine": machine_info(), "loadavg_start": loadavg(), "command": sys.argv,
              "agent_config": str(Path(args.agent_config).resolve()), "phases": []}
    print(f"loadavg at start: {report['loadavg_start']}", file=sys.stderr, flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="yeto-agent-bench-"))
    failures: list[str] = []
    try:
        failures = run_phases(args, report, workdir)
    except BenchError as error:
        failures.append(str(error))
    finally:
        report["loadavg_end"] = loadavg()
        report["failures"] = failures
        if args.keep or failures:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if report["phases"] or report.get("headroom"):
        print(markdown(report))
    if failures:
        print("\nFAILED (data dropped or missing):", file=sys.stderr)
        for failure in failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.loadgen:  # a load-generator process (one simulated host)
        from throughput import loadgen
        return loadgen.main(json.loads(args.loadgen))
    if args.capture_shape:  # the child that captures the restart span shape
        from throughput import shape
        config = json.loads(args.capture_shape)
        print(json.dumps(shape.capture(config["workdir"], config["resource"])))
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
