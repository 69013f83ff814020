"""A slow, stuck or hostile host allocator: each query is bounded, abandoned and counted when it
is slower than YETO_OTEL_ALLOCATOR_TIMEOUT, never started twice while an abandoned one still
runs, and whatever it raises (SystemExit, KeyboardInterrupt, GeneratorExit included) is counted
instead of reaching the trainer or the SDK's export thread."""

from __future__ import annotations

import os
import threading
import time

import pytest
from census_harness import census_on_sdk, collected

from yeto_otel.census import AllocatorSource, CensusReader, add_census_to_step_log
from yeto_otel.census import _step_log
from yeto_otel.census._bounded_call import CallTimedOut
from yeto_otel.settings import Settings
from yeto_otel.testing import HostAllocatorStandIn

QUERY_THREAD = "yeto-otel-allocator-query"
STUCK_FOR = 60.0  # far longer than any test here may take: waiting for it fails the test
TIMEOUT_MS = 50


class StuckAllocator:
    """Blocks every query until `release()`; counts the queries that started."""

    def __init__(self):
        self.released = threading.Event()
        self.started = 0

    def __call__(self):
        self.started += 1
        self.released.wait(STUCK_FOR)
        return HostAllocatorStandIn.full_stats(freed=3)

    def release(self):
        self.released.set()


@pytest.fixture
def stuck():
    allocator = StuckAllocator()
    yield allocator
    allocator.release()


def query_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == QUERY_THREAD]


def wait_until(condition, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


def test_a_stuck_query_is_abandoned_and_counted(stuck, caplog):
    reader = CensusReader(allocator=AllocatorSource("stuck", stuck, timeout_ms=TIMEOUT_MS),
                          node_metrics=False)
    started = time.monotonic()
    snapshot = reader.take()
    assert time.monotonic() - started < STUCK_FOR / 2  # did not wait for the query
    assert not stuck.released.is_set()  # and the query is indeed still running
    assert "yeto.process.memory.rss" in snapshot  # the rest of the census is there
    assert not any(name.startswith("yeto.host_allocator.") for name in snapshot.values)
    assert reader.ledger.counts() == {"allocator": 1}
    (warning,) = [r for r in caplog.records if r.name == "yeto_otel.census"]
    assert f"did not answer within {TIMEOUT_MS} ms" in warning.getMessage()


def test_no_new_query_while_an_abandoned_one_runs_then_queries_resume(stuck, caplog):
    reader = CensusReader(allocator=AllocatorSource("stuck", stuck, timeout_ms=TIMEOUT_MS),
                          node_metrics=False)
    for _ in range(20):
        reader.take()
    assert stuck.started == 1
    assert len(query_threads()) == 1
    assert reader.ledger.counts() == {"allocator": 20}
    assert len([r for r in caplog.records if r.name == "yeto_otel.census"]) == 1  # logged once
    stuck.release()
    wait_until(lambda: not query_threads())
    snapshot = reader.take()
    assert stuck.started == 2
    assert snapshot["yeto.host_allocator.active_bytes.freed"].value == 3


def test_callers_during_a_running_query_share_it(stuck):
    source = AllocatorSource("stuck", stuck, timeout_ms=30_000)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(source.query())) for _ in range(8)]
    for thread in threads:
        thread.start()
    wait_until(lambda: stuck.started >= 1)
    stuck.release()
    for thread in threads:
        thread.join(timeout=30)
    assert stuck.started == 1 and len(answers) == 8


def test_the_query_thread_never_holds_up_the_exit(stuck):
    reader = CensusReader(allocator=AllocatorSource("stuck", stuck, timeout_ms=TIMEOUT_MS),
                          node_metrics=False)
    reader.take()
    (thread,) = query_threads()
    assert thread.daemon


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), GeneratorExit(),
                                 RuntimeError("broken")])
def test_whatever_the_allocator_raises_is_counted_not_raised(exc, caplog):
    allocator = HostAllocatorStandIn()
    allocator.raises = exc
    reader = CensusReader(allocator=allocator.source(), node_metrics=False)
    for _ in range(3):
        snapshot = reader.take()
        assert "yeto.process.memory.rss" in snapshot
    assert reader.ledger.counts() == {"allocator": 3}
    (warning,) = [r for r in caplog.records if r.name == "yeto_otel.census"]
    assert type(exc).__name__ in warning.getMessage()


@pytest.mark.parametrize("exc", [SystemExit(1), KeyboardInterrupt()])
def test_a_mapping_whose_methods_raise_is_counted_not_raised(exc):
    class Hostile(dict):
        def items(self):
            raise exc

    reader = CensusReader(allocator=AllocatorSource("hostile", lambda: Hostile(a=1)),
                          node_metrics=False)
    reader.take()
    assert reader.ledger.counts() == {"allocator": 1}


@pytest.mark.parametrize("exc", [SystemExit(0), KeyboardInterrupt()])
def test_the_sdk_collection_survives_a_base_exception(exc):
    allocator = HostAllocatorStandIn(HostAllocatorStandIn.full_stats())
    allocator.raises = exc
    _, (metric_reader,), _ = census_on_sdk(allocator=allocator.source(), node_metrics=False)
    for _ in range(2):
        metrics = collected(metric_reader)
    assert "yeto.process.memory.rss" in metrics
    (errors,) = [p for p in metrics["yeto.census.errors"].data.data_points
                 if p.attributes["source"] == "allocator"]
    assert errors.value == 2
    allocator.raises = None  # the next collection has the allocator back
    assert "yeto.host_allocator.num_host_alloc" in collected(metric_reader)


def test_the_step_log_abandons_a_stuck_allocator_past_its_bound(monkeypatch, stuck, caplog):
    """The step log never waits for the query (tests/census/test_step_log_latest.py); one that
    runs past its bound is abandoned and counted by the record that finds it so, and every
    record after it is counted while it stays stuck; no second query starts meanwhile."""
    monkeypatch.setattr(_step_log, "_reader", None)
    monkeypatch.setattr(_step_log, "_reader_choice", None)
    monkeypatch.setattr(_step_log, "SHARED_REFRESH_S", 0.0)  # the allocator asked every record
    monkeypatch.setattr(_step_log, "_OWN_REFRESH_NS", 0)
    monkeypatch.setattr("yeto_otel.census._allocator._auto_stats", stuck)
    settings = Settings(step_log_census=True, host_allocator="auto",
                        allocator_timeout_ms=TIMEOUT_MS)
    started = time.monotonic()
    records = [add_census_to_step_log({"step": 0}, rank=0, settings=settings)]
    wait_until(lambda: records.append(add_census_to_step_log({}, rank=0, settings=settings))
               or _step_log._reader.ledger.counts())
    counted = _step_log._reader.ledger.counts()["allocator"]
    for _ in range(5):
        records.append(add_census_to_step_log({}, rank=0, settings=settings))
    assert time.monotonic() - started < STUCK_FOR / 2
    assert stuck.started == 1
    assert all("host_mem.vm_rss_bytes" in r for r in records)
    assert not any(k.startswith("host_mem.host_alloc.") for r in records for k in r)
    assert _step_log._reader.ledger.counts() == {"allocator": counted + 5}
    (warning,) = [r for r in caplog.records if r.name == "yeto_otel.census"]
    assert f"did not answer within {TIMEOUT_MS} ms" in warning.getMessage()
    stuck.release()
    # The late answer of the abandoned query, then the queries resume.
    wait_until(lambda: "host_mem.host_alloc.active_bytes.freed" in
               add_census_to_step_log({}, rank=0, settings=settings))
    wait_until(lambda: stuck.started == 2)


@pytest.mark.parametrize("choice", ["os:nonexistent", "no_such_module_for_yeto_tests:f",
                                    "os:sep"])
def test_the_step_log_skips_an_allocator_that_cannot_be_resolved(monkeypatch, caplog, choice):
    monkeypatch.setattr(_step_log, "_reader", None)
    monkeypatch.setattr(_step_log, "_reader_choice", None)
    monkeypatch.setattr(_step_log, "SHARED_REFRESH_S", 0.0)  # the allocator asked every record
    monkeypatch.setattr(_step_log, "_OWN_REFRESH_NS", 0)
    settings = Settings(step_log_census=True, host_allocator=choice)
    for step in range(3):
        record = add_census_to_step_log({"step": step}, rank=0, settings=settings)
        assert "host_mem.vm_rss_bytes" in record
    # Each record after the first failed query's answer is counted (the first has none yet).
    wait_until(lambda: _step_log._reader.ledger.counts().get("allocator", 0) >= 3
               or add_census_to_step_log({}, rank=0, settings=settings) is None)
    (warning,) = [r for r in caplog.records if r.name == "yeto_otel.census"]
    assert f"YETO_OTEL_HOST_ALLOCATOR={choice!r} is not valid" in warning.getMessage()


def test_a_forked_child_queries_afresh_though_its_parent_is_stuck(stuck):
    from forked import in_fork

    parent = os.getpid()

    def stuck_in_parent_only():
        if os.getpid() == parent:
            return stuck()
        return {"num_host_alloc": 5}

    source = AllocatorSource("stuck", stuck_in_parent_only, timeout_ms=TIMEOUT_MS)
    with pytest.raises(CallTimedOut):
        source.query()
    # The child has no thread of the parent's stuck query: it must not wait for it to return.
    assert in_fork(source.query) == {"num_host_alloc": 5}
