"""What follows a `torch.distributed.checkpoint.async_save` call after it returns.

The call stages the state dict (a copy, in CPU memory by default) and hands a `save` to a
background executor; it returns a future (or an `AsyncSaveResponse` whose
`upload_completion` is one). `AsyncUpload` is the `dcp.async_save.upload` span, a child of
the call's span, started with the call and ended by the future's done callback: nothing
waits for it, and the caller is never blocked. A future that never completes leaves the span
unended, so it is never exported; nothing else is held but the callback the future keeps.

The background `save` runs in a thread that does not inherit the caller's context; its own
`dcp.save` span finds its parent, the upload span, through `handoff`, keyed by the storage
writer the save is given (or its `checkpoint_id`). A save the thread-based executor runs
takes it; any other save (the caller's own, on the caller's thread) never does. An
async_save made under `suppress_instrumentation()` offers its background save the same
suppression, which that thread would not otherwise know of.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from opentelemetry import trace

from .. import names
from ._dcp_phases import end_span, log_once

__all__ = ["SUPPRESSED", "AsyncUpload", "handoff", "save_key"]

# Offered in place of a parent context: the async_save's caller suppressed instrumentation.
SUPPRESSED = object()


def save_key(kw: dict) -> tuple | None:
    """What identifies one save across the hand-off: its writer, else its path; never raises."""
    try:
        writer = kw.get("storage_writer")
        if writer is not None:
            return ("writer", id(writer))
        checkpoint_id = kw.get("checkpoint_id")
        return None if checkpoint_id is None else ("path", os.fsdecode(checkpoint_id))
    except Exception:
        return None


class _Handoff:
    """Parent contexts offered by async_save calls, each taken by the first save for the same
    key on another thread, or withdrawn when the upload ends."""

    def __init__(self):
        self._lock = threading.Lock()
        self._waiting: dict[tuple, tuple[Any, int, Any]] = {}

    def offer(self, key: tuple, context, writer=None) -> None:
        # The writer is held weakly and checked on take: a key made from id(writer) could
        # otherwise match a new writer that reuses a freed one's id.
        ref = _weak(writer)
        with self._lock:
            self._waiting[key] = (context, threading.get_ident(), ref)

    def take(self, key: tuple | None, writer=None):
        if key is None:
            return None
        with self._lock:
            entry = self._waiting.get(key)
            if entry is None or entry[1] == threading.get_ident():
                return None
            if entry[2] is not None and entry[2]() is not writer:
                return None  # another writer now has that id
            del self._waiting[key]
            return entry[0]

    def withdraw(self, key: tuple, context) -> None:
        with self._lock:
            entry = self._waiting.get(key)
            if entry is not None and entry[0] is context:
                del self._waiting[key]


handoff = _Handoff()


def _weak(writer):
    if writer is None:
        return None
    try:
        return weakref.ref(writer)
    except TypeError:  # a writer type without weak references: matched by id alone
        return None


class AsyncUpload:
    """Created inside the `dcp.async_save` span (the current one) before the call goes on.
    With no tracer (the caller suppressed instrumentation), no span: the background save is
    offered `SUPPRESSED` instead, since its thread does not inherit the caller's suppression."""

    def __init__(self, tracer, kw: dict):
        self._lock = threading.Lock()
        self._span = None
        self._open = True
        self._key = save_key(kw)
        self._context = SUPPRESSED if tracer is None else None
        try:
            if tracer is not None:
                self._span = tracer.start_span(names.DCP_ASYNC_SAVE_UPLOAD.name)
                self._context = trace.set_span_in_context(self._span)
            if self._key is not None:
                handoff.offer(self._key, self._context, kw.get("storage_writer"))
        except Exception as exc:
            log_once("upload", f"upload not traced: {type(exc).__name__}: {exc}")

    def follow(self, returned: Any) -> None:
        """End the upload span when what async_save returned completes."""
        try:
            future = getattr(returned, "upload_completion", returned)
            future.add_done_callback(self._done)
        except Exception as exc:  # not a future: the upload's end is taken now
            log_once("upload future", f"upload end taken at return: {type(exc).__name__}: {exc}")
            self.end()

    def _done(self, future) -> None:
        # Runs on the thread that completes the future: never raises into it.
        try:
            error = future.exception() if hasattr(future, "exception") else None
        except BaseException as exc:  # CancelledError
            error = exc
        self.end(error)

    def end(self, exc: BaseException | None = None) -> None:
        with self._lock:
            if not self._open:
                return
            span, self._span, self._open = self._span, None, False
        try:
            if self._key is not None:
                handoff.withdraw(self._key, self._context)
            if span is not None:
                end_span(span, exc)
        except Exception as error:
            log_once("upload end", f"upload span not ended: {type(error).__name__}: {error}")
