"""Exporters that export only in the process that created them.

A forked child inherits the SDK: its providers, its buffers of the parent's pending data, and
exporters holding the parent's files and connections; the SDK even restarts their threads in
the child. Whatever such a copy would export (the parent's spans a second time, the child's
memory under the parent's resource or a random new identity, writes into the parent's files,
a gRPC channel used across a fork) is wrong, so these wrappers drop it: in any process but the
one that made them, `export` reports success and sends nothing.

In the owner, a plain process that has since become a rank (`_late_rank`) exports its spans and
metrics under the rank's identity: the exporters are where the data leaves, and the SDK's
providers keep the resource they were made with.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ._late_rank import adopted_resource

__all__ = ["OwnerOnlyLogExporter", "OwnerOnlyMetricExporter", "OwnerOnlySpanExporter",
           "guard_metric_readers"]


class _Owned:
    """What the three wrappers share: the owner's pid, and `shutdown` / `force_flush` that
    reach the wrapped exporter only in the owner (a child must not close the owner's files)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.owner_pid = os.getpid()

    def _here(self) -> bool:
        return os.getpid() == self.owner_pid

    def _export(self, batch, success):
        return self.inner.export(batch) if self._here() else success

    def shutdown(self) -> None:
        if self._here():
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis) if self._here() else True


def _under(resource, span: ReadableSpan) -> ReadableSpan:
    return ReadableSpan(name=span.name, context=span.context, parent=span.parent,
                        resource=resource, attributes=span.attributes, events=span.events,
                        links=span.links, kind=span.kind, status=span.status,
                        start_time=span.start_time, end_time=span.end_time,
                        instrumentation_scope=span.instrumentation_scope)


class OwnerOnlySpanExporter(_Owned, SpanExporter):
    def export(self, spans: Sequence) -> SpanExportResult:
        if self._here():
            resource = adopted_resource()
            if resource is not None:
                spans = [_under(resource, span) for span in spans]
        return self._export(spans, SpanExportResult.SUCCESS)


class OwnerOnlyLogExporter(_Owned, LogRecordExporter):
    def export(self, batch: Sequence) -> LogRecordExportResult:
        return self._export(batch, LogRecordExportResult.SUCCESS)


class OwnerOnlyMetricExporter(_Owned, MetricExporter):
    def __init__(self, inner: MetricExporter) -> None:
        _Owned.__init__(self, inner)
        # The reader asks the exporter which temporality and aggregation it wants.
        MetricExporter.__init__(self, preferred_temporality=inner._preferred_temporality,
                                preferred_aggregation=inner._preferred_aggregation)

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        if not self._here():
            return MetricExportResult.SUCCESS
        resource = adopted_resource()
        if resource is not None:
            metrics_data = MetricsData(resource_metrics=[
                ResourceMetrics(resource, rm.scope_metrics, rm.schema_url)
                for rm in metrics_data.resource_metrics])
        return self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis) if self._here() else True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        if self._here():
            self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


def guard_metric_readers(provider) -> int:
    """Wrap the exporter of each periodic reader of an SDK MeterProvider; returns how many.

    The SDK's configurator builds the readers itself and has no hook for wrapping their
    exporters (it has one for span and log processors), so this reaches the reader's
    `_exporter` (SDK 1.45; the package pins the SDK and a test checks the wrapping took)."""
    wrapped = 0
    for reader in getattr(provider, "_metric_readers", ()):
        exporter = getattr(reader, "_exporter", None)
        if isinstance(exporter, MetricExporter) and not isinstance(exporter, _Owned):
            reader._exporter = OwnerOnlyMetricExporter(exporter)
            wrapped += 1
    return wrapped
