"""`SafetensorsInstrumentor`: a span around every safetensors load in the process, with what it
mapped, touched and copied.

    SafetensorsInstrumentor().instrument(tracer_provider=provider)

or `opentelemetry-instrument` (entry point `yeto_safetensors`). Three calls are traced:
`safetensors.torch.load_file` (span `safetensors.load_file`), `safetensors.torch.load` on
bytes (`safetensors.load`: no file, so only the copies show) and `safetensors.safe_open`
(`safetensors.safe_open`, from the open to the close; see `TracedSafeOpen`). safetensors is
never imported here: each module is patched when the program imports it.

An error of the load itself reaches the caller unchanged and is recorded on the span; an
error in measuring or tracing is not the caller's (see `LoadResidency`, `_guard`).
`uninstrument()` puts the original functions back where ours still are (a wrapper another
library put over ours stays), and a wrapper someone still holds (`from safetensors import
safe_open` while instrumented) just calls the original from then on. While instrumented,
`safetensors.safe_open` is a function, not the handle's type, so `isinstance(x, safe_open)`
raises TypeError (calling it, the only documented use, works as before).
"""

from __future__ import annotations

import contextvars
import functools
from typing import Any, Callable, Collection

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.trace import Status, StatusCode

from .. import names
from ..version import __version__
from ._guard import attempt, guarded_span, log_failure
from ._load_residency import LoadResidency, file_attributes, log_once
from ._load_tracing import load_tracer, replace_attribute
from ._post_import import when_imported
from ._safe_open_handle import TracedSafeOpen

__all__ = ["SafetensorsInstrumentor"]

TRACER_NAME = "yeto_otel.safetensors"
_OWNER = "SafetensorsInstrumentor (yeto_safetensors)"
_STEP = "the safetensors wrapper"
_DEFAULT_BACKEND = "mmap"  # the only backend before safetensors 0.8, the default since

# Set while a traced load_file runs: the safe_open it makes inside is part of its span.
_inside_load = contextvars.ContextVar("yeto_safetensors_inside_load", default=False)


def _count(result: Any) -> int | None:
    try:
        return len(result)
    except Exception:  # no len(), or one that raises: the result is the caller's as it is
        return None


class SafetensorsInstrumentor(BaseInstrumentor):
    _watches: list = []
    _patched: list = []  # (module, attribute, original, wrapper)
    _active = False

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("safetensors >= 0.4",)

    def _instrument(self, **kwargs: Any) -> None:
        configured = trace.get_tracer(TRACER_NAME, __version__, kwargs.get("tracer_provider"))
        self._configured = configured
        self._patched = []
        self._active = True
        # safetensors first (the package), then safetensors.torch, whose import of
        # `safe_open` then picks up the wrapper.
        self._watches = [when_imported("safetensors", self._patch_open, _OWNER),
                         when_imported("safetensors.torch", self._patch_torch, _OWNER)]

    def _tracer(self):
        """The tracer for a load starting now; None: call straight through (uninstrumented,
        suppressed, a worker's load, or choosing it failed)."""
        if not self._active:
            return None
        return attempt(f"{_STEP}: choosing the tracer", load_tracer, self._configured,
                       TRACER_NAME)

    def _replace(self, module, attribute: str, make: Callable[[Callable], Callable]) -> None:
        replace_attribute(self._patched, module, attribute, make, "__yeto_safetensors__")

    def _patch_open(self, safetensors) -> None:
        self._replace(safetensors, "safe_open", self._traced_safe_open)

    def _patch_torch(self, safetensors_torch) -> None:
        # Its `from safetensors import safe_open` took the wrapper: put it back on uninstrument.
        for module, attribute, original, wrapper in list(self._patched):
            if attribute == "safe_open" and safetensors_torch.__dict__.get(attribute) is wrapper:
                self._patched.append((safetensors_torch, attribute, original, wrapper))
        self._replace(safetensors_torch, "load_file", self._traced_load_file)
        self._replace(safetensors_torch, "load", self._traced_load)

    def _traced_load_file(self, original):
        @functools.wraps(original, updated=())
        def load_file(filename, *args, **kw):
            tracer = self._tracer()
            if tracer is None:
                return original(filename, *args, **kw)
            attributes, path = file_attributes(
                filename, kw.get("device", args[0] if args else "cpu"),
                kw.get("backend", _DEFAULT_BACKEND))
            with guarded_span(_STEP, lambda: tracer.start_as_current_span(
                    names.SAFETENSORS_LOAD_FILE.name, attributes=attributes)) as span:
                residency = LoadResidency(path)
                token = _inside_load.set(True)
                try:
                    result = original(filename, *args, **kw)
                finally:
                    _inside_load.reset(token)
                residency.finish(span, **_tensor_count(result))
                return result

        return load_file

    def _traced_load(self, original):
        @functools.wraps(original, updated=())
        def load(data, *args, **kw):
            tracer = self._tracer()
            if tracer is None:
                return original(data, *args, **kw)
            with guarded_span(_STEP, lambda: tracer.start_as_current_span(
                    names.SAFETENSORS_LOAD.name, attributes=_data_size(data))) as span:
                residency = LoadResidency(None)
                result = original(data, *args, **kw)
                residency.finish(span, **_tensor_count(result))
                return result

        return load

    def _traced_safe_open(self, original):
        @functools.wraps(original, updated=())
        def safe_open(filename, *args, **kw):
            tracer = None if _inside_load.get() else self._tracer()
            if tracer is None:
                return original(filename, *args, **kw)
            attributes, path = file_attributes(
                filename, kw.get("device", args[1] if len(args) > 1 else "cpu"),
                kw.get("backend", _DEFAULT_BACKEND))
            span = attempt(f"{_STEP}: starting the span", tracer.start_span,
                           names.SAFETENSORS_SAFE_OPEN.name, attributes=attributes)
            if span is None:
                return original(filename, *args, **kw)
            residency = LoadResidency(path)
            try:
                handle = original(filename, *args, **kw)
            except BaseException as exc:
                _end_failed(span, exc)
                raise
            _set_header_count(span, handle)
            return _traced_handle(handle, span, residency)

        return safe_open

    def _uninstrument(self, **kwargs: Any) -> None:
        self._active = False  # wrappers still held elsewhere now call straight through
        for watch in self._watches:
            if watch is not None:
                watch.cancel()
        self._watches = []
        for module, attribute, original, wrapper in reversed(self._patched):
            if getattr(module, attribute, None) is wrapper:
                setattr(module, attribute, original)
        self._patched = []


def _tensor_count(result: Any) -> dict[str, int]:
    count = _count(result)
    return {} if count is None else {names.SAFETENSORS_TENSOR_COUNT.name: count}


def _data_size(data: Any) -> dict[str, int]:
    try:
        return {names.SAFETENSORS_DATA_SIZE.name: len(data)}
    except Exception:  # no len(), or one that raises: safetensors will say what is wrong
        return {}


def _traced_handle(handle, span, residency: LoadResidency):
    """The handle with its span, or the handle itself (its span ended now) if it cannot be."""
    try:
        return TracedSafeOpen(handle, span, residency)
    except Exception as exc:
        log_failure(f"{_STEP}: following the safe_open handle", exc)
        attempt(f"{_STEP}: ending the span", span.end)
        return handle


def _set_header_count(span, handle) -> None:
    try:
        span.set_attribute(names.SAFETENSORS_TENSOR_COUNT.name, len(handle.keys()))
    except Exception as exc:  # the handle is the caller's: never fail the open
        log_once("keys", f"tensor count not recorded: {type(exc).__name__}: {exc}")


def _end_failed(span, exc: BaseException) -> None:
    try:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()
    except Exception as error:  # the open's own exception goes on unchanged
        log_once("open", f"failed open not recorded: {type(error).__name__}: {error}")
