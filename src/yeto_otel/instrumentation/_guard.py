"""Our own steps around a patched call never reach the caller.

A wrapper of ours does more than call the original: it picks a tracer, builds the span's
attributes (stat calls, residency probes), starts the span and ends it. An import hook of ours
patches a module once the program imported it. Each of those runs in a process we do not
control: a span processor that raises in `on_end`, a file object whose `name` is odd, a
DataLoader subclass that refuses an attribute, a torch release that moved what a patch expects.
`attempt` and `guarded_span` run such steps so that a failure is logged once (per step and error
type) and the call goes on as it would without yeto-otel: the original call's own result or
exception reaches the caller unchanged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from opentelemetry import trace

__all__ = ["attempt", "guarded_span", "log_failure"]

_log = logging.getLogger("yeto_otel.instrumentation")
_logged: set[tuple[str, str]] = set()
_lock = threading.Lock()


def log_failure(step: str, exc: BaseException, outcome: str = "the call went on") -> None:
    """Warn that `step` failed with `exc`, once per step and error type for the process."""
    key = (step, type(exc).__name__)
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    _log.warning("yeto-otel: %s failed (%s: %s); %s (logged once)", step, type(exc).__name__,
                 exc, outcome)


def attempt(step: str, function: Callable, *args: Any, default: Any = None, **kwargs: Any):
    """`function(*args, **kwargs)`, or `default` when it raises an Exception (logged once)."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        log_failure(step, exc)
        return default


class guarded_span:
    """`with guarded_span(step, start) as span:` where `start()` returns a span's context
    manager (`tracer.start_as_current_span(...)`). If it cannot be started, the block runs with
    a non-recording span; if ending it fails, that is logged. Neither reaches the caller, and
    an exception of the block itself goes on unchanged (never suppressed)."""

    def __init__(self, step: str, start: Callable[[], Any]):
        self._step = step
        self._start = start
        self._manager = None

    def __enter__(self):
        try:
            manager = self._start()
            span = manager.__enter__()
        except Exception as exc:
            log_failure(f"{self._step}: starting the span", exc, "the call went on untraced")
            return trace.INVALID_SPAN
        self._manager = manager
        return span

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if self._manager is not None:
            try:
                self._manager.__exit__(exc_type, exc, traceback)
            except Exception as error:
                if error is not exc:  # a manager that re-raises the block's own: not ours
                    log_failure(f"{self._step}: ending the span", error)
        return False
