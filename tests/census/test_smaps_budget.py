"""smaps_rollup (Private_Dirty) within a CPU budget: each read is timed and the next waits until
the reads stay within the budget; the last value is exported in between, with its age; every
reader of the process (the SDK's export thread, the step path) spends one budget; a caller never
waits for another's read. A fake clock and a read that "costs" what the test says: no sleeps."""

from __future__ import annotations

import math
import mmap
import threading
import time

import pytest

from snapshot_testkit import ANON, KB, PRIVATE_DIRTY, RSS, copy_root
from yeto_otel import add_census_to_step_log
from yeto_otel.census import ANONYMOUS as ANONYMOUS_ROW
from yeto_otel.census import _step_log
from yeto_otel.census import PRIVATE_DIRTY as PRIVATE_DIRTY_ROW
from yeto_otel.census import CensusReader, Source
from yeto_otel.census._budgeted_read import BudgetedRead
from yeto_otel.proc import PAGE_SIZE
from yeto_otel.settings import Settings

MS = 1_000_000
S = 1_000 * MS


class FakeClock:
    def __init__(self, now: int = 1_000 * S):
        self.now = now

    def __call__(self) -> int:
        return self.now


def costly(read, clock: FakeClock, cost_ns: int):
    """`read`, taking `cost_ns` of the fake clock each time it runs."""
    calls = []

    def timed():
        calls.append(clock.now)
        clock.now += cost_ns
        return read()
    timed.calls = calls
    return timed


def test_a_read_waits_its_cost_over_the_budget():
    clock = FakeClock()
    read = costly(lambda: "value", clock, 2 * MS)
    budgeted = BudgetedRead(read, percent=0.1, clock=clock)
    start = clock.now
    first = budgeted.latest()
    assert (first.value, first.number, first.taken_ns) == ("value", 1, start)
    assert budgeted.next_read_ns == start + 2 * S  # 2 ms at 0.1 % of a core: 2 s apart
    clock.now = start + 2 * S - 1
    assert budgeted.latest() is first and len(read.calls) == 1
    assert first.age_ns(clock()) == 2 * S - 1
    clock.now = start + 2 * S
    assert budgeted.latest().number == 2 and len(read.calls) == 2


@pytest.mark.parametrize("percent, wait_per_ms", [(1.0, 100 * MS), (0.01, 10 * S),
                                                  (100.0, 1 * MS)])
def test_the_wait_follows_the_budget(percent, wait_per_ms):
    clock = FakeClock()
    budgeted = BudgetedRead(costly(lambda: 0, clock, 1 * MS), percent=percent, clock=clock)
    start = clock.now
    budgeted.latest()
    assert budgeted.next_read_ns == start + wait_per_ms


def test_zero_never_reads_and_always_reads_every_time():
    clock = FakeClock()
    never = costly(lambda: 1, clock, 5 * MS)
    assert BudgetedRead(never, percent=0, clock=clock).latest() is None
    assert never.calls == []
    every = costly(lambda: 1, clock, 5 * MS)
    always = BudgetedRead(every, percent=math.inf, clock=clock)
    assert [always.latest().number for _ in range(4)] == [1, 2, 3, 4]


def test_reads_stay_within_the_budget_as_the_process_grows():
    """Collections every 10 s and steps every 50 ms for 3 simulated hours while the read's cost
    grows from 0.2 ms to 700 ms (60 GiB): the reads never take more than the budget, plus the
    one read that opened the last interval."""
    clock = FakeClock()
    start = clock.now
    cost = [200_000]

    def read():
        clock.now += cost[0]
        return cost[0]

    budgeted = BudgetedRead(read, percent=0.1, clock=clock)
    end = start + 3 * 3600 * S
    while clock.now < end:
        budgeted.latest()
        clock.now += 50 * MS
        cost[0] = min(700 * MS, cost[0] + 50_000)
    elapsed = clock.now - start
    assert budgeted.reads > 5
    assert budgeted.spent_ns <= 0.001 * elapsed + 700 * MS
    assert budgeted.latest().age_ns(clock()) <= 1000 * 700 * MS  # stale by at most cost/budget


def test_a_caller_never_waits_for_another_callers_read():
    clock = FakeClock()
    inside, release = threading.Event(), threading.Event()
    values = iter(["old", "new"])

    def read():
        value = next(values)
        if value == "new":
            inside.set()
            assert release.wait(10)
        return value

    budgeted = BudgetedRead(read, percent=math.inf, clock=clock)
    assert budgeted.latest().value == "old"
    got = []
    export_thread = threading.Thread(target=lambda: got.append(budgeted.latest()))
    export_thread.start()
    try:
        assert inside.wait(10)
        # The step path meanwhile: the previous sample at once, no second read started.
        assert budgeted.latest().value == "old"
        assert budgeted.reads == 1
    finally:
        release.set()
        export_thread.join(10)
    assert [sample.value for sample in got] == ["new"] and budgeted.reads == 2


def test_a_read_that_raises_still_counts_against_the_budget():
    clock = FakeClock()

    def read():
        clock.now += 3 * MS
        raise OSError("boom")

    budgeted = BudgetedRead(read, percent=0.1, clock=clock)
    start = clock.now
    with pytest.raises(OSError):
        budgeted.latest()
    assert budgeted.latest() is None and budgeted.next_read_ns == start + 3 * S


# --- through the census reader ----------------------------------------------------------------

def write_private_dirty(root, kb: int) -> None:
    path = root / "self" / "smaps_rollup"
    text = path.read_text()
    old = next(line for line in text.splitlines() if line.startswith("Private_Dirty:"))
    path.write_text(text.replace(old, f"Private_Dirty:  {kb} kB"))


def fake_clock_reader(root, clock, *, percent=0.1, cost=2 * MS) -> CensusReader:
    reader = CensusReader(proc_root=str(root), allocator=None, node_metrics=False,
                          smaps_budget_percent=percent, clock=clock)
    reader.smaps_rollup_read = costly(reader.smaps_rollup_read, clock, cost)
    return reader


def test_the_last_value_is_exported_on_every_collection_with_its_age(tmp_path):
    root, clock = copy_root(tmp_path), FakeClock()
    reader = fake_clock_reader(root, clock)
    first = reader.take()
    assert first[PRIVATE_DIRTY].value == 4212 * KB and first.ages_ns[PRIVATE_DIRTY] == 2 * MS
    write_private_dirty(root, 9000)
    for seconds in (1, 1.5, 1.99):  # 2 ms read, 0.1 %: the next read is 2 s after the first
        clock.now = 1_000 * S + int(seconds * S)
        snap = reader.take()
        assert snap[PRIVATE_DIRTY].value == 4212 * KB  # no gap: the last value
        assert snap.ages_ns[PRIVATE_DIRTY] == int(seconds * S)
        assert RSS in snap and ANON in snap  # status is read every time
    assert reader.smaps_rollup.reads == 1
    clock.now = 1_000 * S + 2 * S
    snap = reader.take()
    assert snap[PRIVATE_DIRTY].value == 9000 * KB and snap.ages_ns[PRIVATE_DIRTY] == 2 * MS


AGE = "yeto.process.memory.smaps_rollup.age"


def test_the_age_is_observed_whenever_the_values_are(tmp_path):
    """The sample's age in seconds, a value of its own (exported, not only in the step log),
    in every snapshot that carries the smaps_rollup values and in none that lacks them."""
    root, clock = copy_root(tmp_path), FakeClock()
    reader = fake_clock_reader(root, clock)
    first = reader.take()
    assert first[AGE].value == pytest.approx(0.002)  # the read began 2 ms before it ended
    assert first[AGE].unit == "s"
    clock.now += int(1.5 * S)  # not due: the same sample, 1.5 s older
    second = reader.take()
    assert second[PRIVATE_DIRTY].value == first[PRIVATE_DIRTY].value
    assert second[AGE].value == pytest.approx(1.502)
    assert second.ages_ns[PRIVATE_DIRTY] == int(1.502 * S)
    (root / "self" / "smaps_rollup").write_text("garbage\n")
    clock.now += 2 * S  # due: a read that finds nothing, so no values and no age
    third = reader.take()
    assert PRIVATE_DIRTY not in third and AGE not in third


def test_anonymous_is_fresh_while_private_dirty_waits(tmp_path):
    root, clock = copy_root(tmp_path), FakeClock()
    reader = fake_clock_reader(root, clock)
    assert reader.take()[ANON].value == 4212 * KB
    status = root / "self" / "status"
    status.write_text(status.read_text().replace("RssAnon:\t    4212 kB",
                                                 "RssAnon:\t    8000 kB"))
    clock.now += 1 * S  # smaps_rollup is not due
    snap = reader.take()
    assert snap[ANON].value == 8000 * KB and ANON not in snap.ages_ns
    assert reader.smaps_rollup.reads == 1


def test_readers_of_the_process_share_one_budget(tmp_path):
    """The SDK's reader and the step log's: a read by one serves the other."""
    root, clock = copy_root(tmp_path), FakeClock()
    sdk, step = fake_clock_reader(root, clock), fake_clock_reader(root, clock)
    assert sdk.smaps_rollup is step.smaps_rollup
    sdk.take()
    write_private_dirty(root, 7000)
    clock.now += 1 * S
    assert step.take()[PRIVATE_DIRTY].value == 4212 * KB  # the SDK's read, 1 s old
    assert step.smaps_rollup.reads == 1
    clock.now += 1 * S
    assert step.take()[PRIVATE_DIRTY].value == 7000 * KB
    assert sdk.take()[PRIVATE_DIRTY].value == 7000 * KB and sdk.smaps_rollup.reads == 2


def test_a_failed_read_is_counted_once_per_reader(tmp_path, caplog):
    root, clock = copy_root(tmp_path), FakeClock()
    (root / "self" / "smaps_rollup").unlink()
    sdk, step = fake_clock_reader(root, clock), fake_clock_reader(root, clock)
    for _ in range(3):
        assert PRIVATE_DIRTY not in sdk.take() and PRIVATE_DIRTY not in step.take()
    assert sdk.ledger.counts() == {"smaps_rollup": 1} == step.ledger.counts()
    clock.now += 3 * S  # due again: a second failed read, counted by each once more
    sdk.take(), step.take()
    assert sdk.ledger.counts() == {"smaps_rollup": 2} == step.ledger.counts()


def test_budget_zero_leaves_private_dirty_out_and_never_opens_the_file(tmp_path):
    reader = CensusReader(proc_root=str(copy_root(tmp_path)), allocator=None,
                          node_metrics=False, smaps_budget_percent=0)
    assert PRIVATE_DIRTY_ROW not in reader.metrics and reader.smaps_rollup is None
    assert Source.SMAPS_ROLLUP not in reader.proc_files
    snap = reader.take()
    assert PRIVATE_DIRTY not in snap and snap[ANON].value == 4212 * KB


# --- the step log -----------------------------------------------------------------------------

def test_the_step_log_carries_the_age_beside_the_last_value(monkeypatch):
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    # A budget so small that the next read is hours away: the second record must reuse the first.
    settings = Settings(step_log_census=True, host_allocator="none",
                        smaps_budget_percent=1e-7)
    age_key = PRIVATE_DIRTY_ROW.step_log_age_key
    # The step log never reads smaps_rollup itself: the first read is on the census's
    # background reader, and a later record carries it.
    deadline = time.monotonic() + 30
    while age_key not in (first := add_census_to_step_log({}, settings=settings)):
        assert time.monotonic() < deadline, "no smaps_rollup read reached the step log"
        time.sleep(0.01)
    assert isinstance(first[age_key], float) and first[age_key] >= 0
    grown = mmap.mmap(-1, 32 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for offset in range(0, len(grown), PAGE_SIZE):
        grown[offset] = 1
    anonymous = ANONYMOUS_ROW.step_log_key
    # The rank's own memory is read again within the step log's 50 ms: the kernel's counter.
    deadline = time.monotonic() + 30
    while (second := add_census_to_step_log({}, settings=settings))[anonymous] \
            - first[anonymous] < 32 << 20:
        assert time.monotonic() < deadline, "the step log never read the rank's memory again"
        time.sleep(0.01)
    assert second[ANONYMOUS_ROW.step_log_age_key] < _step_log.OWN_REFRESH_S
    assert second[PRIVATE_DIRTY_ROW.step_log_key] == first[PRIVATE_DIRTY_ROW.step_log_key]
    assert second[age_key] >= first[age_key]
    grown.close()


def test_the_step_log_without_smaps_rollup(monkeypatch):
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    record = add_census_to_step_log({}, settings=Settings(
        step_log_census=True, host_allocator="none", smaps_budget_percent=0))
    assert PRIVATE_DIRTY_ROW.step_log_key not in record
    assert PRIVATE_DIRTY_ROW.step_log_age_key not in record
    assert record[ANONYMOUS_ROW.step_log_key] > 0
