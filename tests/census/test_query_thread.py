"""The allocator's queries run on one long-lived query thread per process, not on a thread
started for every query: many queries, one thread; a forked child starts its own; a query
stuck on it holds up no other source's queries; and neither an idle nor a stuck query thread
holds up the exit."""

from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from forked import in_fork

from yeto_otel.census import _bounded_call
from yeto_otel.census._bounded_call import BoundedCall, CallStillRunning, CallTimedOut

QUERY_THREAD = "yeto-otel-allocator-query"
STUCK_FOR = 60.0  # far longer than any test here may take: waiting for it fails the test
TIMEOUT_S = 0.05
GENEROUS_S = 30.0  # a bound no healthy query comes near, however slow the machine


def answering_thread() -> tuple[int, int, str, bool]:
    """The query: which process and thread answered it."""
    thread = threading.current_thread()
    return os.getpid(), thread.ident, thread.name, thread.daemon


def wait_until(condition, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


def in_fork_or_fail(fn):
    """`in_fork(fn)`, the child killed (and the test failed) should it hang instead."""
    def bounded():
        faulthandler.dump_traceback_later(GENEROUS_S, exit=True)
        return fn()
    return in_fork(bounded)


def answered(source):
    """`source()`, or None while its abandoned query has not returned."""
    try:
        return source()
    except CallStillRunning:
        return None


@pytest.fixture
def release():
    """An Event a stuck query waits on; set at the end of the test whatever happens."""
    event = threading.Event()
    yield event
    event.set()


def test_many_queries_of_many_sources_use_one_thread():
    sources = [BoundedCall(answering_thread, GENEROUS_S, f"source {i}") for i in range(3)]
    answers = {source() for _ in range(50) for source in sources}
    (answer,) = answers  # one process, one thread, for all 150 queries
    pid, ident, name, daemon = answer
    assert pid == os.getpid() and ident != threading.main_thread().ident
    assert name == QUERY_THREAD and daemon
    assert ident in {t.ident for t in threading.enumerate()}  # alive between queries


def test_a_forked_child_starts_its_own_query_thread_and_answers():
    source = BoundedCall(answering_thread, GENEROUS_S, "source")
    parent_pid, parent_thread, _, _ = source()  # the parent's query thread is running

    def in_child():
        answers = {source() for _ in range(5)}
        return answers, os.getpid(), {t.ident for t in threading.enumerate()}

    answers, child_pid, child_threads = in_fork_or_fail(in_child)
    (answer,) = answers
    pid, ident, name, _ = answer
    assert pid == child_pid != parent_pid  # answered in the child ...
    assert ident in child_threads and name == QUERY_THREAD  # ... by a thread of its own
    assert source()[:2] == (parent_pid, parent_thread)  # the parent's is still there


def test_a_child_forked_while_a_query_was_being_handed_over_still_answers():
    source = BoundedCall(answering_thread, GENEROUS_S, "source")
    source()
    # Another thread of the parent in the middle of handing a query over at the fork.
    with _bounded_call._query_threads._lock:
        answer = in_fork_or_fail(source)
    assert answer[0] != os.getpid() and answer[2] == QUERY_THREAD


def test_a_child_forked_while_a_source_was_starting_a_query_still_answers():
    source = BoundedCall(answering_thread, GENEROUS_S, "source")
    # Another thread of the parent inside this source's own lock at the fork (starting a
    # query, or sharing one under way): the child's lock must not stay held forever.
    with source._lock:
        answer = in_fork_or_fail(source)
    assert answer[0] != os.getpid() and answer[2] == QUERY_THREAD
    assert source()[0] == os.getpid()


def test_a_child_forked_while_a_query_ran_starts_its_own(release):
    parent = os.getpid()
    source = BoundedCall(lambda: release.wait(STUCK_FOR) if os.getpid() == parent
                         else answering_thread(), GENEROUS_S, "source")
    caller = threading.Thread(target=source, daemon=True)
    caller.start()
    wait_until(lambda: source._call is not None)
    # The parent's query runs on a thread the child does not have: the child starts its own.
    answer = in_fork_or_fail(source)
    assert answer[0] != parent and answer[2] == QUERY_THREAD
    release.set()
    caller.join(GENEROUS_S)


def test_a_stuck_query_holds_up_no_other_source(release):
    stuck = BoundedCall(lambda: release.wait(STUCK_FOR), TIMEOUT_S, "stuck")
    healthy = BoundedCall(answering_thread, GENEROUS_S, "healthy")
    before = healthy()[1]
    with pytest.raises(CallTimedOut):
        stuck()
    with pytest.raises(CallStillRunning):
        stuck()
    during = {healthy()[1] for _ in range(20)}
    assert len(during) == 1 and before not in during  # a fresh thread serves meanwhile
    release.set()
    wait_until(lambda: before not in {t.ident for t in threading.enumerate()})  # it ended
    assert stuck() is True  # the stuck source queries again once its query returned
    assert {healthy()[1] for _ in range(20)} == during  # still the one serving thread


def test_a_query_queued_behind_a_slow_one_is_served_by_a_fresh_thread(release):
    slow_started = threading.Event()

    def slow():
        slow_started.set()
        return release.wait(STUCK_FOR)

    patient = BoundedCall(slow, GENEROUS_S, "patient")  # its caller waits for its slow query
    hasty = BoundedCall(answering_thread, TIMEOUT_S, "hasty")
    waiter = threading.Thread(target=patient)
    waiter.start()
    try:
        assert slow_started.wait(GENEROUS_S)
        with pytest.raises(CallTimedOut):
            hasty()  # queued behind the slow query past its bound: abandoned ...
        hasty.timeout_s = GENEROUS_S
        # ... and run on a fresh thread instead of after the slow query.
        wait_until(lambda: answered(hasty) is not None)
        assert answered(hasty)[2] == QUERY_THREAD
        assert waiter.is_alive()  # the slow query is indeed still running
    finally:
        release.set()
        waiter.join(GENEROUS_S)


EXITS = """
import threading, time
from yeto_otel.census._bounded_call import BoundedCall, CallTimedOut
hangs = BoundedCall(lambda: threading.Event().wait(), 0.05, "hangs")
answers = BoundedCall(lambda: 7, 30.0, "answers")
assert answers() == 7  # a query thread idle between queries
try:
    hangs()
except CallTimedOut:
    print("abandoned", flush=True)
assert answers() == 7  # and a query stuck for good on another
"""


def test_neither_an_idle_nor_a_stuck_query_thread_holds_up_the_exit():
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(EXITS)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "abandoned\n"
