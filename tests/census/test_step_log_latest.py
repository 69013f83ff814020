"""The step log takes the latest values and never waits on the training thread: a smaps_rollup
read that is due is handed to the census's background reader (one daemon thread per process,
started again in a forked child), and a later record carries its value and age; the host
allocator is answered by its last finished query, and a new one is started without waiting.

The slow read and the stuck allocator are made so by the test (events that it releases); the
later values are polled for, never slept for. A call that waited for them would take STUCK_S,
far over the QUICK_S a call may take here on a loaded machine."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest

from yeto_otel.census import PRIVATE_DIRTY, add_census_to_step_log
from yeto_otel.census import _step_log
from yeto_otel.census._budgeted_read import BudgetedRead
from yeto_otel.settings import Settings
from yeto_otel import testing
from yeto_otel.testing import HostAllocatorStandIn

STUCK_S = 10.0
QUICK_S = 2.0
READ_VALUE = 12_345 * 4096  # what the test's slow read finds: no real process has it
ALLOC_KEY = "host_mem.host_alloc.active_bytes.freed"


@pytest.fixture(autouse=True)
def fresh_step_log(monkeypatch):
    monkeypatch.setattr(_step_log, "_reader", None)
    monkeypatch.setattr(_step_log, "_reader_choice", None)
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)


def poll(make, until, deadline_s: float = 30.0):
    """`make()` again until `until(its result)`; the result."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = make()
        if until(found):
            return found
        assert time.monotonic() < deadline, f"not seen before the deadline: {found!r}"
        time.sleep(0.01)


def timed(fn):
    started = time.monotonic()
    result = fn()
    return result, time.monotonic() - started


class SlowRead:
    """A smaps_rollup read that blocks until `release()`; notes the threads it ran on."""

    def __init__(self, value: int = READ_VALUE):
        self.value = value
        self.entered = threading.Event()
        self.released = threading.Event()
        self.threads: list[threading.Thread] = []

    def __call__(self):
        self.threads.append(threading.current_thread())
        self.entered.set()
        self.released.wait(STUCK_S)
        return {PRIVATE_DIRTY.name: self.value}, ""

    def release(self):
        self.released.set()


@pytest.fixture
def slow_read():
    read = SlowRead()
    yield read
    read.release()


def test_a_due_smaps_rollup_read_is_not_done_on_the_training_thread(slow_read):
    # An unlimited budget: a read is due on every call.
    settings = Settings(step_log_census=True, host_allocator="none",
                        smaps_budget_percent=math.inf)
    reader, _ = _step_log._census_reader(settings)
    reader.smaps_rollup_read = slow_read
    record, took = timed(lambda: add_census_to_step_log({}, rank=0, settings=settings))
    assert took < QUICK_S, f"the step waited {took:.2f} s for the smaps_rollup read"
    assert record.get(PRIVATE_DIRTY.step_log_key) != READ_VALUE
    assert record["host_mem.anonymous_bytes"] > 0  # the cheap reads are there, fresh
    assert slow_read.entered.wait(30)  # the read did start, elsewhere
    assert threading.current_thread() not in slow_read.threads
    # Steps meanwhile: no wait, and no second read while the first one runs.
    for _ in range(3):
        _, took = timed(lambda: add_census_to_step_log({}, rank=0, settings=settings))
        assert took < QUICK_S
    assert len(slow_read.threads) == 1
    slow_read.release()
    record = poll(lambda: add_census_to_step_log({}, rank=0, settings=settings),
                  lambda r: r.get(PRIVATE_DIRTY.step_log_key) == READ_VALUE)
    assert 0 <= record[PRIVATE_DIRTY.step_log_age_key] < 30


def test_a_read_that_is_not_due_is_not_started():
    """Within its budget the step log hands nothing over: the last sample, with its age."""
    settings = Settings(step_log_census=True, host_allocator="none",
                        smaps_budget_percent=1e-7)  # the next read is hours away
    reader, _ = _step_log._census_reader(settings)
    first = poll(lambda: add_census_to_step_log({}, rank=0, settings=settings),
                 lambda r: PRIVATE_DIRTY.step_log_key in r)
    reads = reader.smaps_rollup.reads
    second = add_census_to_step_log({}, rank=0, settings=settings)
    assert second[PRIVATE_DIRTY.step_log_key] == first[PRIVATE_DIRTY.step_log_key]
    assert second[PRIVATE_DIRTY.step_log_age_key] >= first[PRIVATE_DIRTY.step_log_age_key]
    assert reader.smaps_rollup.reads == reads


class StuckAllocator:
    def __init__(self):
        self.released = threading.Event()
        self.started = 0

    def __call__(self):
        self.started += 1
        self.released.wait(STUCK_S)
        return HostAllocatorStandIn.full_stats(freed=3)


@pytest.fixture
def stuck(monkeypatch):
    allocator = StuckAllocator()
    monkeypatch.setattr("yeto_otel.census._allocator._auto_stats", allocator)
    yield allocator
    allocator.released.set()


def test_a_stuck_allocator_never_makes_the_step_log_wait(stuck):
    # A bound longer than the stuck query: the old step log waited the whole bound.
    settings = Settings(step_log_census=True, host_allocator="auto", smaps_budget_percent=0,
                        allocator_timeout_ms=int(STUCK_S * 1000))
    for step in range(5):
        record, took = timed(lambda: add_census_to_step_log({"step": step}, rank=0,
                                                            settings=settings))
        assert took < QUICK_S, f"step {step} waited {took:.2f} s for the allocator"
        assert "host_mem.vm_rss_bytes" in record
        assert ALLOC_KEY not in record
    poll(lambda: stuck.started, lambda started: started >= 1)  # handed over, not waited for
    for _ in range(3):
        add_census_to_step_log({}, rank=0, settings=settings)
    assert stuck.started == 1  # one query in flight, not one per step
    stuck.released.set()
    record = poll(lambda: add_census_to_step_log({}, rank=0, settings=settings),
                  lambda r: ALLOC_KEY in r)
    assert record[ALLOC_KEY] == 3


def test_the_step_log_takes_the_last_finished_allocator_query(monkeypatch):
    """Each record carries the answer of a query finished before it; the query it starts is
    answered by the time a later record is made."""
    settings = Settings(step_log_census=True, host_allocator="yeto_otel.testing:settable",
                        smaps_budget_percent=0)
    monkeypatch.setattr(testing.settable, "stats", HostAllocatorStandIn.full_stats(freed=3))
    monkeypatch.setattr(testing.settable, "raises", None)
    poll(lambda: add_census_to_step_log({}, rank=0, settings=settings), lambda r: ALLOC_KEY in r)
    monkeypatch.setattr(testing.settable, "stats", HostAllocatorStandIn.full_stats(freed=9))
    record = poll(lambda: add_census_to_step_log({}, rank=0, settings=settings),
                  lambda r: r.get(ALLOC_KEY) == 9)
    assert record["host_mem.host_alloc.active_bytes.current_is_gauge"] is True


# --- the background reader in a forked child ----------------------------------------------------


def _read_in_child(budgeted: BudgetedRead) -> tuple[int, str, int]:
    """In the child: a due read handed over without waiting, polled for; (the value its read
    found, the thread that read it, the parent's reader threads it sees alive)."""
    seen = []

    def read_pid():
        seen.append(threading.current_thread())
        return os.getpid()

    sample = poll(lambda: budgeted.latest(read_pid, wait=False),
                  lambda s: s is not None, deadline_s=20)
    return sample.value, seen[0].name, seen[0].ident != threading.main_thread().ident


def test_a_forked_child_starts_its_own_background_reader(slow_read):
    """The parent's background reader is stuck in a read when the child is forked: the child
    has no such thread and a copy of a held lock. It must read for itself, on a thread of its
    own, and find its own pid."""
    from forked import in_fork

    budgeted = BudgetedRead(percent=math.inf)
    assert budgeted.latest(slow_read, wait=False) is None  # handed over, not read here
    assert slow_read.entered.wait(30)
    value, thread_name, off_main = in_fork(_read_in_child, budgeted)
    assert value != os.getpid() and value > 0  # read in the child, about the child
    assert off_main and thread_name == slow_read.threads[0].name
    slow_read.release()
    poll(lambda: budgeted.latest(lambda: "parent", wait=False), lambda s: s is not None)
