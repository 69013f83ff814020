"""The memory cgroup through the census and the SDK, from fixtures in cgroup-v2.rst's formats:
the issue's names, instruments and units, one point per event and pressure level, the path
once, one process per cgroup, and every way of having no cgroup to read."""

import logging

import pytest

from census_harness import census_on_sdk, collected, fixture_cgroup, instrument_shape
from yeto_otel.census import (CENSUS, CENSUS_ERRORS, CGROUP_EVENTS, CGROUP_INFO, CGROUP_LIMIT,
                              CGROUP_PRESSURE, CensusReader, Source)

GiB = 1 << 30
POD = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c.slice/"
       "cri-containerd-4a7e.scope")

# The issue's table: name -> (instrument shape, unit).
ISSUE_TABLE = {
    "yeto.cgroup.memory.usage": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.limit": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.high": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.peak": ("gauge", "By"),
    "yeto.cgroup.memory.anon": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.file": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.shmem": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.file_mapped": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.working_set": ("non_monotonic_sum", "By"),
    "yeto.cgroup.memory.events": ("monotonic_sum", "{event}"),
    "yeto.cgroup.memory.pressure": ("monotonic_sum", "s"),
}


def points(metric) -> dict:
    return {tuple(sorted(p.attributes.items())): p.value for p in metric.data.data_points}


def errors(metrics) -> dict:
    return {p.attributes["source"]: p.value
            for p in metrics[CENSUS_ERRORS.name].data.data_points}


def test_v2_names_instruments_units_and_values(tmp_path):
    _, (reader,), _ = census_on_sdk(cgroup=fixture_cgroup("v2_pod", lock_dir=tmp_path))
    metrics = collected(reader)
    for name, (shape, unit) in ISSUE_TABLE.items():
        assert instrument_shape(metrics[name]) == shape, name
        assert metrics[name].unit == unit, name
    value = {name: points(metrics[name]) for name in ISSUE_TABLE}
    assert value["yeto.cgroup.memory.usage"] == {(): 12 * GiB}
    assert value["yeto.cgroup.memory.limit"] == {(): 16 * GiB}
    assert value["yeto.cgroup.memory.working_set"] == {(): 11 * GiB}
    assert value["yeto.cgroup.memory.events"] == {
        (("event", e),): n for e, n in
        {"low": 0, "high": 412, "max": 37, "oom": 2, "oom_kill": 1, "oom_group_kill": 1}.items()}
    assert value["yeto.cgroup.memory.pressure"] == {(("level", "some"),): 4.25,
                                                   (("level", "full"),): 1.75}
    # The path once, in its own series; no other series carries it.
    assert points(metrics[CGROUP_INFO.name]) == {((CGROUP_INFO.attribute, POD),): 1}
    assert metrics[CGROUP_INFO.name].unit == "{cgroup}"
    for name in ISSUE_TABLE:
        for attributes in value[name]:
            assert CGROUP_INFO.attribute not in dict(attributes)
    assert errors(metrics)["cgroup"] == 0  # exported from 0 for rate() in alert rules


def test_each_file_is_read_once_per_collection(tmp_path):
    cgroup = fixture_cgroup("v2_pod", lock_dir=tmp_path)
    _, (reader,), _ = census_on_sdk(cgroup=cgroup)
    for n in range(1, 4):
        collected(reader)
        assert {f.path.rsplit("/", 1)[1]: f.reads for f in cgroup.files.files} == {
            name: n for name in ("memory.current", "memory.max", "memory.high", "memory.peak",
                                 "memory.stat", "memory.events", "memory.pressure")}


def test_unlimited_exports_no_limit_and_no_error(tmp_path):
    _, (reader,), _ = census_on_sdk(cgroup=fixture_cgroup("v2_unlimited", lock_dir=tmp_path))
    first = collected(reader)
    assert CGROUP_LIMIT.name not in first and "yeto.cgroup.memory.high" not in first
    assert "yeto.cgroup.memory.usage" in first
    second = collected(reader)
    assert errors(second)["cgroup"] == 1  # memory.peak missing: said once, not per collection


def test_one_process_per_cgroup_and_the_next_takes_over(tmp_path):
    """Two readers of one cgroup (two lock descriptors contend as two processes would): only
    the holder exports the numbers, both export the path; when the holder closes, the other
    takes the cgroup over at its next collection."""
    first = fixture_cgroup("v2_pod", lock_dir=tmp_path)
    second = fixture_cgroup("v2_pod", lock_dir=tmp_path)
    _, (reader_1,), census_1 = census_on_sdk(cgroup=first)
    _, (reader_2,), _ = census_on_sdk(cgroup=second)
    one, two = collected(reader_1), collected(reader_2)
    assert "yeto.cgroup.memory.usage" in one and "yeto.cgroup.memory.usage" not in two
    assert CGROUP_EVENTS.name not in two and CGROUP_PRESSURE.name not in two
    assert CGROUP_INFO.name in one and CGROUP_INFO.name in two
    census_1.stop()  # the holder goes away (an exit does the same: the kernel drops the lock)
    assert "yeto.cgroup.memory.usage" in collected(reader_2)


@pytest.mark.parametrize("variant, reason", [
    ("no_memory_controller", "no memory controller"),
    ("v2_host_root", "the root cgroup"),
    ("v2_outside_namespace", "not under any mount"),
])
def test_no_cgroup_is_counted_once_and_logged_once(tmp_path, caplog, variant, reason):
    caplog.set_level(logging.WARNING, logger="yeto_otel.census")
    _, (reader,), _ = census_on_sdk(cgroup=fixture_cgroup(variant, lock_dir=tmp_path))
    for _ in range(3):
        metrics = collected(reader)
        assert not any(name.startswith("yeto.cgroup.") for name in metrics)
        assert metrics["yeto.process.memory.rss"]  # the rest of the census is untouched
    assert errors(metrics)["cgroup"] == 1
    logged = [r.getMessage() for r in caplog.records if "cgroup" in r.getMessage()]
    assert len(logged) == 1 and reason in logged[0]


def test_odd_files_are_counted_per_collection_and_logged_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="yeto_otel.census")
    _, (reader,), _ = census_on_sdk(cgroup=fixture_cgroup("v2_garbage", lock_dir=tmp_path))
    for _ in range(2):
        metrics = collected(reader)
    assert errors(metrics)["cgroup"] == 2
    assert CGROUP_LIMIT.name not in metrics and "yeto.cgroup.memory.usage" in metrics
    assert points(metrics[CGROUP_EVENTS.name]) == {(("event", "low"),): 0,
                                                  (("event", "high"),): 412}
    assert len([r for r in caplog.records if "memory.max" in r.getMessage()]) == 1


def test_readers_without_a_cgroup_census_have_no_cgroup_rows():
    """A DataLoader worker's reader (no cgroup census): never its rank's cgroup duty."""
    reader = CensusReader(allocator=None, node_metrics=False)
    assert not any(m.source is Source.CGROUP for m in reader.metrics)
    assert not any(name.startswith("yeto.cgroup.") for name in reader.take().values)


def test_every_cgroup_row_is_in_the_census():
    assert {m.name for m in CENSUS if m.source is Source.CGROUP} == \
        set(ISSUE_TABLE) | {CGROUP_INFO.name}
