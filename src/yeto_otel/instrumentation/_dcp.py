"""`DcpInstrumentor`: a `dcp.load` span around every `torch.distributed.checkpoint.load` in
the process, one per rank per load, with what the rank read and the growth of its anonymous
memory, and the plan and read phases as child spans (see `LoadPhases`).

    DcpInstrumentor().instrument(tracer_provider=provider)

or `opentelemetry-instrument` (entry point `yeto_dcp`). torch.distributed is never imported
here: `torch.distributed.checkpoint` is patched when the program imports it. The public
`load` is wrapped under both its names (`dcp.load` and `dcp.state_dict_loader.load`); the
phases come from `state_dict_loader._load_state_dict`, the step `load` hands the storage
reader to. Should a torch release drop that private step, the `dcp.load` span and its
anonymous delta remain and only the phases and read counts go.

The load's own exception reaches the caller unchanged and is recorded on the span; an error
in measuring is never the caller's. `uninstrument()` puts the original functions back, and a
wrapper someone still holds calls straight through from then on.
"""

from __future__ import annotations

import contextvars
import functools
import sys
from typing import Any, Callable, Collection

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .. import names
from ..version import __version__
from ._dcp_phases import LoadPhases, log_once
from ._load_tracing import replace_attribute, tracer_here
from ._post_import import when_imported

__all__ = ["DcpInstrumentor"]

TRACER_NAME = "yeto_otel.dcp"
_MODULE = "torch.distributed.checkpoint"
_MARK = "__yeto_dcp__"

# The phases of the traced load running in this context (None outside one): a nested load
# (a custom reader that loads) is part of the outer span and gets none of its own.
_current: contextvars.ContextVar[LoadPhases | None] = contextvars.ContextVar(
    "yeto_dcp_load", default=None)


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
        self._watch = when_imported(_MODULE, self._patch)

    def _tracer(self):
        return tracer_here(self._configured, TRACER_NAME)

    def _replace(self, module, attribute: str, make: Callable[[Callable], Callable]) -> None:
        replace_attribute(self._patched, module, attribute, make, _MARK)

    def _patch(self, dcp) -> None:
        loader = sys.modules.get(f"{_MODULE}.state_dict_loader")
        if loader is None:
            log_once("module", f"{_MODULE}.state_dict_loader not found: loads not traced")
            return
        original = getattr(loader, "load", None)
        self._replace(loader, "load", self._traced_load)
        if original is not None and getattr(dcp, "load", None) is original:
            wrapper = loader.load
            dcp.load = wrapper
            self._patched.append((dcp, "load", original, wrapper))
        self._replace(loader, "_load_state_dict", self._traced_step)

    def _traced_load(self, original):
        @functools.wraps(original)
        def load(*args, **kw):
            if not self._active or _current.get() is not None:
                return original(*args, **kw)
            attributes = _checkpoint_id(kw)
            # The failure is recorded here, not by the `with`: DCP's CheckpointException is a
            # BaseException, which the SDK's current-span block lets pass unrecorded.
            with self._tracer().start_as_current_span(
                    names.DCP_LOAD.name, attributes=attributes, record_exception=False,
                    set_status_on_exception=False) as span:
                phases = LoadPhases(span, self._tracer())
                token = _current.set(phases)
                try:
                    return original(*args, **kw)
                except BaseException as exc:
                    phases.failed(exc)
                    raise
                finally:
                    _current.reset(token)
                    phases.finish()

        return load

    def _traced_step(self, original):
        @functools.wraps(original)
        def _load_state_dict(*args, **kw):
            phases = _current.get()
            if not self._active or phases is None:
                return original(*args, **kw)
            reader = kw.get("storage_reader", args[1] if len(args) > 1 else None)
            watched = phases.watch(reader) if reader is not None else None
            try:
                return original(*args, **kw)
            finally:
                phases.unwatch(watched)

        return _load_state_dict

    def _uninstrument(self, **kwargs: Any) -> None:
        self._active = False  # wrappers still held elsewhere now call straight through
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for module, attribute, original, wrapper in reversed(self._patched):
            if getattr(module, attribute, None) is wrapper:
                setattr(module, attribute, original)
        self._patched = []


def _checkpoint_id(kw: dict) -> dict[str, str]:
    """The path attribute from `checkpoint_id`, until the reader says better; never raises."""
    try:
        checkpoint_id = kw.get("checkpoint_id")
        return {} if checkpoint_id is None else {names.DCP_PATH.name: str(checkpoint_id)}
    except Exception:
        return {}
