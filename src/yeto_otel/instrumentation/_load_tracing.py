"""What the load instrumentors (torch.load, safetensors, DCP) share: the tracer a load is
traced with (or none), putting a wrapper in place of a module's function (and recording it
for uninstrument; a `Switch` turns off a wrapper left in another library's hands), logging
each kind of measuring failure once, and the mark that a DCP load is reading its items (so
the `torch.load` it makes per item gets no span of its own)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from typing import Callable, Iterator

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from ..otel import process_pipeline
from ..version import __version__

__all__ = ["OnceLog", "Switch", "checkpoint_items_read", "reading_checkpoint_items",
           "replace_attribute", "load_tracer"]


def load_tracer(configured, name: str):
    """The tracer a load starting now is traced with, or None when it gets no span: the caller
    suppressed instrumentation (OpenTelemetry's `suppress_instrumentation()`), or this is a
    DataLoader worker whose loads are not traced (YETO_OTEL_WORKER_LOAD_SPANS=off, the
    default: a dataset's per-sample loads). A process with a pipeline of its own (a worker, a
    rank set up by another configurator) traces through it; any other through the tracer the
    instrumentor was given."""
    if not is_instrumentation_enabled():
        return None
    pipeline = process_pipeline()
    if pipeline is None:
        return configured
    if not pipeline.trace_loads:
        return None
    return pipeline.tracer_provider.get_tracer(name, __version__)


def replace_attribute(patched: list, module, attribute: str,
                      make: Callable[[Callable], Callable], mark: str) -> None:
    """Put `make(original)` in place of `module.attribute`, marked with `mark` so it is never
    wrapped twice, and append (module, attribute, original, wrapper) to `patched`. Nothing
    happens when the attribute is missing or not callable."""
    original = getattr(module, attribute, None)
    if not callable(original) or hasattr(original, mark):
        return
    wrapper = make(original)
    setattr(wrapper, mark, True)
    setattr(module, attribute, wrapper)
    patched.append((module, attribute, original, wrapper))


class Switch:
    """On while the instrumentation that made a wrapper is. Each patch has its own: after
    uninstrument, a wrapper another library still calls (it wrapped ours) calls straight
    through, and stays so when instrumented anew (the new wrapper traces instead)."""

    on = True


class OnceLog:
    """`log(kind, message)` warns once per kind, saying which span attribute carries the
    later occurrences."""

    def __init__(self, logger: str, what: str, attribute: str):
        self._log = logging.getLogger(logger)
        self._what = what
        self._attribute = attribute
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, kind: str, message: str) -> None:
        with self._lock:
            if kind in self._logged:
                return
            self._logged.add(kind)
        self._log.warning("%s: %s (logged once; later spans carry %s)", self._what, message,
                          self._attribute)


# True while a traced DCP load's storage reader reads in this context. FileSystemReader
# calls torch.load once per tensor item (hundreds per rank for a real model); the read span
# counts them instead. Threads a reader starts itself do not inherit the mark.
_reading_items: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "yeto_reading_checkpoint_items", default=False)


@contextlib.contextmanager
def checkpoint_items_read() -> Iterator[None]:
    """Marks the block as a DCP load reading its items."""
    token = _reading_items.set(True)
    try:
        yield
    finally:
        _reading_items.reset(token)


def reading_checkpoint_items() -> bool:
    """Whether a traced DCP load is reading its items in this context."""
    return _reading_items.get()
