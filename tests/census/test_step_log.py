import copy
import sys
import time
import types

import pytest

from yeto_otel import testing
from yeto_otel.testing import HostAllocatorStandIn
from yeto_otel import SettingsError, add_census_to_step_log
from yeto_otel.census import CENSUS, Source, _step_log

PROCESS_AND_NODE_KEYS = {
    "host_mem.vm_rss_bytes", "host_mem.vm_hwm_bytes", "host_mem.anonymous_bytes",
    "host_mem.private_dirty_bytes", "host_mem.node_mem_available_bytes",
    "host_mem.node_anon_pages_bytes",
}
ALLOCATOR_KEY = "host_mem.host_alloc.num_host_alloc"


def until(make, done, deadline_s: float = 30.0):
    """`make()` again until `done(its result)`: the step log never waits for the smaps_rollup
    read or the allocator's query it starts, a later record carries them."""
    deadline = time.monotonic() + deadline_s
    while not done(found := make()):
        assert time.monotonic() < deadline, f"not seen before the deadline: {found!r}"
        time.sleep(0.01)
    return found


@pytest.fixture
def allocator(monkeypatch):
    # A step-log reader of its own: the last allocator answer of another test's is not this one's.
    monkeypatch.setattr(_step_log, "_reader", None)
    monkeypatch.setattr(_step_log, "_reader_choice", None)
    monkeypatch.setenv("YETO_OTEL_HOST_ALLOCATOR", "yeto_otel.testing:settable")
    monkeypatch.setattr(testing.settable, "stats", HostAllocatorStandIn.full_stats(freed=0, **{
        "active_bytes.freed": 5, "active_bytes.current": 11}))
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("value", [None, "0", ""])
def test_off_leaves_record_exactly_as_it_was(monkeypatch, allocator, value):
    if value is None:
        monkeypatch.delenv("YETO_DILOCO_HOST_MEM_CENSUS", raising=False)
    else:
        monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", value)
    record = {"step": 3, "loss": 1.25, "nested": {"a": [1, 2]}}
    before = copy.deepcopy(record)
    out = add_census_to_step_log(record)
    assert out == before and list(out) == list(before)


def test_on_adds_every_documented_key(monkeypatch, allocator):
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    record = until(lambda: add_census_to_step_log({"step": 1}),
                   lambda r: PROCESS_AND_NODE_KEYS | {ALLOCATOR_KEY} <= set(r))
    assert record["step"] == 1
    for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        for field in ("current", "peak", "allocated", "freed"):
            assert f"host_mem.host_alloc.{stat}.{field}" in record
    assert record["host_mem.host_alloc.num_host_alloc"] == 7
    assert record["host_mem.host_alloc.active_bytes.current"] == 11
    assert record["host_mem.host_alloc.active_bytes.current_is_gauge"] is True
    assert record["host_mem.host_alloc.allocated_bytes.current_is_gauge"] is False
    assert all(isinstance(record[k], int) and record[k] > 0 for k in PROCESS_AND_NODE_KEYS)
    # The cgroup's keys depend on this machine's cgroup (no limit key when it has none):
    # tests/census/test_cgroup_real_v1.py checks them in a cgroup with a limit.
    expected = {m.step_log_key for m in CENSUS if m.step_log_key and m.source is not Source.CGROUP}
    assert expected <= set(record)
    # The semantic conventions' names have no step-log key: VmRSS is there as our own key.
    assert "" not in record
    assert not {m.name for m in CENSUS if m.semconv} & set(record)


@pytest.mark.parametrize("rank_env, rank_arg, adds", [
    (None, None, True), ("0", None, True), ("3", None, False), ("3", 0, True), ("0", 2, False),
])
def test_only_sync_rank_zero(monkeypatch, allocator, rank_env, rank_arg, adds):
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    if rank_env is not None:
        monkeypatch.setenv("RANK", rank_env)
    record = add_census_to_step_log({"step": 1}, rank=rank_arg)
    assert ("host_mem.vm_rss_bytes" in record) is adds


def test_torch_distributed_rank_wins_over_env(monkeypatch, allocator):
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    monkeypatch.setenv("RANK", "0")
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 get_rank=lambda: 5)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(distributed=dist))
    assert "host_mem.vm_rss_bytes" not in add_census_to_step_log({})


@pytest.mark.parametrize("bad", ["yes", "2", "true", "on"])
def test_bad_value_names_the_variable(monkeypatch, allocator, bad):
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", bad)
    with pytest.raises(SettingsError, match="YETO_DILOCO_HOST_MEM_CENSUS"):
        add_census_to_step_log({"step": 1})


def test_allocator_failure_leaves_the_rest(monkeypatch, allocator):
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    monkeypatch.setattr(testing.settable, "raises", TypeError("allocator broke"))
    # Until the failed query is counted, then in the record made with its answer.
    record = until(lambda: add_census_to_step_log({"step": 1}),
                   lambda r: _step_log._reader.ledger.counts().get("allocator"))
    assert PROCESS_AND_NODE_KEYS <= set(record)
    assert not any(k.startswith("host_mem.host_alloc.") for k in record)
