"""`yeto_otel.testing`: the one host-allocator stand-in that tests, e2e ranks and benchmarks
share, so its keys must be exactly those the census reads."""

from yeto_otel.census import ALLOCATOR_KEYS, ALLOCATOR_STATS, CensusReader, Kind, resolve_allocator
from yeto_otel.testing import HostAllocatorStandIn, moving, realistic


def test_full_and_realistic_stats_hold_every_key_the_census_reads():
    assert set(HostAllocatorStandIn.full_stats()) == set(ALLOCATOR_KEYS)
    assert set(ALLOCATOR_KEYS) < set(HostAllocatorStandIn.realistic_stats())  # + timings


def test_full_stats_values_and_overrides():
    stats = HostAllocatorStandIn.full_stats(freed=5, **{"active_bytes.current": 1})
    assert stats["active_bytes.current"] == 1
    assert stats["allocated_bytes.allocated"] == 1005 and stats["allocated_bytes.freed"] == 5
    assert (stats["num_host_alloc"], stats["num_host_free"]) == (7, 2)


def test_flat_stats_is_one_stat():
    assert HostAllocatorStandIn.flat_stats(1, 2, 3, 4, stat="allocations") == {
        "allocations.current": 1, "allocations.peak": 2, "allocations.allocated": 3,
        "allocations.freed": 4}


def test_a_new_dict_per_call_and_calls_counted():
    allocator = HostAllocatorStandIn({"num_host_alloc": 1})
    first = allocator()
    first["num_host_alloc"] = 99
    assert allocator() == {"num_host_alloc": 1}
    assert allocator.calls == 2


def test_junk_is_returned_as_it_is_and_raises_raises():
    allocator = HostAllocatorStandIn([1, 2])
    assert allocator() == [1, 2]
    allocator.raises = RuntimeError("driver went away")
    try:
        allocator()
    except RuntimeError as exc:
        assert str(exc) == "driver went away"
    else:
        raise AssertionError("did not raise")


def test_moving_stats_move_on_every_call():
    allocator = HostAllocatorStandIn(moving=True)
    first, second = allocator(), allocator()
    for stat in ALLOCATOR_STATS:
        assert second[f"{stat}.allocated"] > first[f"{stat}.allocated"]
        assert second[f"{stat}.freed"] > first[f"{stat}.freed"] > 0
        assert first[f"{stat}.current"] == first[f"{stat}.allocated"] - first[f"{stat}.freed"]


def test_the_named_instances_work_through_the_setting():
    for name, instance in (("realistic", realistic), ("moving", moving)):
        source = resolve_allocator(f"yeto_otel.testing:{name}")
        reader = CensusReader(allocator=source, node_metrics=False)
        snapshot = reader.take()
        current = snapshot["yeto.host_allocator.active_bytes.current"]
        assert current.kind is Kind.GAUGE, name  # frees move: exported as a gauge
        assert instance.calls >= 1
        reader.close()
