"""A simulated rank, as a load generator runs it: what a real rank sends.

Its own SDK `MeterProvider` and `TracerProvider` with its own Resource, the product's census
(`HostMemoryInstrumentor().instrument(meter_provider=..., settings=...)`), a
`PeriodicExportingMetricReader` and a `BatchSpanProcessor` with the OTLP/gRPC exporters, wrapped
to count every point and span they got through. Imported by the load-generator process only;
torch only when a rank resumes real anchors.
"""

from __future__ import annotations

import os

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

from .common import ALLOCATOR_REF, FRAGMENTS, RANKS_PER_HOST


def count_points(metrics_data) -> int:
    return sum(len(m.data.data_points) for rm in metrics_data.resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics)


class CountingMetricExporter(OTLPMetricExporter):
    """The SDK's OTLP/gRPC exporter, counting the points it got through (or not)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.points = self.exports = self.failed_points = self.failed_exports = 0
        self.points_per_export: list[int] = []

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
        n = count_points(metrics_data)
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


class Rank:
    """One rank of a simulated host (`config`: the load generator's host, world size,
    endpoint and service name)."""

    def __init__(self, rank: int, config: dict, interval_s: float, span_queue: int):
        self.settings = Settings(host_allocator=ALLOCATOR_REF, node_metrics="auto", rank=rank,
                                 local_rank=rank % RANKS_PER_HOST,
                                 world_size=config["world_size"])
        attributes = rank_resource_attributes(self.settings, hostname=config["host"])
        attributes["service.name"] = config["service"]
        resource = Resource.create(attributes)
        endpoint = config["endpoint"]
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
        self.instrumentor.instrument(meter_provider=self.meter_provider, settings=self.settings)
        if self.instrumentor.census is None:
            raise RuntimeError(f"rank {rank}: the census was not instrumented")
        self.tracer = self.tracer_provider.get_tracer("yeto_bench.restart")
        self.spans_created = 0

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()   # flushes the batch processor
        self.meter_provider.shutdown()    # a last collection and export
        self.instrumentor.uninstrument()


def counts(live: list[Rank]) -> dict:
    """What the ranks' exporters got through (or not), summed."""
    return {"points": sum(r.metric_exporter.points for r in live),
            "exports": sum(r.metric_exporter.exports for r in live),
            "failed_points": sum(r.metric_exporter.failed_points for r in live),
            "failed_exports": sum(r.metric_exporter.failed_exports for r in live),
            "spans_created": sum(r.spans_created for r in live),
            "spans": sum(r.span_exporter.spans for r in live),
            "failed_spans": sum(r.span_exporter.failed_spans for r in live)}


def save_small_anchors(path: str) -> None:
    """A small anchor file (8 tensors of 32 Ki floats, 1 MiB) for the ranks to resume from."""
    import torch

    from yeto_otel.anchors import save_resume_anchors

    torch.set_num_threads(1)
    save_resume_anchors(path, {f"layer{i}.weight": torch.full((32 * 1024,), float(i))
                               for i in range(FRAGMENTS)})


def restart(anchor_path: str, tracer_provider) -> None:
    """A rank's resume, as a trainer does it: load the anchors, catch up fragment by
    fragment, leave the block (the product's spans)."""
    from yeto_otel.anchors import load_resume_anchors

    with load_resume_anchors(anchor_path, tracer_provider=tracer_provider) as anchors:
        for i, name in enumerate(sorted(anchors.tensors)):
            float(anchors.tensors[name].sum())
            anchors.fragment_done(i)


def replay_restart(tracer, shape: dict) -> None:
    """The same two spans and eight events as a real restart, without torch.load."""
    span = tracer.start_span(shape["root"]["name"], attributes=shape["root"]["attributes"])
    child = tracer.start_span(shape["child"]["name"], context=trace.set_span_in_context(span),
                              attributes=shape["child"]["attributes"])
    child.end()
    for name, attributes in shape["events"]:
        span.add_event(name, attributes)
    span.end()


def anchor_path_for(workdir: str, host: str) -> str:
    return os.path.join(workdir, f"{host}.anchors.pt")
