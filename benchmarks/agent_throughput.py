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
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR_DIR = ROOT / "collector"
sys.path.insert(0, str(COLLECTOR_DIR))
import stack as stack_module  # noqa: E402  (collector/stack.py: the local stack)
RANKS_PER_HOST = 8
FRAGMENTS = 8
SERVICE_NAME = "yeto-bench-trainer"
IDLE_SETTLE_S = 5.0
MiB = 1 << 20

# A CUDA build's host allocator stats (`.freed` > 0, so every `.current` is a gauge).
ALLOCATOR_REF = "yeto_otel.testing:realistic"


# =============================================================================================
# Load generator: one process, one simulated host, up to 8 ranks.

def _emit(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _count_points(metrics_data) -> int:
    return sum(len(m.data.data_points) for rm in metrics_data.resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics)


def _capture_shape(workdir: str, resource_attributes: dict) -> dict:
    """One real restart (save + `load_resume_anchors` + 8 `fragment_done`) on a small anchor
    file: the span shape to replay, and its OTLP/protobuf size."""
    import torch
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

    torch.set_num_threads(1)
    path = os.path.join(workdir, "shape.anchors.pt")
    save_resume_anchors(path, {f"layer{i}.weight": torch.full((32 * 1024,), float(i))
                               for i in range(FRAGMENTS)})
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource_attributes))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    restarts = 20
    for _ in range(restarts):
        with load_resume_anchors(path, tracer_provider=provider) as anchors:
            for i, name in enumerate(sorted(anchors.tensors)):
                float(anchors.tensors[name].sum())
                anchors.fragment_done(i)
    spans = memory.get_finished_spans()
    by_name = {s.name: s for s in spans}
    root, load = by_name["yeto.resume.anchors"], by_name["yeto.resume.anchors.load"]
    provider.shutdown()
    return {"root": {"name": root.name, "attributes": dict(root.attributes)},
            "child": {"name": load.name, "attributes": dict(load.attributes)},
            "events": [[e.name, dict(e.attributes)] for e in root.events],
            "otlp_bytes_per_restart": encode_spans(spans).ByteSize() / restarts}


def loadgen_main(config: dict) -> int:
    """Ranks of one simulated host. With `shape` in the config the process never imports torch
    and replays that span shape; without it, each rank resumes real anchors at `go`."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

    from yeto_otel.instrumentation import HostMemoryInstrumentor
    from yeto_otel.otel import rank_resource_attributes
    from yeto_otel.settings import Settings

    class CountingMetricExporter(OTLPMetricExporter):
        """The SDK's OTLP/gRPC exporter, counting the points it got through (or not)."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.points = self.exports = self.failed_points = self.failed_exports = 0
            self.points_per_export: list[int] = []

        def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
            n = _count_points(metrics_data)
            result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            if result is MetricExportResult.SUCCESS:
                self.points += n
                self.exports += 1
                if len(self.points_per_export) < 4:
                    self.points_per_export.append(n)
            else:
                self.failed_points += n
                self.failed_exports += 1
            return result

    class CountingSpanExporter(OTLPSpanExporter):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.spans = self.failed_spans = 0

        def export(self, spans, *args, **kwargs):
            result = super().export(spans, *args, **kwargs)
            if result is SpanExportResult.SUCCESS:
                self.spans += len(spans)
            else:
                self.failed_spans += len(spans)
            return result

    host, ranks, world = config["host"], config["ranks"], config["world_size"]
    endpoint = config["endpoint"]
    shape = config.get("shape")
    if shape is None:
        import torch

        from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

        torch.set_num_threads(1)
        anchor_path = os.path.join(config["workdir"], f"{host}.anchors.pt")
        save_resume_anchors(anchor_path, {f"layer{i}.weight": torch.full((32 * 1024,), float(i))
                                          for i in range(FRAGMENTS)})

    def restart(tracer_provider) -> None:
        """A rank's resume, as a trainer does it: load the anchors, catch up fragment by
        fragment, leave the block (the product's spans)."""
        with load_resume_anchors(anchor_path, tracer_provider=tracer_provider) as anchors:
            for i, name in enumerate(sorted(anchors.tensors)):
                float(anchors.tensors[name].sum())
                anchors.fragment_done(i)

    def replay_restart(tracer) -> None:
        """The same two spans and eight events as a real restart, without torch.load."""
        span = tracer.start_span(shape["root"]["name"], attributes=shape["root"]["attributes"])
        child = tracer.start_span(shape["child"]["name"], context=trace.set_span_in_context(span),
                                  attributes=shape["child"]["attributes"])
        child.end()
        for name, attributes in shape["events"]:
            span.add_event(name, attributes)
        span.end()

    class Rank:
        def __init__(self, rank: int, interval_s: float, span_queue: int):
            local_rank = rank % RANKS_PER_HOST
            self.settings = Settings(host_allocator=ALLOCATOR_REF, node_metrics="auto",
                                     rank=rank, local_rank=local_rank, world_size=world)
            attributes = rank_resource_attributes(self.settings, hostname=host)
            attributes["service.name"] = config["service"]
            resource = Resource.create(attributes)
            self.metric_exporter = CountingMetricExporter(endpoint=endpoint, insecure=True)
            self.meter_provider = MeterProvider(resource=resource, metric_readers=[
                PeriodicExportingMetricReader(self.metric_exporter,
                                              export_interval_millis=interval_s * 1000)])
            self.span_exporter = CountingSpanExporter(endpoint=endpoint, insecure=True)
            self.tracer_provider = TracerProvider(resource=resource)
            self.tracer_provider.add_span_processor(
                BatchSpanProcessor(self.span_exporter, max_queue_size=span_queue))
            # HostMemoryInstrumentor is a process-wide singleton, as every BaseInstrumentor:
            # a subclass per simulated rank gives each rank its own instance, running the
            # product's own instrument() on the rank's MeterProvider.
            self.instrumentor = type(f"HostMemoryInstrumentorRank{rank}",
                                     (HostMemoryInstrumentor,), {"_instance": None})()
            self.instrumentor.instrument(meter_provider=self.meter_provider,
                                         settings=self.settings)
            if self.instrumentor.census is None:
                raise RuntimeError(f"rank {rank}: the census was not instrumented")
            self.tracer = self.tracer_provider.get_tracer("yeto_bench.restart")
            self.spans_created = 0

        def shutdown(self) -> None:
            self.tracer_provider.shutdown()   # flushes the batch processor
            self.meter_provider.shutdown()    # a last collection and export
            self.instrumentor.uninstrument()

    def counts(live: list[Rank]) -> dict:
        return {"points": sum(r.metric_exporter.points for r in live),
                "exports": sum(r.metric_exporter.exports for r in live),
                "failed_points": sum(r.metric_exporter.failed_points for r in live),
                "failed_exports": sum(r.metric_exporter.failed_exports for r in live),
                "spans_created": sum(r.spans_created for r in live),
                "spans": sum(r.span_exporter.spans for r in live),
                "failed_spans": sum(r.span_exporter.failed_spans for r in live)}

    _emit({"event": "ready", "pid": os.getpid(), "host": host, "ranks": ranks})
    live: list[Rank] = []
    for line in sys.stdin:
        command = json.loads(line)
        cmd = command["cmd"]
        if cmd == "go":
            live = [Rank(r, command["interval_s"], command.get("span_queue", 2048))
                    for r in ranks]
            if command.get("restart", False):
                for rank in live:
                    restart(rank.tracer_provider)
                    rank.spans_created += 2
            _emit({"event": "started", "t": time.monotonic()})
        elif cmd == "spans":
            # Replayed restarts at a steady pace (restarts/s for this process), round robin
            # over the ranks, for `seconds`; then every rank's batch processor is flushed.
            rate, seconds = command["restarts_per_s"], command["seconds"]
            t0 = time.monotonic()
            end = t0 + seconds
            done = 0
            while (now := time.monotonic()) < end:
                due = int((now - t0) * rate)
                while done < due:
                    rank = live[done % len(live)]
                    replay_restart(rank.tracer)
                    rank.spans_created += 2
                    done += 1
                time.sleep(0.002)
            t_created = time.monotonic()
            for rank in live:
                rank.tracer_provider.force_flush()
            _emit({"event": "spans_done", "t0": t0, "t_created": t_created,
                   "t_flushed": time.monotonic(), "restarts": done,
                   "restarts_scheduled": int(seconds * rate), **counts(live)})
        elif cmd == "stop":
            for rank in live:
                rank.shutdown()
            _emit({"event": "stopped", **counts(live),
                   "points_per_export": {str(r.settings.rank): r.metric_exporter.points_per_export
                                         for r in live}})
            live = []
        elif cmd == "exit":
            break
    return 0


# =============================================================================================
# Orchestrator

class BenchError(RuntimeError):
    pass


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def status_kib(pid: int, *keys: str) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in keys:
                out[name] = int(rest.split()[0])
    return out


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine_info() -> dict:
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f
                      if line.startswith("model name")), "?")
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    versions = {}
    for dist in ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc", "grpcio",
                 "yeto-otel", "torch"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {"nproc": os.cpu_count(), "cpu": model, "mem_gib": round(mem_kib / (1 << 20), 1),
            "kernel": platform.release(), "python": platform.python_version(), **versions}


def scrape(url: str) -> dict[str, dict[str, float]]:
    """A component's own metrics, name (without a `_total` suffix) -> {label set: value}."""
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as response:
        metrics = stack_module.parse_metrics_text(response.read().decode())
    out: dict[str, dict[str, float]] = {}
    for name, series in metrics.items():
        out.setdefault(name.removesuffix("_total"), {}).update(series)
    return out


def total(metrics: dict, name: str, contains: str = "") -> float:
    return sum(v for labels, v in metrics.get(name, {}).items() if contains in labels)


DROP_WORDS = ("refused", "failed", "dropped")


def drop_counters(metrics: dict) -> dict[str, float]:
    """Every counter of the agent that counts lost or rejected data, with its total."""
    return {name: sum(series.values()) for name, series in metrics.items()
            if name.startswith("otelcol_") and any(w in name for w in DROP_WORDS)}


def agent_counts(metrics: dict) -> dict[str, float]:
    return {
        "accepted_points": total(metrics, "otelcol_receiver_accepted_metric_points"),
        "accepted_spans": total(metrics, "otelcol_receiver_accepted_spans"),
        "sent_points": total(metrics, "otelcol_exporter_sent_metric_points",
                             'exporter="prometheus_remote_write"'),
        "sent_spans": total(metrics, "otelcol_exporter_sent_spans", 'exporter="otlp_grpc/traces"'),
        "queue_size": total(metrics, "otelcol_exporter_queue_size"),
        "in_flight": total(metrics, "otelcol_exporter_in_flight_requests"),
        "heap_alloc": total(metrics, "otelcol_process_runtime_heap_alloc_bytes"),
    }


class LoadGen:
    """One load-generator process (one simulated host)."""

    def __init__(self, config: dict, log_path: Path):
        self.config = config
        self.log = open(log_path, "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--loadgen", json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.log_path = log_path
        self._buffer = b""
        self.pid = self.proc.pid

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, event: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"load generator {self.config['host']}: no {event!r} within "
                                 f"{timeout}s; log {self.log_path}:\n{self.log_tail()}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise BenchError(f"load generator {self.config['host']} exited "
                                     f"({self.proc.wait()}); log {self.log_path}:\n"
                                     f"{self.log_tail()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if message.get("event") != event:
            raise BenchError(f"load generator {self.config['host']}: expected {event!r}, "
                             f"got {message}")
        return message

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send({"cmd": "exit"})
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Sampler(threading.Thread):
    """The agent's VmRSS every 0.5 s and its Go heap every 2 s, during a window."""

    def __init__(self, pid: int, telemetry_url: str):
        super().__init__(daemon=True)
        self.pid, self.url = pid, telemetry_url
        self.rss: list[int] = []
        self.heap: list[float] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop_event.is_set():
            self.rss.append(status_kib(self.pid, "VmRSS")["VmRSS"])
            if n % 4 == 0:
                try:
                    self.heap.append(agent_counts(scrape(self.url))["heap_alloc"])
                except OSError:
                    pass
            n += 1
            self._stop_event.wait(0.5)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


class Window:
    """CPU of the agent, the load generators, the backends and the machine over a window;
    the agent's counters at both ends; its memory during it."""

    def __init__(self, stack, gens: list[LoadGen]):
        self.stack, self.gens = stack, gens
        self.agent = stack.pid("agent")
        self.backends = [stack.pid("jaeger"), stack.pid("prometheus")]

    def _cpu(self) -> dict:
        return {"t": time.monotonic(), "agent": cpu_seconds(self.agent),
                "loadgen": sum(cpu_seconds(g.pid) for g in self.gens),
                "backends": sum(cpu_seconds(p) for p in self.backends),
                "machine": machine_busy()}

    def begin(self) -> None:
        self.start_counts = agent_counts(scrape(self.stack.agent_telemetry_url))
        self.start_cpu = self._cpu()
        self.sampler = Sampler(self.agent, self.stack.agent_telemetry_url)
        self.sampler.start()

    def end(self) -> dict:
        end_cpu = self._cpu()
        self.sampler.stop()
        end_counts = agent_counts(scrape(self.stack.agent_telemetry_url))
        memory = status_kib(self.agent, "VmRSS", "VmHWM")
        s, e = self.start_cpu, end_cpu
        seconds = e["t"] - s["t"]
        busy = (e["machine"][0] - s["machine"][0]) / max(1, e["machine"][1] - s["machine"][1])
        points = end_counts["accepted_points"] - self.start_counts["accepted_points"]
        spans = end_counts["accepted_spans"] - self.start_counts["accepted_spans"]
        agent_cpu = 100 * (e["agent"] - s["agent"]) / seconds
        rss = self.sampler.rss or [memory["VmRSS"]]
        return {
            "seconds": round(seconds, 2),
            "points": int(points), "spans": int(spans),
            "points_per_s": points / seconds, "spans_per_s": spans / seconds,
            "agent_cpu_pct": agent_cpu,
            "agent_cpu_ms_per_1000_points": (1e6 * (e["agent"] - s["agent"]) / points
                                             if points else None),
            "loadgen_cpu_pct": 100 * (e["loadgen"] - s["loadgen"]) / seconds,
            "backends_cpu_pct": 100 * (e["backends"] - s["backends"]) / seconds,
            "machine_busy_pct": 100 * busy * os.cpu_count(),
            "rss_mean_mib": sum(rss) / len(rss) / 1024, "rss_max_mib": max(rss) / 1024,
            "vmhwm_mib": memory["VmHWM"] / 1024,
            "heap_max_mib": max(self.sampler.heap, default=end_counts["heap_alloc"]) / MiB,
        }


class Phase:
    """A fresh stack and one load generator per simulated host."""

    def __init__(self, make_stack, name: str, ranks: int, workdir: Path):
        self.name, self.ranks = name, ranks
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True)
        self.stack = make_stack(self.workdir / "stack")
        self.hosts = [list(range(h, min(ranks, h + RANKS_PER_HOST)))
                      for h in range(0, ranks, RANKS_PER_HOST)]
        self.gens: list[LoadGen] = []
        self.exported = {"points": 0, "exports": 0, "spans": 0, "spans_created": 0,
                         "failed_points": 0, "failed_exports": 0, "failed_spans": 0}
        self.points_per_export: dict[str, list[int]] = {}
        self.failures: list[str] = []

    def start_stack(self) -> None:
        self.stack.start()

    def start_loadgens(self, shape: dict | None = None) -> None:
        for h, ranks in enumerate(self.hosts):
            config = {"host": f"bench-host-{h:02d}", "ranks": ranks, "world_size": self.ranks,
                      "endpoint": self.stack.agent_otlp_grpc, "service": SERVICE_NAME,
                      "workdir": str(self.workdir), "shape": shape}
            self.gens.append(LoadGen(config, self.workdir / f"loadgen-{h:02d}.log"))
        for g in self.gens:
            g.expect("ready", timeout=180)

    def go(self, interval_s: float, restart: bool, span_queue: int = 2048) -> float:
        """Start every rank; returns the monotonic time by which all have started."""
        for g in self.gens:
            g.send({"cmd": "go", "interval_s": interval_s, "restart": restart,
                    "span_queue": span_queue})
        return max(g.expect("started", timeout=120)["t"] for g in self.gens)

    def stop(self) -> None:
        for g in self.gens:
            g.send({"cmd": "stop"})
        for g in self.gens:
            result = g.expect("stopped", timeout=120)
            for key in self.exported:
                self.exported[key] += result[key]
            self.points_per_export.update(result["points_per_export"])

    def drain(self, spans: int | None = None, timeout: float = 120.0) -> dict:
        """Poll the agent until it accepted everything the ranks exported and sent it on.

        Metrics and spans once the ranks are stopped; with `spans` (while the ranks run and
        export metrics), only the spans. Returns early once a drop counter is above 0: what
        was dropped will never be sent."""
        deadline = time.monotonic() + timeout
        while True:
            metrics = scrape(self.stack.agent_telemetry_url)
            counts = agent_counts(metrics)
            spans_done = (counts["accepted_spans"] == (self.exported["spans"] if spans is None
                                                       else spans)
                          and counts["sent_spans"] == counts["accepted_spans"])
            points_done = spans is not None or (
                counts["accepted_points"] == self.exported["points"]
                and counts["sent_points"] == counts["accepted_points"]
                and counts["queue_size"] == 0 and counts["in_flight"] == 0)
            if spans_done and points_done:
                return counts
            dropped = {k: v for k, v in drop_counters(metrics).items() if v}
            if dropped or time.monotonic() > deadline:
                why = f"drops {dropped}" if dropped else f"not within {timeout:g} s"
                expected = (f"{spans} spans" if spans is not None else
                            f"{self.exported['points']} points, {self.exported['spans']} spans")
                self.failures.append(
                    f"{self.name}: not everything went through ({why}): the agent accepted "
                    f"{counts['accepted_points']:.0f} points, {counts['accepted_spans']:.0f} "
                    f"spans and sent {counts['sent_points']:.0f} points, "
                    f"{counts['sent_spans']:.0f} spans; the ranks exported {expected}")
                return counts
            time.sleep(0.1)

    def check_drops(self) -> dict:
        metrics = scrape(self.stack.agent_telemetry_url)
        drops = drop_counters(metrics)
        for name, value in drops.items():
            if value:
                self.failures.append(f"{self.name}: agent counter {name} = {value:g}")
        for key in ("failed_points", "failed_exports", "failed_spans"):
            if self.exported[key]:
                self.failures.append(f"{self.name}: the ranks' exporters report {key} = "
                                     f"{self.exported[key]}")
        if self.exported["spans"] != self.exported["spans_created"]:
            self.failures.append(f"{self.name}: the ranks created {self.exported['spans_created']}"
                                 f" spans, their exporters sent {self.exported['spans']}")
        return drops

    def check_prometheus(self, timeout: float = 60.0) -> dict:
        """One sample per exported point; a series per rank; node metrics per host."""
        s = self.stack

        def samples() -> int:
            # count_over_time drops the metric name, so count name by name.
            names = sorted({series["__name__"]
                            for series in s.prometheus_series('{__name__=~"yeto_.+"}')})
            n = 0
            for name in names:
                result = s.prometheus_query(f"sum(count_over_time({name}[2h]))")
                n += int(float(result[0]["value"][1])) if result else 0
            return n

        deadline = time.monotonic() + timeout
        while (n := samples()) != self.exported["points"] and time.monotonic() < deadline:
            time.sleep(0.5)
        instances = {r["metric"].get("instance") for r in s.prometheus_query(
            'count by (instance) ({__name__=~"yeto_process_.+"})')}
        node = {r["metric"].get("instance") for r in s.prometheus_query(
            'count by (instance) ({__name__=~"yeto_node_.+"})')}
        want_instances = {f"bench-host-{h:02d}/rank-{r}"
                          for h, ranks in enumerate(self.hosts) for r in ranks}
        want_node = {f"bench-host-{h:02d}/rank-{ranks[0]}" for h, ranks in enumerate(self.hosts)}
        if n != self.exported["points"]:
            self.failures.append(f"{self.name}: Prometheus has {n} samples, the ranks exported "
                                 f"{self.exported['points']} points")
        if instances != want_instances:
            self.failures.append(f"{self.name}: Prometheus rank series: missing "
                                 f"{sorted(want_instances - instances)[:5]}, unexpected "
                                 f"{sorted(instances - want_instances)[:5]}")
        if node != want_node:
            self.failures.append(f"{self.name}: node metrics from {sorted(node)[:10]}, "
                                 f"expected local rank 0 of each host {sorted(want_node)[:10]}")
        return {"samples": n, "rank_series": len(instances), "node_series_instances": len(node)}

    def check_jaeger(self, restarts_per_rank: int, query_traces: bool,
                     timeout: float = 60.0) -> dict:
        s = self.stack
        url = f"http://127.0.0.1:{s.ports['jaeger_telemetry']}/metrics"
        sent = self.exported["spans"]
        deadline = time.monotonic() + timeout
        while True:
            m = scrape(url)
            received = total(m, "otelcol_receiver_accepted_spans")
            stored = total(m, "otelcol_exporter_sent_spans", "jaeger_storage_exporter")
            if received == stored == sent or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        jaeger_drops = {k: v for k, v in drop_counters(m).items() if v}
        if not received == stored == sent:
            self.failures.append(f"{self.name}: Jaeger received {received:g}, stored {stored:g} "
                                 f"spans; the ranks exported {sent}")
        if jaeger_drops:
            self.failures.append(f"{self.name}: Jaeger drop counters {jaeger_drops}")
        out = {"received": int(received), "stored": int(stored)}
        if not query_traces:
            return out
        # The query API: one trace per restart, each with the product's span shape.
        want = self.ranks * restarts_per_rank
        deadline = time.monotonic() + timeout
        while True:
            traces = s.jaeger_traces(SERVICE_NAME, limit=want + 100)
            if len(traces) >= want or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        per_instance: dict[str, int] = {}
        bad = 0
        spans = 0
        for t in traces:
            spans += len(t["spans"])
            names = sorted(sp["operationName"] for sp in t["spans"])
            root = next((sp for sp in t["spans"] if sp["operationName"] == "yeto.resume.anchors"),
                        None)
            if names != ["yeto.resume.anchors", "yeto.resume.anchors.load"] or root is None or \
                    sum(1 for log in root.get("logs", [])
                        if any(f["value"] == "fragment_done" for f in log["fields"])) != FRAGMENTS:
                bad += 1
                continue
            tags = {tag["key"]: tag["value"] for tag in t["processes"][root["processID"]]["tags"]}
            instance = tags.get("service.instance.id")
            per_instance[instance] = per_instance.get(instance, 0) + 1
        if len(traces) != want or bad or len(per_instance) != self.ranks or \
                set(per_instance.values()) != {restarts_per_rank}:
            self.failures.append(f"{self.name}: Jaeger query: {len(traces)} traces (want {want}), "
                                 f"{bad} of the wrong shape, {len(per_instance)} ranks")
        out.update({"traces": len(traces), "trace_spans": spans, "ranks_with_traces":
                    len(per_instance)})
        return out

    def close(self) -> None:
        for g in self.gens:
            g.close()
        self.gens = []
        # The agent's and Jaeger's own counters as they were at the end, beside the logs.
        import urllib.request
        for name, url in (("agent", self.stack.agent_telemetry_url),
                          ("jaeger", f"http://127.0.0.1:{self.stack.ports['jaeger_telemetry']}"
                                     "/metrics")):
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    (self.workdir / f"{name}-telemetry.txt").write_bytes(response.read())
            except OSError:
                pass
        self.stack.close()


def wait_until(t: float) -> None:
    """Wait out a measurement window (nothing to poll: the window is the measurement)."""
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))


def run_idle(make_stack, workdir: Path, seconds: float) -> dict:
    phase = Phase(make_stack, "idle", 0, workdir)
    try:
        phase.start_stack()
        # A started agent settles (Go runtime, queue compaction on start) before the window.
        wait_until(time.monotonic() + IDLE_SETTLE_S)
        window = Window(phase.stack, [])
        window.begin()
        wait_until(time.monotonic() + seconds)
        result = window.end()
        result.update(name="idle", ranks=0, hosts=0, interval_s=None, failures=[])
        return result
    finally:
        phase.close()


def run_ranks(make_stack, workdir: Path, ranks: int, interval_s: float,
              seconds: float) -> dict:
    phase = Phase(make_stack, f"ranks-{ranks}", ranks, workdir)
    try:
        phase.start_stack()
        phase.start_loadgens()
        started = phase.go(interval_s, restart=True)
        # Half an interval in: the window's edges fall between the ranks' exports.
        wait_until(started + interval_s / 2)
        window = Window(phase.stack, phase.gens)
        window.begin()
        wait_until(window.start_cpu["t"] + seconds)
        result = window.end()
        phase.stop()
        counts = phase.drain()
        drops = phase.check_drops()
        result["prometheus"] = phase.check_prometheus()
        result["jaeger"] = phase.check_jaeger(restarts_per_rank=1, query_traces=True)
        per_export = sorted({n for v in phase.points_per_export.values() for n in v})
        result.update(name=f"{ranks} ranks", ranks=ranks, hosts=len(phase.hosts),
                      interval_s=interval_s, exported=phase.exported, agent_final=counts,
                      drop_counters=drops, points_per_export=per_export,
                      failures=phase.failures)
        return result
    finally:
        phase.close()


def capture_shape(workdir: Path, world_size: int) -> dict:
    """The restart span shape from one real restart, in a child process (torch stays out of the
    headroom load generators)."""
    from yeto_otel.otel import rank_resource_attributes
    from yeto_otel.settings import Settings

    attributes = rank_resource_attributes(Settings(rank=0, local_rank=0, world_size=world_size),
                                          hostname="bench-host-00")
    attributes["service.name"] = SERVICE_NAME
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--capture-shape",
         json.dumps({"workdir": str(workdir), "resource": attributes})],
        stdout=subprocess.PIPE, env=env, check=True, text=True, timeout=300)
    return json.loads(done.stdout)


def run_headroom(make_stack, workdir: Path, ranks: int, intervals: list[float],
                 seconds: float, span_rates: list[float], span_seconds: float) -> dict:
    phase = Phase(make_stack, "headroom", ranks, workdir)
    steps, span_steps = [], []
    try:
        shape = capture_shape(phase.workdir, ranks)
        phase.start_stack()
        phase.start_loadgens(shape)
        # 1. Points: every rank exports the census every `interval` s.
        for interval in intervals:
            started = phase.go(interval, restart=False)
            wait_until(started + max(interval, 1.0))
            window = Window(phase.stack, phase.gens)
            window.begin()
            wait_until(window.start_cpu["t"] + seconds)
            result = window.end()
            phase.stop()
            phase.drain()
            # One export of every rank per interval is the schedule the ranks were given.
            per_export = {r: v[-1] for r, v in phase.points_per_export.items() if v}
            scheduled = sum(per_export.values()) / interval
            result.update(name=f"census every {interval:g} s", interval_s=interval,
                          scheduled_points_per_s=scheduled,
                          kept_schedule=result["points_per_s"] >= 0.8 * scheduled)
            steps.append(result)
            print(f"  headroom: interval {interval:g} s: {result['points_per_s']:.0f} points/s "
                  f"of {scheduled:.0f} scheduled, agent {result['agent_cpu_pct']:.1f}% CPU, "
                  f"load generators {result['loadgen_cpu_pct']:.0f}%, machine "
                  f"{result['machine_busy_pct']:.0f}%", file=sys.stderr, flush=True)
            if phase.failures or not result["kept_schedule"]:
                break
        # 2. Spans: restarts at a steady pace on every rank (census every 10 s meanwhile).
        if span_rates and not phase.failures:
            started = phase.go(10.0, restart=False, span_queue=1 << 16)
            wait_until(started + 1.0)
            for rate in span_rates:
                window = Window(phase.stack, phase.gens)
                window.begin()
                for g in phase.gens:
                    g.send({"cmd": "spans", "restarts_per_s": rate / 2 / len(phase.gens),
                            "seconds": span_seconds})
                done = [g.expect("spans_done", timeout=span_seconds + 300) for g in phase.gens]
                at_flush = agent_counts(scrape(phase.stack.agent_telemetry_url))
                t_flushed = time.monotonic()
                live_spans = sum(d["spans"] for d in done)
                counts = phase.drain(spans=phase.exported["spans"] + live_spans)
                t_through = time.monotonic()
                result = window.end()
                t0 = min(d["t0"] for d in done)
                created = sum(2 * d["restarts"] for d in done)
                scheduled = sum(2 * d["restarts_scheduled"] for d in done)
                dropped = {k: v for k, v in drop_counters(
                    scrape(phase.stack.agent_telemetry_url)).items() if v}
                accepted = at_flush["accepted_spans"] - window.start_counts["accepted_spans"]
                result.update(
                    name=f"{rate:g} spans/s", scheduled_spans_per_s=rate,
                    created_spans_per_s=created / (max(d["t_created"] for d in done) - t0),
                    kept_schedule=created >= 0.95 * scheduled, spans_created=created,
                    received_spans_per_s=accepted / (t_flushed - t0),
                    through_s=t_through - t0, through_spans_per_s=created / (t_through - t0),
                    agent=counts, dropped=dropped,
                    agent_cpu_ms_per_1000_spans=(1000 * result["agent_cpu_pct"] * 10
                                                 / result["spans_per_s"]
                                                 if result["spans_per_s"] else None))
                span_steps.append(result)
                print(f"  headroom: {rate:g} spans/s scheduled: {result['created_spans_per_s']:.0f} "
                      f"created/s, {result['received_spans_per_s']:.0f} received/s, all through "
                      f"after {result['through_s']:.1f} s, agent {result['agent_cpu_pct']:.1f}% CPU, "
                      f"load generators {result['loadgen_cpu_pct']:.0f}%, machine "
                      f"{result['machine_busy_pct']:.0f}%"
                      + (f", DROPPED {dropped}" if dropped else ""), file=sys.stderr, flush=True)
                if dropped or phase.failures or not result["kept_schedule"]:
                    break
            phase.stop()
            phase.drain()
        drops = phase.check_drops()
        prometheus = phase.check_prometheus()
        # Tens of thousands of traces: Jaeger's own receiver and storage counters, not the
        # query API, confirm them.
        jaeger = phase.check_jaeger(restarts_per_rank=0, query_traces=False)
        return {"ranks": ranks, "hosts": len(phase.hosts), "shape": shape, "steps": steps,
                "span_steps": span_steps, "exported": phase.exported, "drop_counters": drops,
                "prometheus": prometheus, "jaeger": jaeger, "failures": phase.failures}
    finally:
        phase.close()


# ---------------------------------------------------------------------------------------------
# Report

def _f(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"machine: nproc {m['nproc']}, {m['cpu']}, {m['mem_gib']} GiB, kernel {m['kernel']}, "
             f"Python {m['python']}, opentelemetry-sdk {m['opentelemetry-sdk']}, grpcio "
             f"{m['grpcio']}, yeto-otel {m['yeto-otel']}; loadavg at start {report['loadavg_start']}"
             f", at end {report['loadavg_end']}", ""]
    lines.insert(1, f"agent config: {report['agent_config']}")
    idle = next((r["agent_cpu_pct"] for r in report["phases"] if r["ranks"] == 0), None)
    lines += ["| phase | ranks (hosts) | census every | window s | points/s accepted | "
              "restart spans | agent CPU % of one core (above idle) | "
              "agent VmRSS MiB mean / max | VmHWM MiB | Go heap max MiB | load generators CPU % | "
              "backends CPU % | machine busy % (of 200) | drops | Prometheus samples = points "
              "exported | Jaeger: restart traces |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in report["phases"]:
        if r["ranks"] == 0:
            ok, prom, jaeger, spans = "0", "-", "-", "-"
        else:
            ok = "0" if not r["failures"] else "**SEE FAILURES**"
            prom = f"{r['prometheus']['samples']:,} = {r['exported']['points']:,}"
            jaeger = f"{r['jaeger'].get('traces', '-')} of {r['ranks']}"
            spans = f"{r['exported']['spans']}"
        cpu = _f(r["agent_cpu_pct"], 2)
        if idle is not None and r["ranks"]:
            cpu += f" ({r['agent_cpu_pct'] - idle:+.2f})"
        lines.append(
            f"| {r['name']} | {r['ranks']} ({r['hosts']}) | "
            f"{_f(r['interval_s'], 0) + ' s' if r['interval_s'] else '-'} | {_f(r['seconds'])} | "
            f"{_f(r['points_per_s'])} | {spans} | {cpu} | {_f(r['rss_mean_mib'])} / "
            f"{_f(r['rss_max_mib'])} | {_f(r['vmhwm_mib'])} | {_f(r['heap_max_mib'])} | "
            f"{_f(r['loadgen_cpu_pct'], 0)} | {_f(r['backends_cpu_pct'], 0)} | "
            f"{_f(r['machine_busy_pct'], 0)} | {ok} | {prom} | {jaeger} |")
    h = report.get("headroom")
    if h:
        lines += ["", f"Headroom, points: {h['ranks']} ranks on {h['hosts']} simulated hosts, "
                  "shorter census intervals (fresh SDK providers for each step):", "",
                  "| step | points/s scheduled | points/s accepted | kept schedule | "
                  "agent CPU % of one core | agent CPU ms per 1000 points | agent VmRSS MiB max | "
                  "VmHWM MiB | Go heap max MiB | load generators CPU % | backends CPU % | "
                  "machine busy % (of 200) |",
                  "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for s in h["steps"]:
            lines.append(
                f"| {s['name']} | {_f(s['scheduled_points_per_s'], 0)} | {_f(s['points_per_s'], 0)}"
                f" | {'yes' if s['kept_schedule'] else 'no'} | {_f(s['agent_cpu_pct'], 1)} | "
                f"{_f(s['agent_cpu_ms_per_1000_points'], 0)} | {_f(s['rss_max_mib'])} | "
                f"{_f(s['vmhwm_mib'])} | {_f(s['heap_max_mib'])} | {_f(s['loadgen_cpu_pct'], 0)} | "
                f"{_f(s['backends_cpu_pct'], 0)} | {_f(s['machine_busy_pct'], 0)} |")
        if h["span_steps"]:
            shape = h["shape"]
            lines += ["", f"Headroom, spans: restarts replayed at a steady pace over the same "
                      f"ranks (one restart = 2 spans + {len(shape['events'])} events, "
                      f"{shape['otlp_bytes_per_restart']:,.0f} B of OTLP protobuf), census every "
                      "10 s meanwhile. Received/s: spans the agent accepted until every rank had "
                      "flushed, over that time; through/s: spans created over the time until the "
                      "agent had sent every one on (Jaeger acknowledged it). The CPU and memory "
                      "columns cover that whole window:", "",
                      "| step | spans/s created | kept schedule | spans accepted | "
                      "spans/s received by the agent | all sent on after s | spans/s through | "
                      "agent CPU % of one core | "
                      "agent CPU ms per 1000 spans | agent VmRSS MiB max | VmHWM MiB | "
                      "Go heap max MiB | load generators CPU % | backends CPU % | "
                      "machine busy % (of 200) | agent drop counters |",
                      "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
            for s in h["span_steps"]:
                dropped = ", ".join(f"{k} {v:,.0f}" for k, v in s["dropped"].items()) or "0"
                lines.append(
                    f"| {s['name']} | {_f(s['created_spans_per_s'], 0)} | "
                    f"{'yes' if s['kept_schedule'] else 'no'} | {s['spans']:,} | "
                    f"{_f(s['received_spans_per_s'], 0)} | {_f(s['through_s'], 1)} | "
                    f"{_f(s['through_spans_per_s'], 0)} | "
                    f"{_f(s['agent_cpu_pct'], 1)} | {_f(s['agent_cpu_ms_per_1000_spans'], 0)} | "
                    f"{_f(s['rss_max_mib'])} | {_f(s['vmhwm_mib'])} | {_f(s['heap_max_mib'])} | "
                    f"{_f(s['loadgen_cpu_pct'], 0)} | {_f(s['backends_cpu_pct'], 0)} | "
                    f"{_f(s['machine_busy_pct'], 0)} | {dropped} |")
        lines += ["", f"Headroom totals: {h['exported']['points']:,} points and "
                  f"{h['exported']['spans']:,} spans exported by the ranks; Prometheus "
                  f"{h['prometheus']['samples']:,} samples; Jaeger received "
                  f"{h['jaeger']['received']:,} spans, stored {h['jaeger']['stored']:,}; "
                  "failures: " + ("none" if not h["failures"] else "; ".join(h["failures"]))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
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
    args = p.parse_args(argv)

    if args.loadgen:
        return loadgen_main(json.loads(args.loadgen))
    if args.capture_shape:
        config = json.loads(args.capture_shape)
        print(json.dumps(_capture_shape(config["workdir"], config["resource"])))
        return 0

    agent_config = Path(args.agent_config).resolve()

    def make_stack(workdir: Path):
        return stack_module.Stack(workdir, agent_config=agent_config)

    report = {"machine": machine_info(), "loadavg_start": loadavg(), "command": sys.argv,
              "agent_config": str(agent_config), "phases": []}
    print(f"loadavg at start: {report['loadavg_start']}", file=sys.stderr, flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="yeto-agent-bench-"))
    failures: list[str] = []
    try:
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
                make_stack, workdir, args.headroom_ranks,
                [float(x) for x in args.headroom_intervals.split(",") if x.strip()],
                args.headroom_seconds,
                [float(x) for x in args.span_rates.split(",") if x.strip()], args.span_seconds)
            failures += report["headroom"]["failures"]
    except BenchError as error:
        failures.append(str(error))
    finally:
        report["loadavg_end"] = loadavg()
        report["failures"] = failures
        if args.keep or failures:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            import shutil
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


if __name__ == "__main__":
    sys.exit(main())
