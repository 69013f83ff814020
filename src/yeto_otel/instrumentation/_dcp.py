"""`DcpInstrumentor`: a span around every `torch.distributed.checkpoint` load, save and
async_save in the process, one per rank per call, with what the rank read or wrote and the
growth of its anonymous memory, and the plan and read (or write) phases as child spans (see
`LoadPhases`, `SavePhases`; after an async_save, `AsyncUpload`).

    DcpInstrumentor().instrument(tracer_provider=provider)

or `opentelemetry-instrument` (entry point `yeto_dcp`). torch.distributed is never imported
here: `torch.distributed.checkpoint` is patched when the program imports it. The public
functions are wrapped under both their names (`dcp.load` and `dcp.state_dict_loader.load`,
and so on); the phases come from `state_dict_loader._load_state_dict` and
`state_dict_saver._save_state_dict`, the steps the public functions hand the storage reader
or writer to. Should a torch release drop such a private step, the spans and their anonymous
delta remain and only the phases and counts go.

The call's own exception reaches the caller unchanged and is recorded on the span; an error
in measuring or tracing is never the caller's. `uninstrument()` puts the original functions
back where ours still are (a wrapper another library put over ours stays), and a wrapper
someone still holds calls straight through from then on.
"""

from __future__ import annotations

import contextvars
import functools
import sys
from typing import Any, Callable, Collection

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.instrumentation.utils import (is_instrumentation_enabled,
                                                 suppress_instrumentation)

from .. import names
from ..version import __version__
from ._dcp_async import SUPPRESSED, AsyncUpload, handoff, save_key
from ._dcp_phases import LoadPhases, Phases, SavePhases, log_once
from ._guard import attempt, guarded_span
from ._load_tracing import load_tracer, replace_attribute
from ._post_import import when_imported

__all__ = ["DcpInstrumentor"]

TRACER_NAME = "yeto_otel.dcp"
_MODULE = "torch.distributed.checkpoint"
_MARK = "__yeto_dcp__"
_STEP = "the torch.distributed.checkpoint wrapper"

# The phases of the traced load (or save) running in this context, None outside one: a
# nested call (a custom reader that loads) is part of the outer span and gets none of its own.
_loading: contextvars.ContextVar[Phases | None] = contextvars.ContextVar(
    "yeto_dcp_load", default=None)
_saving: contextvars.ContextVar[Phases | None] = contextvars.ContextVar(
    "yeto_dcp_save", default=None)


class DcpInstrumentor(BaseInstrumentor):
    _watch = None
    _patched: list = []  # (module, attribute, original, wrapper)
    _active = False

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("torch >= 2.2",)

    def _instrument(self, **kwargs: Any) -> None:
        self._configured = trace.get_tracer(TRACER_NAME, __version__,
                                            kwargs.get("tracer_provider"))
        self._patched = []
        self._active = True
        self._watch = when_imported(_MODULE, self._patch, "DcpInstrumentor (yeto_dcp)")

    def _tracer(self):
        """The tracer for a call starting now; None: call straight through (uninstrumented,
        suppressed, a worker's load, or choosing it failed)."""
        if not self._active:
            return None
        return attempt(f"{_STEP}: choosing the tracer", load_tracer, self._configured,
                       TRACER_NAME)

    def _replace(self, module, attribute: str, make: Callable[[Callable], Callable]) -> None:
        replace_attribute(self._patched, module, attribute, make, _MARK)

    def _replace_public(self, dcp, module, attribute: str, make) -> None:
        """Wrap `module.attribute`, and the package's name for it when that is the same."""
        original = getattr(module, attribute, None)
        self._replace(module, attribute, make)
        if original is not None and getattr(dcp, attribute, None) is original:
            wrapper = getattr(module, attribute)
            setattr(dcp, attribute, wrapper)
            self._patched.append((dcp, attribute, original, wrapper))

    def _patch(self, dcp) -> None:
        loader = sys.modules.get(f"{_MODULE}.state_dict_loader")
        if loader is None:
            log_once("module", f"{_MODULE}.state_dict_loader not found: loads not traced")
        else:
            self._replace_public(dcp, loader, "load", lambda original: self._traced_call(
                original, names.DCP_LOAD.name, _loading, LoadPhases))
            self._replace(loader, "_load_state_dict", lambda original: self._traced_step(
                original, _loading, "storage_reader"))
        saver = sys.modules.get(f"{_MODULE}.state_dict_saver")
        if saver is None:
            log_once("saver", f"{_MODULE}.state_dict_saver not found: saves not traced")
            return
        self._replace_public(dcp, saver, "save", lambda original: self._traced_call(
            original, names.DCP_SAVE.name, _saving, SavePhases, handoff.take))
        self._replace_public(dcp, saver, "async_save", self._traced_async_save)
        self._replace(saver, "_save_state_dict", lambda original: self._traced_step(
            original, _saving, "storage_writer"))

    def _traced_call(self, original, name: str, current: contextvars.ContextVar,
                     make_phases, parent_for=None):
        @functools.wraps(original)
        def call(*args, **kw):
            tracer = None if current.get() is not None else self._tracer()
            if tracer is None:
                return original(*args, **kw)
            parent = _parent(parent_for, kw)
            if parent is SUPPRESSED:  # the background save of an async_save made so
                with suppress_instrumentation():
                    return original(*args, **kw)
            # The failure is recorded here, not by the `with`: DCP's CheckpointException is a
            # BaseException, which the SDK's current-span block lets pass unrecorded.
            with guarded_span(_STEP, lambda: tracer.start_as_current_span(
                    name, context=parent, attributes=_checkpoint_id(kw),
                    record_exception=False, set_status_on_exception=False)) as span:
                phases = attempt(f"{_STEP}: measuring", make_phases, span, tracer)
                if phases is None:
                    return original(*args, **kw)
                token = current.set(phases)
                try:
                    return original(*args, **kw)
                except BaseException as exc:
                    phases.failed(exc)
                    raise
                finally:
                    current.reset(token)
                    phases.finish()

        return call

    def _traced_step(self, original, current: contextvars.ContextVar, keyword: str):
        @functools.wraps(original)
        def step(*args, **kw):
            phases = current.get()
            if not self._active or phases is None:
                return original(*args, **kw)
            storage = kw.get(keyword, args[1] if len(args) > 1 else None)
            watched = phases.watch(storage) if storage is not None else None
            try:
                return original(*args, **kw)
            finally:
                phases.unwatch(watched)

        return step

    def _traced_async_save(self, original):
        @functools.wraps(original)
        def async_save(*args, **kw):
            if _saving.get() is not None:
                return original(*args, **kw)
            tracer = self._tracer()
            if tracer is None:
                if self._active and not is_instrumentation_enabled():
                    return _suppressed_async_save(original, args, kw)
                return original(*args, **kw)
            with guarded_span(_STEP, lambda: tracer.start_as_current_span(
                    names.DCP_ASYNC_SAVE.name, attributes=_checkpoint_id(kw),
                    record_exception=False, set_status_on_exception=False)) as span:
                # The staging copy's anonymous memory and the rank, and the upload's own span.
                traced = attempt(f"{_STEP}: measuring", _async_parts, span, tracer, kw)
                if traced is None:
                    return original(*args, **kw)
                phases, upload = traced
                try:
                    returned = original(*args, **kw)
                except BaseException as exc:
                    phases.failed(exc)
                    upload.end(exc)
                    raise
                finally:
                    phases.finish()
                upload.follow(returned)
                return returned

        return async_save

    def _uninstrument(self, **kwargs: Any) -> None:
        self._active = False  # wrappers still held elsewhere now call straight through
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for module, attribute, original, wrapper in reversed(self._patched):
            if getattr(module, attribute, None) is wrapper:
                setattr(module, attribute, original)
        self._patched = []


def _suppressed_async_save(original, args, kw: dict):
    """An async_save its caller made under suppress_instrumentation(): its background save
    runs on a thread that does not inherit that, so it is told through the hand-off."""
    upload = attempt(f"{_STEP}: passing the suppression on", AsyncUpload, None, kw)
    try:
        returned = original(*args, **kw)
    except BaseException:
        if upload is not None:
            upload.end()
        raise
    if upload is not None:
        upload.follow(returned)
    return returned


def _async_parts(span, tracer, kw: dict) -> tuple[Phases, AsyncUpload]:
    return Phases(span, tracer), AsyncUpload(tracer, kw)


def _parent(parent_for, kw: dict):
    """The context a save DCP runs for an async_save continues (None: the current one)."""
    if parent_for is None:
        return None
    try:
        return parent_for(save_key(kw), kw.get("storage_writer"))
    except Exception as exc:
        log_once("handoff", f"async save not linked: {type(exc).__name__}: {exc}")
        return None


def _checkpoint_id(kw: dict) -> dict[str, str]:
    """The path attribute from the writer's path or `checkpoint_id`, until the storage object
    says better; never raises."""
    try:
        path = getattr(kw.get("storage_writer"), "path", None) or kw.get("checkpoint_id")
        return {} if path is None else {names.DCP_PATH.name: str(path)}
    except Exception:
        return {}
