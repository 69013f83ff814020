"""Shared test harness: the census on an SDK MeterProvider with an in-memory reader."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    InMemoryMetricReader,
    Sum,
)

from yeto_otel.allocator import AllocatorSource
from yeto_otel.census_instruments import CensusInstruments
from yeto_otel.snapshot import CensusReader


class StatsBox:
    """A host allocator whose stats the test sets; counts its queries."""

    def __init__(self, stats: dict | None = None):
        self.stats = dict(stats or {})
        self.queries = 0

    def __call__(self):
        self.queries += 1
        return dict(self.stats)

    def source(self) -> AllocatorSource:
        return AllocatorSource("test", self)


def full_stats(freed: int = 0, **overrides) -> dict:
    stats = {}
    for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        stats[f"{stat}.current"] = 1000
        stats[f"{stat}.peak"] = 1500
        stats[f"{stat}.allocated"] = 1000 + freed
        stats[f"{stat}.freed"] = freed
    stats["num_host_alloc"] = 7
    stats["num_host_free"] = 2
    stats.update(overrides)
    return stats


def census_on_sdk(*, proc_root: str = "/proc", node_metrics: bool = True,
                  allocator: AllocatorSource | None = None, readers: int = 1):
    metric_readers = [InMemoryMetricReader() for _ in range(readers)]
    provider = MeterProvider(metric_readers=metric_readers)
    reader = CensusReader(allocator=allocator, node_metrics=node_metrics, proc_root=proc_root)
    census = CensusInstruments(provider.get_meter("test"), reader)
    return provider, metric_readers, census


def collected(metric_reader: InMemoryMetricReader) -> dict:
    """metric name -> the SDK's metric (data carries Gauge or Sum)."""
    data = metric_reader.get_metrics_data()
    out = {}
    if data is None:
        return out
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = m
    return out


def instrument_shape(metric) -> str:
    data = metric.data
    if isinstance(data, Gauge):
        return "gauge"
    assert isinstance(data, Sum)
    assert data.aggregation_temporality is AggregationTemporality.CUMULATIVE
    return "monotonic_sum" if data.is_monotonic else "non_monotonic_sum"


def point_values(metric) -> dict:
    return {tuple(sorted((p.attributes or {}).items())): p.value for p in metric.data.data_points}


# For settings that name a callable (YETO_OTEL_HOST_ALLOCATOR=census_harness:shared_stats).
SHARED_STATS: dict = {}


def shared_stats() -> dict:
    return dict(SHARED_STATS)
