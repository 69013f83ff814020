#!/usr/bin/env python
"""What yeto-otel's telemetry takes from a training thread, measured in one process: phases with
it on and off alternate, so the process, its CPU and its memory are the same for both.

Run by hand (not a test):

    python benchmarks/telemetry_phases.py            # ~8 min here
    python benchmarks/telemetry_phases.py --pairs 3 --phase-s 3 --workloads mlp

Why not only `step_overhead.py`: on a shared 2-core VM two runs of the same torchrun job differ
by 10-20% in step time (where the scheduler and the host put things), far more than the 0.5% to
be shown. Here one process, pinned to one CPU with one torch thread, trains a model in a loop
(`mlp`: a 3-layer MLP, a step of ~2.5 ms, as short as Lightning's examples; `transformer`: a
2-layer encoder, ~12 ms) and alternates phases of `--phase-s` seconds, the order rotated every
round:

* off                    no telemetry at all;
* defaults               what `opentelemetry-instrument` runs in a rank by default: the census
                         instruments on a MeterProvider exporting every 10 s to a local OTLP
                         JSON file (the embedded default), a TracerProvider with its batch
                         processor, the torch.load instrumentor;
* census 1s + step log   the same exporting every second, and each step's record through
                         `add_census_to_step_log` (census on).

Each phase's steps are timed one by one; the figure per round is the median step of a phase
over the median step of that round's `off` phase, and the result the median over rounds. That
ratio still moves by a few percent from phase to phase here, so the benchmark also measures
what the telemetry costs directly, which does not depend on the machine's drift: the CPU time
of every other thread of the process during the phase (`/proc/self/task/*/schedstat`: the
export threads, the census's background reader; on one CPU, each of their nanoseconds is one
the training thread did not run), and the CPU time of each `add_census_to_step_log` call on
the training thread (`time.thread_time`, whose own two calls add ~3 µs a step here). Their
sum over the phase's steps is the cost per step: `cost` below, as a share of the off phase's
median step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

from yeto_otel import add_census_to_step_log
from yeto_otel.instrumentation import HostMemoryInstrumentor, TorchLoadInstrumentor
from yeto_otel.otel import JsonLinesWriter
from yeto_otel.settings import Settings

VARIANTS = ("off", "defaults", "census 1s + step log")
STEP_LOG = Settings(step_log_census=True)


def model_for(workload: str):
    if workload == "transformer":
        layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                                 batch_first=True)
        net = torch.nn.TransformerEncoder(layer, num_layers=2)
        return net, torch.randn(8, 32, 128), torch.randn(8, 32, 128)
    net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    return net, torch.randn(256, 256), torch.randn(256, 1)


class Telemetry:
    """A rank's telemetry as the configurator sets it up, started and stopped per phase."""

    def __init__(self, directory: str, interval_ms: int):
        from opentelemetry.exporter.otlp.json.file.metric_exporter import FileMetricExporter
        from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({"service.instance.id": "bench/rank-0"})
        self.writers = [JsonLinesWriter(os.path.join(directory, f"{s}-{time.time_ns()}.jsonl"))
                        for s in ("metrics", "traces")]
        reader = PeriodicExportingMetricReader(FileMetricExporter(stream=self.writers[0]),
                                               export_interval_millis=interval_ms)
        self.meters = MeterProvider(resource=resource, metric_readers=[reader],
                                    shutdown_on_exit=False)
        self.tracers = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.tracers.add_span_processor(BatchSpanProcessor(FileSpanExporter(
            stream=self.writers[1])))
        HostMemoryInstrumentor().instrument(meter_provider=self.meters,
                                            settings=Settings(node_metrics="on"))
        TorchLoadInstrumentor().instrument(tracer_provider=self.tracers)

    def stop(self) -> None:
        HostMemoryInstrumentor().uninstrument()
        TorchLoadInstrumentor().uninstrument()
        self.meters.shutdown()
        self.tracers.shutdown()
        for writer in self.writers:
            writer.close()


def other_threads_cpu_ns() -> dict[int, int]:
    """tid -> CPU time (ns) of every thread of this process but the calling one."""
    me, found = __import__("threading").get_native_id(), {}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != me:
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    found[int(tid)] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # ended meanwhile
    return found


def phase(workload, variant: str, seconds: float,
          directory: str) -> tuple[float, float, float]:
    """(median step, other threads' CPU per step, the step log's CPU per step) of one phase,
    in ms."""
    net, x, y = workload
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
    telemetry = None
    if variant != "off":
        telemetry = Telemetry(directory, 10_000 if variant == "defaults" else 1_000)
    step_log = variant == "census 1s + step log"
    steps, logging_s, deadline = [], 0.0, time.monotonic() + seconds
    others = other_threads_cpu_ns()
    try:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            loss = torch.nn.functional.mse_loss(net(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            record = {"step": len(steps), "loss": float(loss.detach())}
            if step_log:  # its CPU: a wait for the GIL another thread holds is theirs
                logged = time.thread_time()
                add_census_to_step_log(record, rank=0, settings=STEP_LOG)
                logging_s += time.thread_time() - logged
            steps.append(time.perf_counter() - started)
        background_ns = sum(ns - others.get(tid, 0) for tid, ns in other_threads_cpu_ns().items())
    finally:
        if telemetry is not None:
            telemetry.stop()
    # 1st tenth: warm-up
    return (statistics.median(steps[len(steps) // 10:]) * 1000,
            background_ns / 1e6 / len(steps), logging_s * 1000 / len(steps))


def measure(workload: str, pairs: int, seconds: float, directory: str) -> dict:
    model = model_for(workload)
    phase(model, "off", seconds, directory)  # warm-up: allocator, caches, imports
    ratios: dict[str, list[float]] = {v: [] for v in VARIANTS[1:]}
    costs: dict[str, list[float]] = {v: [] for v in VARIANTS}
    background: dict[str, list[float]] = {v: [] for v in VARIANTS}
    logging_ms: dict[str, list[float]] = {v: [] for v in VARIANTS}
    medians: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(pairs):
        order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
        round_ms = {v: phase(model, v, seconds, directory) for v in order}
        off_ms = round_ms["off"][0]
        for variant, (ms, background_ms, log_ms) in round_ms.items():
            medians[variant].append(ms)
            costs[variant].append((background_ms + log_ms) / off_ms)
            background[variant].append(background_ms / off_ms)
            logging_ms[variant].append(log_ms)
            if variant != "off":
                ratios[variant].append(ms / off_ms)
    return {"medians": medians, "ratios": ratios, "costs": costs, "background": background,
            "logging_ms": logging_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8, help="rounds of the three phases")
    parser.add_argument("--phase-s", type=float, default=6.0)
    parser.add_argument("--workloads", default="mlp,transformer")
    args = parser.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"{args.pairs} rounds of {args.phase_s} s phases, one process on one CPU; "
          f"python {sys.version.split()[0]}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as directory:
        for workload in args.workloads.split(","):
            result = measure(workload, args.pairs, args.phase_s, directory)
            off_ms = statistics.median(result["medians"]["off"])
            print(f"\n{workload}: median step {off_ms:.3f} ms with telemetry off "
                  f"(other threads' CPU while off: "
                  f"{100 * statistics.median(result['costs']['off']):.3f} % of a step)")
            for variant, ratios in result["ratios"].items():
                cost = statistics.median(result["costs"][variant])
                print(f"  {variant:22} step x off: median {statistics.median(ratios):.4f} "
                      f"(rounds {', '.join(f'{r:.3f}' for r in ratios)}); "
                      f"cost {100 * cost:.3f} % of a step")
                print(f"  {'':22} of which other threads "
                      f"{100 * statistics.median(result['background'][variant]):.3f} %, "
                      f"the step log's call "
                      f"{1000 * statistics.median(result['logging_ms'][variant]):.1f} µs a step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
