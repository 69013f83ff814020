"""Exporters that send only from the process that made them: a forked copy drops everything,
so a child never exports the rank's buffers again, nor its own data under any identity."""

from __future__ import annotations

from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import (AggregationTemporality, MetricExporter,
                                              MetricExportResult, PeriodicExportingMetricReader)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExportResult

from forked import in_fork
from yeto_otel.otel import (OwnerOnlyLogExporter, OwnerOnlyMetricExporter,
                            OwnerOnlySpanExporter, guard_metric_readers)


class CountingMetricExporter(MetricExporter):
    def __init__(self):
        super().__init__(preferred_temporality={Counter: AggregationTemporality.DELTA})
        self.exports = 0
        self.shut = False

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
        self.exports += 1
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self.shut = True


def traced(exporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_spans_go_out_from_the_owner_only():
    inner = InMemorySpanExporter()
    provider = traced(OwnerOnlySpanExporter(inner))
    provider.get_tracer("t").start_span("in the rank").end()

    def child():
        before = len(inner.get_finished_spans())
        provider.get_tracer("t").start_span("in a forked child").end()
        result = OwnerOnlySpanExporter.export(provider._active_span_processor
                                              ._span_processors[0].span_exporter, [])
        return before, len(inner.get_finished_spans()), result

    assert in_fork(child) == (1, 1, SpanExportResult.SUCCESS)  # dropped, and says success
    assert [s.name for s in inner.get_finished_spans()] == ["in the rank"]


def test_log_records_go_out_from_the_owner_only():
    inner = InMemoryLogRecordExporter()
    exporter = OwnerOnlyLogExporter(inner)

    def child():
        return exporter.export(["record"]), len(inner.get_finished_logs())

    assert in_fork(child) == (LogRecordExportResult.SUCCESS, 0)


def test_metrics_go_out_from_the_owner_only_and_keep_the_exporters_preferences():
    inner = CountingMetricExporter()
    exporter = OwnerOnlyMetricExporter(inner)
    assert exporter._preferred_temporality == inner._preferred_temporality
    assert exporter._preferred_aggregation == inner._preferred_aggregation
    exporter.export(object())
    assert inner.exports == 1

    def child():
        exporter.export(object())
        exporter.shutdown()
        return inner.exports, inner.shut, exporter.force_flush()

    assert in_fork(child) == (1, False, True)  # a child neither exports nor closes the owner's


def test_the_periodic_readers_of_a_provider_are_guarded_once():
    inner = CountingMetricExporter()
    reader = PeriodicExportingMetricReader(inner, export_interval_millis=3_600_000)
    provider = MeterProvider(metric_readers=[reader])
    try:
        assert guard_metric_readers(provider) == 1
        assert isinstance(reader._exporter, OwnerOnlyMetricExporter)
        assert reader._exporter.inner is inner
        assert guard_metric_readers(provider) == 0  # already guarded

        provider.get_meter("m").create_counter("c").add(1)

        def child():
            provider.force_flush()  # a collection and an export attempt in the child
            return inner.exports

        exports_before = inner.exports
        assert in_fork(child) == exports_before
        provider.force_flush()  # the owner still exports
        assert inner.exports == exports_before + 1
    finally:
        provider.shutdown()
