"""`TracedSafeOpen`: a `safetensors.safe_open` handle that carries its span from the open to
the close.

safe_open is a Rust type whose methods cannot be patched, so the instrumented `safe_open`
returns this stand-in: it counts the tensors read through it and hands every call to the real
handle. The span ends, with the file's mapping measured while the handle still holds it, when
the `with` block exits, or, for a handle used without `with`, when it is garbage-collected.
"""

from __future__ import annotations

import threading
import weakref

from opentelemetry.trace import Status, StatusCode

from .. import names
from ._load_residency import LoadResidency, log_once

__all__ = ["TracedSafeOpen"]


class _Reads:
    """Tensors read through one handle (get_tensor/get_slice may run on several threads)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


def _end_span(span, residency: LoadResidency, reads: _Reads) -> None:
    try:
        residency.finish(span, **{names.SAFETENSORS_TENSORS_READ.name: reads.count})
        span.end()
    except Exception as exc:  # from a finalizer too: never into the caller or the GC
        log_once("end", f"safe_open span not ended: {type(exc).__name__}: {exc}")


class TracedSafeOpen:
    """Behaves as the safe_open handle it wraps; `__getattr__` passes on what it does not
    count (keys, metadata, offset_keys and whatever later safetensors versions add)."""

    def __init__(self, handle, span, residency: LoadResidency):
        self._handle = handle
        self._span = span
        self._reads = _Reads()
        self._end = weakref.finalize(self, _end_span, span, residency, self._reads)

    def __enter__(self):
        self._handle.__enter__()
        return self

    def __exit__(self, exc_type, exc, traceback):
        if exc is not None:
            try:
                self._span.record_exception(exc)
                self._span.set_status(Status(StatusCode.ERROR, f"{exc_type.__name__}: {exc}"))
            except Exception as error:  # the block's own exception goes on unchanged
                log_once("exit", f"exception not recorded: {type(error).__name__}: {error}")
        self._end()  # measured before the handle lets go of its mapping
        return self._handle.__exit__(exc_type, exc, traceback)

    def get_tensor(self, name):
        tensor = self._handle.get_tensor(name)
        self._reads.add(1)
        return tensor

    def get_slice(self, name):
        tensor_slice = self._handle.get_slice(name)
        self._reads.add(1)
        return tensor_slice

    def get_tensors(self, *args, **kwargs):
        tensors = self._handle.get_tensors(*args, **kwargs)
        try:
            self._reads.add(len(tensors))
        except TypeError:
            pass
        return tensors

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __repr__(self) -> str:
        return repr(self._handle)
