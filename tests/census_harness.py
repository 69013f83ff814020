"""Shared test harness: the census on an SDK MeterProvider with an in-memory reader."""

from __future__ import annotations

import math

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    InMemoryMetricReader,
    Sum,
)

from yeto_otel.census import CensusInstruments
from yeto_otel.census import CensusReader, CgroupCensus
from repo_paths import ROOT

CGROUP_FIXTURES = ROOT / "tests" / "fixtures" / "cgroup"


def census_on_sdk(*, proc_root: str = "/proc", node_metrics: bool = True,
                  allocator: AllocatorSource | None = None, readers: int = 1,
                  smaps_budget_percent: float = math.inf, cgroup=None):
    """`smaps_budget_percent`: `always` (inf) by default, so smaps_rollup is read on every
    collection like the other files; a test of the budget passes the product's."""
    metric_readers = [InMemoryMetricReader() for _ in range(readers)]
    provider = MeterProvider(metric_readers=metric_readers)
    reader = CensusReader(allocator=allocator, node_metrics=node_metrics, proc_root=proc_root,
                          smaps_budget_percent=smaps_budget_percent, cgroup=cgroup)
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


def fixture_cgroup(variant: str, *, lock_dir, elected: bool = True) -> CgroupCensus:
    """The cgroup census of a fixture tree (tests/fixtures/cgroup/<variant>), electing in
    `lock_dir`."""
    root = CGROUP_FIXTURES / variant
    return CgroupCensus(elected=elected, proc_root=str(root / "proc"), fs_root=str(root),
                        lock_dir=str(lock_dir))
