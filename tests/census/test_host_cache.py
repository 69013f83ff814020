import pytest

from yeto_otel.testing import HostAllocatorStandIn
from yeto_otel.census import AllocatorSource
from yeto_otel.census import HostCacheReleasePolicy
from yeto_otel.census import CensusReader

GIB = 1 << 30


class Cache:
    def __init__(self, fail: Exception | None = None):
        self.emptied = 0
        self.fail = fail

    def empty(self):
        if self.fail:
            raise self.fail
        self.emptied += 1


def snapshot_of(stats_sequence, tmp_path):
    box = HostAllocatorStandIn()
    reader = CensusReader(allocator=box.source(), node_metrics=False, proc_root=str(tmp_path))
    snap = None
    for stats in stats_sequence:
        box.stats = stats
        snap = reader.take()
    return snap


def test_issue_build_releases_from_held_bytes(tmp_path):
    # active_bytes.freed never moves (running total); allocated_bytes was emptied once (gauge).
    stats = HostAllocatorStandIn.full_stats(freed=0)
    stats.update({"allocated_bytes.current": 28 * GIB, "allocated_bytes.freed": 4 * GIB,
                  "allocated_bytes.allocated": 32 * GIB,
                  "active_bytes.current": 42 * GIB, "active_bytes.allocated": 42 * GIB})
    snap = snapshot_of([stats], tmp_path)
    cache = Cache()
    policy = HostCacheReleasePolicy(16 * GIB, AllocatorSource("t", dict, cache.empty))
    decision = policy.maybe_release(snap)
    assert decision.release and decision.released and cache.emptied == 1
    assert decision.releasable_bytes == 28 * GIB
    assert "not proven a gauge" in decision.reason
    # ...while the old arithmetic on the same snapshot is refused.
    with pytest.raises(TypeError):
        snap["yeto.host_allocator.allocated_bytes.current"] - \
            snap["yeto.host_allocator.active_bytes.current"]


def test_idle_bytes_when_both_are_gauges(tmp_path):
    stats = HostAllocatorStandIn.full_stats(freed=1)
    stats.update({"allocated_bytes.current": 20 * GIB, "active_bytes.current": 15 * GIB})
    snap = snapshot_of([stats], tmp_path)
    policy = HostCacheReleasePolicy(8 * GIB, None)
    decision = policy.decide(snap)
    assert decision.releasable_bytes == 5 * GIB and not decision.release
    assert policy.decide(snap).reason.startswith("held minus active")
    assert HostCacheReleasePolicy(4 * GIB, None).decide(snap).release


def test_no_allocator_data(tmp_path):
    decision = HostCacheReleasePolicy(0, None).decide(snapshot_of([{}], tmp_path))
    assert not decision.release and decision.releasable_bytes is None


def test_cpu_only_build_release_failure_is_contained(tmp_path, caplog):
    snap = snapshot_of([HostAllocatorStandIn.full_stats(freed=1, **{"allocated_bytes.current": 10 * GIB,
                                                "active_bytes.current": 0})], tmp_path)
    cache = Cache(RuntimeError("empty_host_cache is not supported on a CPU-only build"))
    policy = HostCacheReleasePolicy(GIB, AllocatorSource("cuda", dict, cache.empty))
    for _ in range(3):
        decision = policy.maybe_release(snap)
        assert decision.release and not decision.released
    assert sum("host cache release" in r.message for r in caplog.records) == 1


def test_negative_threshold_refused():
    with pytest.raises(ValueError):
        HostCacheReleasePolicy(-1, None)
