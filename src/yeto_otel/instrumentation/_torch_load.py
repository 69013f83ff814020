"""`TorchLoadInstrumentor`: a `torch.load` span around every torch.load call in the process,
except those a traced DCP load makes for each item it reads (its `dcp.load.read` span
counts them).

    TorchLoadInstrumentor().instrument(tracer_provider=provider)

or `opentelemetry-instrument` (entry point `yeto_torch_load`). A load given an open file
(`with open(path, "rb") as f: torch.load(f)`, as Lightning resumes) is recorded with the
file's path and size too; a buffer (`io.BytesIO`) gets its span without them.

`uninstrument()` puts the original function back, so `torch.load` is again exactly what torch
defined, unless another library wrapped ours since: its wrapper stays in place, and ours inside
it calls straight through from then on. Nothing of ours (attributes, measuring, the span
itself) ever fails a load or changes what it returns or raises.
"""

from __future__ import annotations

import functools
import os
import stat
from typing import Any, Collection

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .. import names
from ..proc import ResidencyProbe
from ..version import __version__
from ._guard import attempt, guarded_span
from ._load_tracing import Switch, load_tracer, reading_checkpoint_items
from ._post_import import when_imported

__all__ = ["TorchLoadInstrumentor"]


TRACER_NAME = "yeto_otel.torch_load"
_STEP = "the torch.load wrapper"


def _named_file(f: Any) -> tuple[str | None, int | None]:
    """(path, size) of an open file object, from its `name` and descriptor. Only looks: the
    file's position is never moved. A buffer, a name that is no file (an `os.fdopen` file is
    named by its descriptor number) or a name that now names another file gives no path."""
    descriptor_stat = None
    fileno = getattr(f, "fileno", None)
    if callable(fileno):
        try:
            descriptor_stat = os.fstat(fileno())
        except (OSError, ValueError):  # io.UnsupportedOperation: a buffer, a closed file
            pass
    name = getattr(f, "name", None)
    path = None
    if isinstance(name, (str, os.PathLike)):
        try:
            name_stat = os.stat(name)
        except (OSError, ValueError):
            name_stat = None
        if name_stat is not None and (descriptor_stat is None or os.path.samestat(
                name_stat, descriptor_stat)):
            path = os.path.abspath(os.fsdecode(name))
            descriptor_stat = descriptor_stat or name_stat
    if descriptor_stat is None or not stat.S_ISREG(descriptor_stat.st_mode):
        return path, None  # a pipe's or a socket's st_size says nothing of what is read
    return path, descriptor_stat.st_size


def _file_attributes(f: Any, mapped: bool) -> tuple[dict[str, Any], str | None]:
    """(span attributes, absolute path or None) for a load of `f`."""
    attributes: dict[str, Any] = {names.TORCH_LOAD_MMAP.name: mapped}
    if isinstance(f, (str, os.PathLike)):
        path, size = os.path.abspath(os.fsdecode(f)), None
        try:
            size = os.stat(path).st_size
        except (OSError, ValueError):
            pass  # torch.load will say what is wrong with the path
    else:
        path, size = _named_file(f)
    if path is not None:
        attributes[names.TORCH_LOAD_PATH.name] = path
    if size is not None:
        attributes[names.TORCH_LOAD_FILE_SIZE.name] = size
    return attributes, path


def _set_mapped_bytes(span, path: str) -> None:
    residency = ResidencyProbe(path).measure()
    if residency is not None:
        span.set_attribute(names.TORCH_LOAD_BYTES_MAPPED.name, residency.bytes_mapped)


class TorchLoadInstrumentor(BaseInstrumentor):
    _original = None
    _wrapper = None
    _switch = None
    _watch = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("torch >= 2.1",)

    def _instrument(self, **kwargs: Any) -> None:
        configured = trace.get_tracer(TRACER_NAME, __version__, kwargs.get("tracer_provider"))
        # torch is patched when the program imports it (or now, if it already has).
        self._watch = when_imported("torch", lambda torch: self._patch(torch, configured),
                                    "TorchLoadInstrumentor (yeto_torch_load)")

    def _patch(self, torch, configured) -> None:
        import torch.serialization

        original = torch.load
        switch = Switch()

        @functools.wraps(original)
        def traced_load(f, *args, **kw):
            # One item of a DCP load (its read span counts it), a caller that suppressed
            # instrumentation (the anchor save's layout lookup), a worker's per-sample load.
            tracer = attempt(f"{_STEP}: choosing the tracer", load_tracer, configured,
                             TRACER_NAME) if switch.on else None
            if tracer is None or reading_checkpoint_items():
                return original(f, *args, **kw)
            mapped = bool(kw.get("mmap"))
            attributes, path = attempt(f"{_STEP}: the file's path and size", _file_attributes,
                                       f, mapped,
                                       default=({names.TORCH_LOAD_MMAP.name: mapped}, None))
            with guarded_span(_STEP, lambda: tracer.start_as_current_span(
                    names.TORCH_LOAD.name, attributes=attributes)) as span:
                result = original(f, *args, **kw)
                if mapped and path is not None:
                    attempt(f"{_STEP}: measuring the mapping", _set_mapped_bytes, span, path)
                return result

        self._original, self._wrapper, self._switch = original, traced_load, switch
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

        self._switch.on = False
        # Only our own wrapper is taken out: one another library put over it stays, and
        # keeps working through ours, which now calls straight through.
        for module in (torch.serialization, torch):
            if module.load is self._wrapper:
                module.load = self._original
        self._original = self._wrapper = self._switch = None
