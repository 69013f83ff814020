"""`TorchLoadInstrumentor`: a `torch.load` span around every torch.load call in the process,
except those a traced DCP load makes for each item it reads (its `dcp.load.read` span
counts them).

    TorchLoadInstrumentor().instrument(tracer_provider=provider)

or `opentelemetry-instrument` (entry point `yeto_torch_load`). `uninstrument()` puts the
original function back, so `torch.load` is again exactly what torch defined.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Collection

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .. import names
from ..proc import ResidencyProbe
from ..version import __version__
from ._load_tracing import load_tracer, reading_checkpoint_items
from ._post_import import when_imported

__all__ = ["TorchLoadInstrumentor"]


TRACER_NAME = "yeto_otel.torch_load"


def _path_of(f: Any) -> str | None:
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    return None


class TorchLoadInstrumentor(BaseInstrumentor):
    _original = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("torch >= 2.1",)

    _watch = None

    def _instrument(self, **kwargs: Any) -> None:
        configured = trace.get_tracer(TRACER_NAME, __version__, kwargs.get("tracer_provider"))
        # torch is patched when the program imports it (or now, if it already has).
        self._watch = when_imported("torch", lambda torch: self._patch(torch, configured))

    def _patch(self, torch, configured) -> None:
        import torch.serialization

        original = torch.load
        self._original = original

        @functools.wraps(original)
        def traced_load(f, *args, **kw):
            # One item of a DCP load (its read span counts it), a caller that suppressed
            # instrumentation (the anchor save's layout lookup), a worker's per-sample load.
            tracer = load_tracer(configured, TRACER_NAME)
            if tracer is None or reading_checkpoint_items():
                return original(f, *args, **kw)
            path = _path_of(f)
            mapped = bool(kw.get("mmap"))
            attributes: dict[str, Any] = {names.TORCH_LOAD_MMAP.name: mapped}
            if path is not None:
                attributes[names.TORCH_LOAD_PATH.name] = os.path.abspath(path)
                try:
                    attributes[names.TORCH_LOAD_FILE_SIZE.name] = os.stat(path).st_size
                except OSError:
                    pass  # torch.load will say what is wrong with the path
            with tracer.start_as_current_span(names.TORCH_LOAD.name, attributes=attributes) as span:
                result = original(f, *args, **kw)
                if mapped and path is not None:
                    residency = ResidencyProbe(path).measure()
                    if residency is not None:
                        span.set_attribute(names.TORCH_LOAD_BYTES_MAPPED.name,
                                           residency.bytes_mapped)
                return result

        torch.load = traced_load
        if torch.serialization.load is original:
            torch.serialization.load = traced_load

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._original is None:
            return
        import torch
        import torch.serialization

        if torch.serialization.load is torch.load:
            torch.serialization.load = self._original
        torch.load = self._original
        self._original = None
