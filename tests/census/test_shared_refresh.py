"""The step log's reader reads the sources that are not the rank's own (the node, the memory
cgroup, the host allocator) at most once per refresh, and says how old their values are; the
rank's own /proc/self/status is read on every take. The metric instruments' reader reads all
of them on every collection."""

from __future__ import annotations

import math

from snapshot_testkit import ANON, NODE_AVAILABLE, copy_root, fake_source
from yeto_otel.census import CensusReader, add_census_to_step_log
from yeto_otel.census import _step_log
from yeto_otel.settings import Settings
from yeto_otel.testing import HostAllocatorStandIn, settable

SECOND = 1_000_000_000


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self) -> int:
        return self.now


def rewrite(path, field: str, kb: int) -> None:
    lines = [f"{field}:\t{kb} kB" if line.startswith(field + ":") else line
             for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def test_shared_sources_are_reused_within_the_refresh_with_their_age(tmp_path, monkeypatch):
    root, clock = copy_root(tmp_path), Clock()
    monkeypatch.setattr(settable, "stats", HostAllocatorStandIn.full_stats(freed=1))
    monkeypatch.setattr(settable, "raises", None)
    reader = CensusReader(proc_root=str(root), allocator=fake_source(), node_metrics=True,
                          smaps_budget_percent=math.inf, clock=clock, shared_refresh_s=1.0)
    first = reader.take()
    rewrite(root / "meminfo", "MemAvailable", 1000)
    rewrite(root / "self" / "status", "RssAnon", 2000)
    monkeypatch.setattr(settable, "stats", HostAllocatorStandIn.full_stats(freed=7))
    clock.now = SECOND // 2
    second = reader.take()
    assert second[ANON].value == 2000 * 1024  # the rank's own: fresh on every take
    assert second[NODE_AVAILABLE].value == first[NODE_AVAILABLE].value  # kept
    assert second.ages_ns[NODE_AVAILABLE] == SECOND // 2
    freed = "yeto.host_allocator.active_bytes.freed"
    assert second[freed].value == first[freed].value and second.ages_ns[freed] == SECOND // 2
    assert ANON not in second.ages_ns
    clock.now = SECOND
    third = reader.take()
    assert third[NODE_AVAILABLE].value == 1000 * 1024 and third.ages_ns[NODE_AVAILABLE] == 0
    assert third[freed].value == 7


def test_without_a_refresh_every_take_reads_every_source(tmp_path):
    root, clock = copy_root(tmp_path), Clock()
    reader = CensusReader(proc_root=str(root), allocator=None, node_metrics=True,
                          smaps_budget_percent=math.inf, clock=clock)
    reader.take()
    rewrite(root / "meminfo", "MemAvailable", 1000)
    snapshot = reader.take()
    assert snapshot[NODE_AVAILABLE].value == 1000 * 1024 and NODE_AVAILABLE not in snapshot.ages_ns


def test_the_step_log_carries_the_age_of_the_node_and_cgroup_values(monkeypatch):
    monkeypatch.setattr(_step_log, "_reader", None)
    monkeypatch.setattr(_step_log, "_reader_choice", None)
    settings = Settings(step_log_census=True, host_allocator="none", smaps_budget_percent=0)
    record = add_census_to_step_log({}, rank=0, settings=settings)
    assert record["host_mem.node_age_seconds"] == 0.0  # read now
    again = add_census_to_step_log({}, rank=0, settings=settings)
    assert 0 <= again["host_mem.node_age_seconds"] < _step_log.SHARED_REFRESH_S
    if "host_mem.cgroup_usage_bytes" in record:  # a readable memory cgroup on this machine
        assert again["host_mem.cgroup_age_seconds"] == again["host_mem.node_age_seconds"]


class FakeTime:
    def __init__(self):
        self.now = 10 * SECOND

    def monotonic_ns(self) -> int:
        return self.now


def test_a_record_whose_reads_are_not_due_reads_nothing_and_says_how_old(monkeypatch):
    from yeto_otel.census import Source

    fake = FakeTime()
    monkeypatch.setattr(_step_log, "time", fake)
    monkeypatch.setattr(_step_log, "_reader", None)
    monkeypatch.setattr(_step_log, "_reader_choice", None)
    monkeypatch.setattr(_step_log, "_last", None)
    settings = Settings(step_log_census=True, host_allocator="none", smaps_budget_percent=0)
    first = add_census_to_step_log({}, rank=0, settings=settings)
    status = _step_log._reader.proc_files[Source.STATUS]
    reads = status.reads
    assert first["host_mem.process_age_seconds"] == 0.0
    fake.now += SECOND // 100  # 10 ms: a step later
    second = add_census_to_step_log({}, rank=0, settings=settings)
    assert status.reads == reads  # nothing read
    assert second["host_mem.process_age_seconds"] == 0.01
    assert second["host_mem.anonymous_bytes"] == first["host_mem.anonymous_bytes"]
    fake.now += int(_step_log.OWN_REFRESH_S * SECOND)
    third = add_census_to_step_log({}, rank=0, settings=settings)
    assert status.reads == reads + 1 and third["host_mem.process_age_seconds"] == 0.0
