"""Calls into code we do not control (the host allocator's query) with a bound on the wait.

The call runs on the process's query thread, a daemon thread started on the first call (and
again in a forked child, which has none of its parent's threads) that then serves calls one
at a time, and the caller waits for it at most `timeout_s`. One that takes longer is
abandoned: the caller gets `CallTimedOut` and the census carries on without it. While an
abandoned call still runs no new one of the same `BoundedCall` starts, so a stuck allocator
holds one thread, not one more per collection; callers that come meanwhile are answered at
once (`CallStillRunning`). Callers that come while a call runs and has not yet been abandoned
share its answer. The thread is a daemon, so a call that never returns never holds up the exit.

A thread whose call is abandoned stops serving: it ends when that call returns, and the calls
queued behind it (other `BoundedCall`s') go to a fresh query thread, so a stuck query holds up
no other beyond its caller's bound. Why one serving thread: starting a thread cost more than a
query (benchmarks/allocator_query.py). Why a `SimpleQueue` and a bare lock to hand a call over
and its answer back: a Python-level `Condition` or `Event` made each hand-over a few more
context switches (the woken thread waits again for the other's lock or the GIL).

A caller that must not wait at all (the step log, on the training thread) asks `latest()`:
the answer of the last call that finished, and a new call handed to the query thread when
none is running, so the next caller has a fresher one. The bound still holds: a call that
runs past it is abandoned (with the same answers) by whichever caller finds it so.

Whatever the call raises is caught on its thread, `BaseException`s included (`SystemExit`,
`KeyboardInterrupt`, `GeneratorExit` raised by user code), and handed to the caller as an
`Exception`: it can end neither the SDK's export thread nor the trainer's step. A real Ctrl-C
is not among them: signals are delivered to the main thread, never to this one.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from typing import Callable

__all__ = ["BoundedCall", "CallFailed", "CallPending", "CallStillRunning", "CallTimedOut"]

QUERY_THREAD_NAME = "yeto-otel-allocator-query"


class CallFailed(Exception):
    """The call gave no usable answer; the message says why (the census records it)."""


class CallTimedOut(CallFailed):
    pass


class CallStillRunning(CallTimedOut):
    pass


class CallPending(Exception):
    """`latest()` before any call has finished: no answer yet, and nothing wrong."""


class _Call:
    def __init__(self, fn: Callable[[], object], what: str):
        self.fn = fn
        self.what = what
        self.pid = os.getpid()  # a forked copy of a running call has no thread in the child
        self.worker: _Worker | None = None  # the thread it was handed to
        self.handed_at = time.monotonic()  # its bound counts from here, as a waiter's does
        self.finished = False
        self.abandoned_at: float | None = None
        self.result: object = None
        self.error: BaseException | None = None
        self._done = threading.Lock()  # held until the call has finished
        self._done.acquire()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # user code: nothing may escape this thread unrecorded
            self.error = exc
        finally:
            self._finish()

    def fail(self, why: str) -> None:
        self.error = CallFailed(f"{self.what}: {why}")
        self._finish()

    def _finish(self) -> None:
        self.fn = None  # type: ignore[assignment]
        self.finished = True
        self._done.release()  # last: a caller woken by it finds the answer in place

    def wait(self, timeout_s: float) -> bool:
        """True once finished; False if that took longer than `timeout_s`."""
        if not self._done.acquire(timeout=timeout_s):
            return False
        self._done.release()  # every other caller sharing this call passes through as well
        return True


class _Worker:
    """A daemon query thread running the calls put in its inbox, in order, until retired."""

    def __init__(self):
        self.inbox: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self.retired = False
        threading.Thread(target=self._serve, name=QUERY_THREAD_NAME, daemon=True).start()

    def _serve(self) -> None:
        while not self.retired:
            call = self.inbox.get()
            if call is None:  # retired while waiting here
                return
            call.run()


class _QueryThreads:
    """The process's serving query thread, and the retiring of one whose call is abandoned."""

    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._serving: _Worker | None = None
        self._pid = os.getpid()

    def submit(self, call: _Call) -> None:
        """Hand `call` to the serving thread; `RuntimeError` when none can be started."""
        with self._lock:
            if self._pid != os.getpid():  # forked by code that skipped the fork hook below
                self._serving, self._pid = None, os.getpid()
            if self._serving is None:
                self._serving = _Worker()
            call.worker = self._serving
            self._serving.inbox.put(call)

    def abandon(self, call: _Call) -> None:
        """Its caller waits for `call` no longer. If the serving thread holds it up (running
        it, or another before it), that thread is retired and a fresh one takes its inbox."""
        with self._lock:
            stuck = call.worker
            if stuck is None or stuck is not self._serving or call.finished:
                return  # already answered, or on a thread that no longer serves
            stuck.retired, self._serving = True, None
            queued = []
            while True:
                try:
                    queued.append(stuck.inbox.get_nowait())
                except queue.Empty:
                    break
            stuck.inbox.put(None)  # in case it finishes its call and waits for another
            if not queued:
                return  # the next call starts a fresh thread
            try:
                self._serving = _Worker()
            except RuntimeError as exc:  # at interpreter shutdown (3.12+), or out of threads
                for waiting in queued:
                    waiting.fail(f"cannot start its query thread: {exc}")
                return
            for waiting in queued:
                waiting.worker = self._serving
                self._serving.inbox.put(waiting)


_query_threads = _QueryThreads()
_bounded_calls: weakref.WeakSet = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A lock another thread held at the fork would never be released in the child, and the
    parent's calls have no thread here: every lock and call starts afresh."""
    _query_threads._reset()
    for bounded in list(_bounded_calls):
        bounded._lock, bounded._call, bounded._answered = threading.Lock(), None, None


os.register_at_fork(after_in_child=_after_fork_in_child)


class BoundedCall:
    """`fn()` on the query thread, waited for at most `timeout_s` per caller."""

    def __init__(self, fn: Callable[[], object], timeout_s: float, what: str):
        self._fn = fn
        self.timeout_s = timeout_s
        self.what = what
        self._lock = threading.Lock()
        self._call: _Call | None = None
        self._answered: _Call | None = None  # the last call `latest()` saw finished
        _bounded_calls.add(self)

    def __call__(self) -> object:
        call = self._running_or_new()
        if not call.wait(self.timeout_s):
            self._abandon(call)
        return self._answer(call)

    def latest(self) -> object:
        """Without waiting: the last finished call's answer, as `__call__` gives it (its result,
        or what it raised); `CallPending` before one has finished. A new call is handed to the
        query thread when none is running. A running call past `timeout_s` is abandoned here as
        `__call__` abandons it (`CallTimedOut`, then `CallStillRunning` until it returns)."""
        with self._lock:
            call = self._call
            if call is not None and call.pid == os.getpid() and not call.finished:
                if call.abandoned_at is not None:
                    raise self._still_running(call)
                overdue = time.monotonic() - call.handed_at > self.timeout_s
            else:
                overdue = False
                if call is not None and call.pid == os.getpid():
                    self._answered = call
                self._call = self._submit()
            answered = self._answered
        if overdue:
            self._abandon(call)
        if answered is None:
            raise CallPending(f"{self.what}: no query has finished yet")
        return self._answer(answered, again=True)

    def _abandon(self, call: _Call) -> None:
        if call.abandoned_at is None:
            call.abandoned_at = time.monotonic()
            _query_threads.abandon(call)
        raise CallTimedOut(f"{self.what} did not answer within {self.timeout_s * 1000:g} ms; "
                           f"abandoned for this collection")

    def _answer(self, call: _Call, *, again: bool = False) -> object:
        """What a finished call gave. `again`: it may be given more than once, and an exception
        raised again would grow its traceback by the frames of every raise."""
        error = call.error
        if error is None:
            return call.result
        if isinstance(error, Exception):
            raise error.with_traceback(None) if again else error
        raise CallFailed(f"{self.what} raised {type(error).__name__}: {error}")

    def _still_running(self, call: _Call) -> CallStillRunning:
        return CallStillRunning(f"{self.what} has not returned from a query abandoned "
                                f"{time.monotonic() - call.abandoned_at:.1f} s ago; no new query "
                                f"starts until it does")

    def _submit(self) -> _Call:
        """A new call of `fn`, handed to the query thread (under `_lock`)."""
        call = _Call(self._fn, self.what)
        try:
            _query_threads.submit(call)
        except RuntimeError as exc:  # at interpreter shutdown (3.12+), or out of threads
            raise CallFailed(f"{self.what}: cannot start its query thread: {exc}") from None
        return call

    def _running_or_new(self) -> _Call:
        with self._lock:
            call = self._call
            if call is not None and call.pid == os.getpid() and not call.finished:
                if call.abandoned_at is not None:
                    raise self._still_running(call)
                return call  # another caller's query is under way: share its answer
            self._call = self._submit()
            return self._call
