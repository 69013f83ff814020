"""A read whose cost grows with the process, kept within a share of one core.

/proc/self/smaps_rollup walks every page-table entry of the process under its memory-map
lock: ~0.2 ms in a small process, ~5-14 ms per GiB of resident 4 KiB pages. At the tens of
GiB a rank holds, reading it on every collection and every step would cost most of a second
each time. So each read is timed, and the next one is allowed only once enough time has
passed that reads take at most `percent` % of one core: a read that took c seconds waits
c / (percent / 100) seconds (0.1 %: a 0.7 s read waits about 12 minutes). In between, callers
get the last sample, so the exported series has no gaps, only age.

One `BudgetedRead` per file and budget is shared by every reader in the process (the SDK's
export thread, the step path; a forked child starts afresh), so they spend one budget and see
one last sample between them; each reader reads through its own descriptor. A caller that
finds another thread reading does not wait for it: it gets the previous sample.

The training thread must not do the read at all (0.8 s at 60 GiB, and on the sync rank every
other rank waits for it at the next collective): with `wait=False` a read that is due is handed
to the process's background reader, one daemon thread started on the first hand-over (and again
in a forked child, which has none of its parent's threads), and the caller gets the previous
sample at once. The read is timed there and spends the same budget; its sample is what the
next caller gets. The SDK's export thread may read inline (`wait=True`): it is no step.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

__all__ = ["BACKGROUND_READER_NAME", "BudgetedRead", "Sample", "shared_budgeted_read"]

T = TypeVar("T")
Clock = Callable[[], int]  # nanoseconds, monotonic
BACKGROUND_READER_NAME = "yeto-otel-background-read"


@dataclass(frozen=True)
class Sample(Generic[T]):
    value: T
    taken_ns: int  # the clock when the read began: `age_ns` counts from here
    number: int  # 1 for the first read, then +1 per read: a caller can tell a new sample

    def age_ns(self, now_ns: int) -> int:
        return max(0, now_ns - self.taken_ns)


class BudgetedRead(Generic[T]):
    """`latest()` reads again when the budget allows (and nobody is reading), else returns the
    last `Sample` (None before the first read, and always with `percent` 0). The read is the
    one given to `latest`, else the one given here. `latest(wait=False)` hands a read that is
    due to the background reader instead, and returns the last sample at once."""

    def __init__(self, read: Callable[[], T] | None = None, *, percent: float,
                 clock: Clock = time.monotonic_ns):
        if not (percent >= 0):  # also refuses nan
            raise ValueError(f"budget must be 0 or more percent, not {percent!r}")
        self.percent = percent
        self.clock = clock
        self.reads = 0
        self.spent_ns = 0  # the measured cost of every read so far
        self.read = read  # the read itself (untimed)
        self._fresh_state()
        _all_reads.add(self)

    def _fresh_state(self) -> None:
        self._lock = threading.Lock()
        self._latest: Sample[T] | None = None
        self._next_ns: int | None = None  # None: no read yet, the first one is due

    @property
    def next_read_ns(self) -> int | None:
        """The clock value from which the next read is allowed (None: due now)."""
        return self._next_ns

    def latest(self, read: Callable[[], T] | None = None, *,
               wait: bool = True) -> Sample[T] | None:
        # The lock is held by whoever reads, from the hand-over to the background reader until
        # its sample is out, so a read is never started twice nor waited for.
        if self.percent > 0 and self._due() and self._lock.acquire(blocking=False):
            if not wait:
                _background.hand_over(self, read or self.read)  # it releases the lock
                return self._latest
            try:
                if self._due():  # another thread may have read while we took the lock
                    self._read_now(read or self.read)
            finally:
                self._lock.release()
        return self._latest

    def _read_handed_over(self, read: Callable[[], T]) -> None:
        """On the background reader, with the lock its caller took: read if still due."""
        try:
            if self._due():
                self._read_now(read)
        except BaseException:  # never the reader's end: a read that raised was timed, no sample
            pass
        finally:
            self._lock.release()

    def _due(self) -> bool:
        return self._next_ns is None or self.clock() >= self._next_ns

    def _read_now(self, read: Callable[[], T]) -> None:
        start = self.clock()
        try:
            value = read()
        finally:
            cost = max(0, self.clock() - start)
            self.reads += 1
            self.spent_ns += cost
            wait = 0 if math.isinf(self.percent) else cost * 100 / self.percent
            self._next_ns = start + int(wait)
        self._latest = Sample(value, start, self.reads)


class _BackgroundReader:
    """The process's one thread for reads handed over by callers that must not wait. At most
    one read per `BudgetedRead` is queued or running (its lock says so), so the queue is as
    short as the number of budgets."""

    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._pid: int | None = None  # the process whose thread serves the inbox

    def hand_over(self, budgeted: BudgetedRead, read: Callable[[], object]) -> None:
        """Queue the read of `budgeted`, whose lock the caller holds; started lazily."""
        try:
            with self._lock:
                if self._pid != os.getpid():  # never started, or forked by code that skipped
                    self._inbox = queue.SimpleQueue()  # the fork hook below
                    threading.Thread(target=self._serve, args=(self._inbox,),
                                     name=BACKGROUND_READER_NAME, daemon=True).start()
                    self._pid = os.getpid()
                self._inbox.put((budgeted, read))
        except RuntimeError:  # no thread at interpreter shutdown (3.12+), or out of threads
            budgeted._lock.release()  # no read then: the last sample stays

    @staticmethod
    def _serve(inbox: queue.SimpleQueue) -> None:
        while True:
            budgeted, read = inbox.get()
            budgeted._read_handed_over(read)
            del budgeted, read  # a budget no reader uses any more is not kept alive here


_background = _BackgroundReader()

# A forked child has its parent's samples (the parent's memory, not its own), maybe a lock held
# by a thread that does not exist there (a read handed over), and no background reader: it
# starts afresh (single-threaded while this runs).
_all_reads: "weakref.WeakSet[BudgetedRead]" = weakref.WeakSet()


def _fresh_after_fork() -> None:
    for budgeted in list(_all_reads):
        budgeted._fresh_state()
    _background._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_after_fork)


# Weak: a budget lives as long as a reader uses it (the instruments' and the step log's live
# as long as the process), so readers made and dropped (a test, a one-off command) leave nothing.
_shared: "weakref.WeakValueDictionary[tuple, BudgetedRead]" = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


def shared_budgeted_read(key: object, *, percent: float,
                         clock: Clock = time.monotonic_ns) -> BudgetedRead:
    """The process's one `BudgetedRead` for `key` (a file and its fields) at this budget and
    clock, shared by every reader that uses it, so they spend the same budget."""
    with _shared_lock:
        budgeted = _shared.get((key, percent, clock))
        if budgeted is None:
            budgeted = BudgetedRead(percent=percent, clock=clock)
            _shared[(key, percent, clock)] = budgeted
        return budgeted
