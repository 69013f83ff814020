"""What one `torch.distributed.checkpoint` load or save did on this rank: its two phases
(child spans) and the growth of its anonymous memory; `LoadPhases` adds what a load read
(items, files, bytes), taken from the storage reader, and `SavePhases` what a save wrote.

The phases are cut at the storage object's I/O call: `read_data(plan, planner)` of the
reader, `write_data(plan, planner)` of the writer. Every reader and writer implements it,
with the same signature throughout torch 2.x, and it is called once per load or save with the
rank's final plan. Everything before it (metadata, local and global planning, the collectives)
is the plan phase; the I/O call until its future completes is the read or write phase.
Planner methods were not used: a planner is optional, custom planners override them freely,
and the default one is created inside the call where nothing can reach it.

Nothing here raises into the load or save: a reading that cannot be taken is named in
`yeto.dcp.residency_error` and logged once per process.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

from opentelemetry.trace import Status, StatusCode

from .. import names
from ..proc import read_anonymous_bytes
from ._load_tracing import OnceLog, checkpoint_items_read

__all__ = ["LoadPhases", "Phases", "SavePhases", "end_span", "log_once"]

_ABSENT = object()


log_once = OnceLog("yeto_otel.dcp", "dcp spans", names.DCP_RESIDENCY_ERROR.name)


def end_span(span, exc: BaseException | None = None) -> None:
    """End `span`, with `exc` recorded and status ERROR when given."""
    if exc is not None:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.end()


class Phases:
    """Created when a traced call starts (`span`: its span, current); `finish()` when it
    returns or raises. Subclasses name the phases and the I/O method, and count what the I/O
    call moves; used as it is (an async_save call), only the rank and the anonymous delta."""

    PLAN = IO = METHOD = ""

    def __init__(self, span, tracer):
        self.span = span
        self._tracer = tracer
        self._errors: list[str] = []
        self._attributes: dict[str, Any] = {}
        self._plan = None
        self._io = None
        self._lock = threading.Lock()
        self._anonymous_before = self._anonymous()
        self._rank()

    def _note(self, kind: str, error: str) -> None:
        self._errors.append(error)
        log_once(kind, error)

    def _anonymous(self) -> int | None:
        try:
            return read_anonymous_bytes()
        except Exception as exc:  # ProcReadError, or anything else: the call goes on
            self._note("anonymous", f"cannot measure anonymous memory: {type(exc).__name__}: {exc}")
            return None

    def _rank(self) -> None:
        try:
            distributed = sys.modules.get("torch.distributed")
            if distributed is not None and distributed.is_available() \
                    and distributed.is_initialized():
                self._attributes[names.DCP_RANK.name] = distributed.get_rank()
        except Exception as exc:
            self._note("rank", f"rank not known: {type(exc).__name__}: {exc}")

    def watch(self, storage: Any) -> Any:
        """Start the plan phase and wrap the I/O method on the storage instance. Returns what
        to pass to `unwatch`."""
        try:
            self._plan = self._tracer.start_span(self.PLAN)
            path = getattr(storage, "path", None)
            if path is not None:
                self._attributes[names.DCP_PATH.name] = str(path)
            own = vars(storage).get(self.METHOD, _ABSENT)  # someone's own per-instance patch
            setattr(storage, self.METHOD, self._traced_io(storage, getattr(storage, self.METHOD)))
            return storage, own
        except Exception as exc:  # a storage object with __slots__, a read-only attribute...
            self._note("watch", f"phases not traced: {type(exc).__name__}: {exc}")
            return None

    def unwatch(self, watched: Any) -> None:
        if watched is None:
            return
        storage, own = watched
        try:
            if own is _ABSENT:
                delattr(storage, self.METHOD)  # the class's own method shows through again
            else:
                setattr(storage, self.METHOD, own)
        except Exception as exc:
            log_once("unwatch", f"storage not restored: {type(exc).__name__}: {exc}")

    def _io_context(self):
        return contextlib.nullcontext()

    def _traced_io(self, storage, original):
        def io(plan, planner, *args, **kw):
            self._start_io(storage, plan)
            try:
                with self._io_context():
                    future = original(plan, planner, *args, **kw)
            except BaseException as exc:
                self._end_io(exc)
                raise
            self._end_io_when_done(future)
            return future

        return io

    def _start_io(self, storage, plan) -> None:
        try:
            self._end_plan()
            self._io = self._tracer.start_span(self.IO)
            self._count(storage, plan)
        except Exception as exc:
            self._note("io", f"{self.IO} not measured: {type(exc).__name__}: {exc}")

    def _count(self, storage, plan) -> None:
        """What the plan moves, set when the I/O call starts."""

    def _collect(self, future) -> BaseException | None:
        """What the completed I/O future says; returns the I/O's own failure, if any."""
        return None

    def _end_plan(self) -> None:
        with self._lock:
            plan, self._plan = self._plan, None
        if plan is not None:
            plan.end()

    def _end_io(self, exc: BaseException | None = None) -> None:
        with self._lock:
            io, self._io = self._io, None
        if io is None:
            return
        try:
            end_span(io, exc)
        except Exception as error:
            log_once("end", f"{self.IO} span not ended: {type(error).__name__}: {error}")

    def _io_done(self, future) -> None:
        failure = None
        try:
            failure = self._collect(future)
        except Exception as exc:
            self._note("collect", f"{self.IO} results not counted: {type(exc).__name__}: {exc}")
        self._end_io(failure)

    def _end_io_when_done(self, future) -> None:
        try:
            if future is not None and hasattr(future, "done") and not future.done():
                future.add_done_callback(self._io_done)
                return
        except Exception as exc:
            log_once("future", f"{self.IO} end taken at return: {type(exc).__name__}: {exc}")
        self._io_done(future)

    def failed(self, exc: BaseException) -> None:
        """Record the call's own exception on its span (the caller still gets it)."""
        try:
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        except Exception as error:
            log_once("failed", f"failure not recorded: {type(error).__name__}: {error}")

    def finish(self) -> None:
        """Set the readings on the span and end any phase still open; never raises."""
        try:
            self._end_plan()
            self._end_io()
            if self._anonymous_before is not None:
                now = self._anonymous()
                if now is not None:
                    self._attributes[names.DCP_ANONYMOUS_DELTA.name] = \
                        now - self._anonymous_before
            if self._errors:
                self._attributes[names.DCP_RESIDENCY_ERROR.name] = "; ".join(self._errors)
            self.span.set_attributes(self._attributes)
        except Exception as exc:
            log_once("finish", f"readings not recorded: {type(exc).__name__}: {exc}")


class LoadPhases(Phases):
    """A load: plan, then the reader's `read_data`; what the rank's plan reads."""

    PLAN = names.DCP_LOAD_PLAN.name
    IO = names.DCP_LOAD_READ.name
    METHOD = "read_data"

    def _io_context(self):
        # FileSystemReader's torch.load per item: counted here, not a span each.
        return checkpoint_items_read()

    def _count(self, reader, plan) -> None:
        items = list(plan.items)
        self._attributes[names.DCP_ITEMS_READ.name] = len(items)
        self._io.set_attribute(names.DCP_ITEMS_READ.name, len(items))
        storage = getattr(reader, "storage_data", None)
        if not isinstance(storage, dict):
            self._note("storage_data", f"{type(reader).__name__} exposes no storage_data: "
                                       "files and bytes read not known")
            return
        files, total = set(), 0
        for item in items:
            info = storage[item.storage_index]
            files.add(info.relative_path)
            total += info.length
        self._attributes[names.DCP_FILES_READ.name] = len(files)
        self._attributes[names.DCP_BYTES_READ.name] = total


class SavePhases(Phases):
    """A save: plan, then the writer's `write_data`; what the rank wrote, from the write
    results (`WriteResult.size_in_bytes`, and the file each `storage_data` names)."""

    PLAN = names.DCP_SAVE_PLAN.name
    IO = names.DCP_SAVE_WRITE.name
    METHOD = "write_data"

    def _count(self, writer, plan) -> None:
        items = len(plan.items)
        self._attributes[names.DCP_ITEMS_WRITTEN.name] = items
        self._io.set_attribute(names.DCP_ITEMS_WRITTEN.name, items)

    def _collect(self, future) -> BaseException | None:
        if future is None:
            self._note("results", "write_data returned no future: bytes written not known")
            return None
        try:
            results = future.value() if hasattr(future, "value") else future.result()
        except BaseException as exc:  # the write's own failure: the save raises it too
            return exc
        files, total = set(), 0
        for result in results:
            total += result.size_in_bytes
            path = getattr(result.storage_data, "relative_path", None)
            if path is not None:
                files.add(path)
        counts = {names.DCP_BYTES_WRITTEN.name: total}
        if files:
            counts[names.DCP_FILES_WRITTEN.name] = len(files)
        elif results:
            self._note("files", "the write results name no files: files written not known")
        self._attributes.update(counts)
        if self._io is not None:
            self._io.set_attributes(counts)
        return None
