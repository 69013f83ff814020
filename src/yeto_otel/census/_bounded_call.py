"""Calls into code we do not control (the host allocator's query) with a bound on the wait.

The call runs on a short-lived daemon thread and the caller waits for it at most `timeout_s`.
One that takes longer is abandoned: the caller gets `CallTimedOut` and the census carries on
without it. While an abandoned call still runs no new one starts, so a stuck allocator holds
one thread, not one more per collection; callers that come meanwhile are answered at once
(`CallStillRunning`). Callers that come while a call runs and has not yet been abandoned share
its answer. The thread is a daemon, so a call that never returns never holds up the exit.

Whatever the call raises is caught on its thread, `BaseException`s included (`SystemExit`,
`KeyboardInterrupt`, `GeneratorExit` raised by user code), and handed to the caller as an
`Exception`: it can end neither the SDK's export thread nor the trainer's step. A real Ctrl-C
is not among them: signals are delivered to the main thread, never to this one.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

__all__ = ["BoundedCall", "CallFailed", "CallStillRunning", "CallTimedOut"]


class CallFailed(Exception):
    """The call gave no usable answer; the message says why (the census records it)."""


class CallTimedOut(CallFailed):
    pass


class CallStillRunning(CallTimedOut):
    pass


class _Call:
    def __init__(self, fn: Callable[[], object]):
        self.fn = fn
        self.pid = os.getpid()  # a forked copy of a running call has no thread in the child
        self.done = threading.Event()
        self.abandoned_at: float | None = None
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # user code: nothing may escape this thread unrecorded
            self.error = exc
        finally:
            self.fn = None  # type: ignore[assignment]
            self.done.set()


class BoundedCall:
    """`fn()` on a thread of its own, waited for at most `timeout_s` per caller."""

    def __init__(self, fn: Callable[[], object], timeout_s: float, what: str):
        self._fn = fn
        self.timeout_s = timeout_s
        self.what = what
        self._lock = threading.Lock()
        self._call: _Call | None = None

    def __call__(self) -> object:
        call = self._running_or_new()
        if not call.done.wait(self.timeout_s):
            if call.abandoned_at is None:
                call.abandoned_at = time.monotonic()
            raise CallTimedOut(f"{self.what} did not answer within {self.timeout_s * 1000:g} ms; "
                               f"abandoned for this collection")
        if call.error is None:
            return call.result
        if isinstance(call.error, Exception):
            raise call.error
        raise CallFailed(f"{self.what} raised {type(call.error).__name__}: {call.error}")

    def _running_or_new(self) -> _Call:
        with self._lock:
            call = self._call
            if call is not None and call.pid == os.getpid() and not call.done.is_set():
                if call.abandoned_at is not None:
                    raise CallStillRunning(
                        f"{self.what} has not returned from a query abandoned "
                        f"{time.monotonic() - call.abandoned_at:.1f} s ago; no new query "
                        f"starts until it does")
                return call  # another caller's query is under way: share its answer
            call = _Call(self._fn)
            try:
                threading.Thread(target=call.run, name="yeto-otel-allocator-query",
                                 daemon=True).start()
            except RuntimeError as exc:  # at interpreter shutdown (3.12+), or out of threads
                raise CallFailed(f"{self.what}: cannot start its query thread: {exc}") from None
            self._call = call
            return call
