"""The OpenTelemetry semantic conventions' process memory metrics beside ours: names,
instruments, units, values from the same /proc/self/status read, the setting that turns them
off, and how they line up with the collector's process scraper."""

from __future__ import annotations

import os

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from census_harness import collected, instrument_shape, point_values
from snapshot_testkit import FIXTURES, KB, RSS, USAGE, VIRTUAL
from yeto_otel.census import (CENSUS, PROCESS_MEMORY_USAGE, PROCESS_MEMORY_VIRTUAL,
                              CensusInstruments, CensusReader, Instrument, Kind, Source)
from yeto_otel.instrumentation import HostMemoryInstrumentor
from yeto_otel.settings import Settings, load_settings

# The conventions (process metrics, release candidate): name -> (instrument, unit, brief).
# No attributes on either.
SEMCONV = {
    "process.memory.usage": ("updowncounter", "By", "The amount of physical memory in use."),
    "process.memory.virtual": ("updowncounter", "By", "The amount of committed virtual memory."),
}
# The collector's process scraper (hostmetrics receiver v0.165.1, processscraper/metadata.yaml):
# both are int sums, cumulative, not monotonic, in By; on Linux it fills them from
# /proc/<pid>/statm (gopsutil: fields 0 and 1, size and resident, times the page size).
SCRAPER = {
    "process.memory.usage": {"unit": "By", "value_type": int, "monotonic": False,
                             "statm_field": 1},
    "process.memory.virtual": {"unit": "By", "value_type": int, "monotonic": False,
                               "statm_field": 0},
}


def semconv_rows():
    return [m for m in CENSUS if m.semconv]


def on_sdk(reader: CensusReader):
    metric_reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[metric_reader])
    CensusInstruments(provider.get_meter("test"), reader)
    return metric_reader


def test_the_table_has_exactly_the_conventions_rows():
    assert {m.name: m for m in semconv_rows()} == \
        {"process.memory.usage": PROCESS_MEMORY_USAGE,
         "process.memory.virtual": PROCESS_MEMORY_VIRTUAL}
    for m in semconv_rows():
        instrument, unit, brief = SEMCONV[m.name]
        assert m.instrument is Instrument.UP_DOWN_COUNTER and instrument == "updowncounter"
        assert m.kind is Kind.GAUGE and m.unit == unit
        assert m.description.startswith(brief.rstrip(".") + " ("), m.description
        assert m.source is Source.STATUS and not m.node
        assert m.step_log_key == ""  # the step log has VmRSS under its own key
    assert (PROCESS_MEMORY_USAGE.field, PROCESS_MEMORY_VIRTUAL.field) == ("VmRSS", "VmSize")


def test_exported_as_updowncounters_from_the_status_read():
    metric_reader = on_sdk(CensusReader(allocator=None, node_metrics=False,
                                        proc_root=str(FIXTURES / "baseline")))
    metrics = collected(metric_reader)
    for name in SEMCONV:
        assert instrument_shape(metrics[name]) == "non_monotonic_sum", name
        assert metrics[name].unit == "By"
        assert metrics[name].description.startswith(SEMCONV[name][2].rstrip("."))
    # the fixture's VmRSS and VmSize, with no attributes
    assert point_values(metrics[USAGE]) == {(): 10452 * KB} == point_values(metrics[RSS])
    assert point_values(metrics[VIRTUAL]) == {(): 13424 * KB}


def test_one_status_read_gives_both_names_the_same_number():
    reader = CensusReader(allocator=None, node_metrics=False)  # the real /proc/self
    metric_reader = on_sdk(reader)
    status = reader.proc_files[Source.STATUS]
    for collection in range(1, 4):
        hold = b"\1" * (collection << 20)  # touched pages: RSS moves between collections
        metrics = collected(metric_reader)
        assert status.reads == collection  # one read per collection, whatever the names
        assert point_values(metrics[USAGE]) == point_values(metrics[RSS])
        (virtual,) = point_values(metrics[VIRTUAL]).values()
        (usage,) = point_values(metrics[USAGE]).values()
        assert isinstance(virtual, int) and virtual >= usage > 0
        del hold
    assert reader.ledger.counts() == {}


def test_switched_off_only_ours_are_exported():
    assert load_settings({"YETO_OTEL_SEMCONV_METRICS": "off"}).semconv_metrics is False
    assert load_settings({}).semconv_metrics is True
    metric_reader = InMemoryMetricReader()
    instrumentor = HostMemoryInstrumentor()
    instrumentor.instrument(meter_provider=MeterProvider(metric_readers=[metric_reader]),
                            settings=Settings(host_allocator="none", semconv_metrics=False))
    try:
        names = set(collected(metric_reader))
        assert RSS in names
        assert not names & set(SEMCONV)
        assert not any(m.semconv for m in instrumentor.census.reader.metrics)
    finally:
        instrumentor.uninstrument()


def test_on_by_default_through_the_instrumentor():
    metric_reader = InMemoryMetricReader()
    instrumentor = HostMemoryInstrumentor()
    instrumentor.instrument(meter_provider=MeterProvider(metric_readers=[metric_reader]),
                            settings=Settings(host_allocator="none"))
    try:
        assert set(SEMCONV) <= set(collected(metric_reader))
    finally:
        instrumentor.uninstrument()


def test_lines_up_with_the_collectors_process_scraper():
    for m in semconv_rows():
        scraper = SCRAPER[m.name]
        assert m.unit == scraper["unit"]
        # an UpDownCounter is a cumulative non-monotonic sum, as the scraper's
        assert (m.instrument is Instrument.COUNTER) is scraper["monotonic"]
    # The same numbers as the scraper's source, read at a quiet moment (this process's memory
    # did not move between our two reads around statm's).
    reader = CensusReader(allocator=None, node_metrics=False)
    page = os.sysconf("SC_PAGE_SIZE")
    for _ in range(50):
        before = reader.take()
        with open("/proc/self/statm", "rb") as f:
            statm = [int(v) * page for v in f.read().split()]
        after = reader.take()
        if all(before[name].value == after[name].value for name in SCRAPER):
            break
    else:
        pytest.fail("memory moved around every statm read")
    for name, scraper in SCRAPER.items():
        assert isinstance(after[name].value, scraper["value_type"])
        assert after[name].value == statm[scraper["statm_field"]], name
