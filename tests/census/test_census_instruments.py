"""The census through the SDK: instrument kinds, one read per collection, stop()."""

import pytest

from census_harness import census_on_sdk, collected, fixture_cgroup, instrument_shape, point_values
from yeto_otel.census import CENSUS, Instrument, Source
from yeto_otel.settings import Settings
from yeto_otel.testing import HostAllocatorStandIn

SHAPE = {
    Instrument.UP_DOWN_COUNTER: "non_monotonic_sum",
    Instrument.GAUGE: "gauge",
    Instrument.COUNTER: "monotonic_sum",
}


def test_every_metric_has_the_instrument_type_the_table_names(tmp_path):
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=10))  # frees counted: every .current is a gauge
    _, (reader,), _ = census_on_sdk(allocator=box.source(),
                                    cgroup=fixture_cgroup("v2_pod", lock_dir=tmp_path))
    metrics = collected(reader)
    for m in CENSUS:
        assert m.name in metrics, m.name
        assert instrument_shape(metrics[m.name]) == SHAPE[m.instrument], m.name
        assert metrics[m.name].unit == m.unit


def test_issue_table_kinds():
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=10))
    _, (reader,), _ = census_on_sdk(allocator=box.source())
    shapes = {name: instrument_shape(m) for name, m in collected(reader).items()}
    assert shapes["yeto.process.memory.rss"] == "non_monotonic_sum"
    assert shapes["yeto.process.memory.rss_peak"] == "gauge"
    assert shapes["yeto.process.memory.anonymous"] == "non_monotonic_sum"
    assert shapes["yeto.process.memory.private_dirty"] == "non_monotonic_sum"
    # How old the smaps_rollup values are: a reading of one process, never summed.
    assert shapes["yeto.process.memory.smaps_rollup.age"] == "gauge"
    assert shapes["yeto.node.memory.available"] == "non_monotonic_sum"
    assert shapes["yeto.node.memory.anon_pages"] == "non_monotonic_sum"
    for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        assert shapes[f"yeto.host_allocator.{stat}.current"] == "non_monotonic_sum"
        assert shapes[f"yeto.host_allocator.{stat}.peak"] == "gauge"
        assert shapes[f"yeto.host_allocator.{stat}.allocated"] == "monotonic_sum"
        assert shapes[f"yeto.host_allocator.{stat}.freed"] == "monotonic_sum"
    assert shapes["yeto.host_allocator.num_host_alloc"] == "monotonic_sum"
    assert shapes["yeto.host_allocator.num_host_free"] == "monotonic_sum"
    assert shapes["yeto.census.errors"] == "monotonic_sum"


def test_units():
    _, (reader,), _ = census_on_sdk(allocator=HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1)).source())
    metrics = collected(reader)
    assert metrics["yeto.host_allocator.active_bytes.current"].unit == "By"
    assert metrics["yeto.host_allocator.allocations.allocated"].unit == "{allocation}"
    assert metrics["yeto.host_allocator.active_requests.peak"].unit == "{request}"
    assert metrics["yeto.host_allocator.num_host_alloc"].unit == "{call}"
    assert metrics["yeto.process.memory.smaps_rollup.age"].unit == "s"


def test_current_is_withheld_until_freed_moves():
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=0))
    _, (reader,), _ = census_on_sdk(allocator=box.source())
    first = collected(reader)
    assert "yeto.host_allocator.active_bytes.current" not in first
    assert point_values(first["yeto.host_allocator.active_bytes.allocated"]) == {(): 1000}

    # Frees reach active_bytes only: it alone becomes a gauge.
    box.stats["active_bytes.freed"] = 400
    box.stats["active_bytes.current"] = 600
    second = collected(reader)
    assert point_values(second["yeto.host_allocator.active_bytes.current"]) == {(): 600}
    assert "yeto.host_allocator.allocated_bytes.current" not in second

    box.stats["active_bytes.freed"] = 0  # reset_accumulated_host_memory_stats: still a gauge
    assert "yeto.host_allocator.active_bytes.current" in collected(reader)


def test_running_total_build_never_shows_current_as_a_gauge():
    # The build the issue describes: active_bytes.freed never moves, so .current only rises.
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=0))
    _, (reader,), _ = census_on_sdk(allocator=box.source())
    for step in range(1, 6):
        box.stats["active_bytes.current"] = box.stats["active_bytes.allocated"] = step * 10**9
        metrics = collected(reader)
        assert "yeto.host_allocator.active_bytes.current" not in metrics
        assert point_values(metrics["yeto.host_allocator.active_bytes.allocated"]) == \
            {(): step * 10**9}


def reads_since(files: dict) -> callable:
    """A function giving the reads of each file made since this call."""
    start = {source: f.reads for source, f in files.items()}
    return lambda: {str(source): f.reads - start[source] for source, f in files.items()}


def test_one_read_of_each_source_per_collection():
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1))
    _, (reader,), census = census_on_sdk(allocator=box.source())
    files = census.reader.proc_files
    reads = reads_since(files)
    for n in range(1, 4):
        metrics = collected(reader)
        assert len(metrics) == len(census.reader.metrics) + 1  # every instrument observed
        assert reads() == {str(s): n for s in files}
        assert box.calls == n


def test_smaps_rollup_within_the_default_budget_is_exported_on_every_collection():
    """status and meminfo every collection; smaps_rollup when its budget allows, its last
    value exported in every collection (when it is re-read is tested with a fake clock in
    test_smaps_budget.py)."""
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1))
    _, (reader,), census = census_on_sdk(allocator=box.source(),
                                         smaps_budget_percent=Settings().smaps_budget_percent)
    files = census.reader.proc_files
    for n in range(1, 4):
        metrics = collected(reader)
        assert len(metrics) == len(census.reader.metrics) + 1  # Private_Dirty among them every time
        assert files[Source.STATUS].reads == files[Source.MEMINFO].reads == n
    assert census.reader.smaps_rollup.reads >= 1


def test_one_read_per_reader_per_collection_with_two_readers():
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1))
    _, (a, b), census = census_on_sdk(allocator=box.source(), readers=2)
    reads = reads_since(census.reader.proc_files)
    collected(a)
    collected(b)
    collected(a)
    assert set(reads().values()) == {3}
    assert box.calls == 3


def test_read_count_does_not_grow_with_instrument_count():
    # With no allocator and no node metrics fewer instruments exist; reads are the same.
    _, (reader,), census = census_on_sdk(node_metrics=False)
    reads = reads_since(census.reader.proc_files)
    collected(reader)
    assert set(reads().values()) == {1}


def test_node_metrics_only_where_asked():
    _, (reader,), census = census_on_sdk(node_metrics=False)
    names = set(collected(reader))
    assert not any(n.startswith("yeto.node.") for n in names)
    assert "yeto.process.memory.rss" in names
    from yeto_otel.census import Source
    assert Source.MEMINFO not in census.reader.proc_files  # meminfo is not even opened


def test_values_match_proc(proc_fixtures):
    _, (reader,), _ = census_on_sdk(proc_root=str(proc_fixtures / "baseline"))
    metrics = collected(reader)
    text = (proc_fixtures / "baseline" / "self" / "status").read_text()
    vm_rss_kb = int(next(line for line in text.splitlines()
                         if line.startswith("VmRSS:")).split()[1])
    assert point_values(metrics["yeto.process.memory.rss"]) == {(): vm_rss_kb * 1024}


def test_errors_counter_by_source(tmp_path):
    def junk():
        raise RuntimeError("allocator exploded")

    from yeto_otel.census import AllocatorSource
    _, (reader,), _ = census_on_sdk(proc_root=str(tmp_path), allocator=AllocatorSource("t", junk))
    collected(reader)
    errors = point_values(collected(reader)["yeto.census.errors"])
    assert errors == {
        (("source", "allocator"),): 2,
        (("source", "meminfo"),): 2,
        (("source", "smaps_rollup"),): 2,
        (("source", "status"),): 2,
    }


def test_errors_counter_starts_at_zero_for_every_source_in_use():
    _, (reader,), _ = census_on_sdk(node_metrics=False)
    errors = point_values(collected(reader)["yeto.census.errors"])
    assert errors == {(("source", "smaps_rollup"),): 0, (("source", "status"),): 0}


def test_stop_ends_reads():
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1))
    _, (reader,), census = census_on_sdk(allocator=box.source())
    reads = reads_since(census.reader.proc_files)
    collected(reader)
    census.stop()
    collected(reader)
    collected(reader)
    assert set(reads().values()) == {1}
    assert box.calls == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5, "12", None, True])
def test_junk_allocator_value_is_skipped_not_exported(bad):
    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1, **{"active_bytes.current": bad}))
    _, (reader,), census = census_on_sdk(allocator=box.source())
    metrics = collected(reader)
    assert "yeto.host_allocator.active_bytes.current" not in metrics
    assert "yeto.host_allocator.active_bytes.peak" in metrics
    assert census.reader.ledger.counts()["allocator"] == 1


def test_a_forked_child_observes_nothing():
    """A forked child inherits the census with the SDK; its memory is not the rank's, so its
    copy observes nothing and reads no file."""
    from forked import in_fork

    box = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=1))
    _, (reader,), census = census_on_sdk(allocator=box.source())
    assert "yeto.process.memory.rss" in collected(reader)

    def child():
        reads_before = sum(pf.reads for pf in census.reader.proc_files.values())
        names = set(collected(reader))
        reads_after = sum(pf.reads for pf in census.reader.proc_files.values())
        return names, reads_after - reads_before, box.calls

    calls_before = box.calls
    names, reads, calls = in_fork(child)
    assert not any(n.startswith("yeto.") for n in names)
    assert reads == 0 and calls == calls_before
    assert "yeto.process.memory.rss" in collected(reader)  # the owner still observes
