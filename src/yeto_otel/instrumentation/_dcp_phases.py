"""What one `torch.distributed.checkpoint` load did on this rank: its plan and read phases
(child spans) and what it read (items, files, bytes), taken from the storage reader.

The phases are cut at the storage reader's `read_data(plan, planner)`: a `StorageReader`
method every reader implements, with the same signature throughout torch 2.x, called once
per load with the rank's final plan. Everything before it (metadata, local and global
planning, the collectives) is the plan phase; `read_data` until its future completes is the
read phase. Planner methods were not used: a planner is optional, custom planners override
them freely, and the default one is created inside the load where nothing can reach it.

Nothing here raises into the load: a reading that cannot be taken is named in
`yeto.dcp.residency_error` and logged once per process.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from opentelemetry.trace import Status, StatusCode

from .. import names
from ..proc import read_anonymous_bytes
from ._load_tracing import OnceLog

__all__ = ["LoadPhases", "log_once"]

_ABSENT = object()


log_once = OnceLog("yeto_otel.dcp", "dcp spans", names.DCP_RESIDENCY_ERROR.name)


def _end(span, exc: BaseException | None = None) -> None:
    if exc is not None:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.end()


class LoadPhases:
    """Created when a traced load starts (current span: its `dcp.load` span); `finish()` when
    it returns or raises."""

    def __init__(self, span, tracer):
        self.span = span
        self._tracer = tracer
        self._errors: list[str] = []
        self._attributes: dict[str, Any] = {}
        self._plan = None
        self._read = None
        self._lock = threading.Lock()
        self._anonymous_before = self._anonymous()

    def _note(self, kind: str, error: str) -> None:
        self._errors.append(error)
        log_once(kind, error)

    def _anonymous(self) -> int | None:
        try:
            return read_anonymous_bytes()
        except Exception as exc:  # ProcReadError, or anything else: the load goes on
            self._note("anonymous", f"cannot measure anonymous memory: {type(exc).__name__}: {exc}")
            return None

    def watch(self, reader: Any) -> Any:
        """Start the plan phase and wrap `reader.read_data` on the instance. Returns what to
        pass to `unwatch`."""
        try:
            self._plan = self._tracer.start_span(names.DCP_LOAD_PLAN.name)
            self._describe(reader)
            own = vars(reader).get("read_data", _ABSENT)  # someone's own per-instance patch
            reader.read_data = self._traced_read_data(reader, reader.read_data)
            return reader, own
        except Exception as exc:  # a reader with __slots__, a read-only attribute...
            self._note("watch", f"phases not traced: {type(exc).__name__}: {exc}")
            return None

    @staticmethod
    def unwatch(watched: Any) -> None:
        if watched is None:
            return
        reader, own = watched
        try:
            if own is _ABSENT:
                del reader.read_data  # the class's own method shows through again
            else:
                reader.read_data = own
        except Exception as exc:
            log_once("unwatch", f"reader not restored: {type(exc).__name__}: {exc}")

    def _describe(self, reader: Any) -> None:
        path = getattr(reader, "path", None)
        if path is not None:
            self._attributes[names.DCP_PATH.name] = str(path)
        distributed = sys.modules.get("torch.distributed")
        if distributed is not None and distributed.is_available() and distributed.is_initialized():
            self._attributes[names.DCP_RANK.name] = distributed.get_rank()

    def _traced_read_data(self, reader, original):
        def read_data(plan, planner, *args, **kw):
            self._start_read(reader, plan)
            try:
                future = original(plan, planner, *args, **kw)
            except BaseException as exc:
                self._end_read(exc)
                raise
            self._end_read_when_done(future)
            return future

        return read_data

    def _start_read(self, reader, plan) -> None:
        try:
            self._end_plan()
            self._read = self._tracer.start_span(names.DCP_LOAD_READ.name)
            self._count(reader, plan)
        except Exception as exc:
            self._note("read", f"read not measured: {type(exc).__name__}: {exc}")

    def _count(self, reader, plan) -> None:
        items = list(plan.items)
        self._attributes[names.DCP_ITEMS_READ.name] = len(items)
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

    def _end_plan(self) -> None:
        with self._lock:
            plan, self._plan = self._plan, None
        if plan is not None:
            plan.end()

    def _end_read(self, exc: BaseException | None = None) -> None:
        with self._lock:
            read, self._read = self._read, None
        if read is None:
            return
        try:
            _end(read, exc)
        except Exception as error:
            log_once("end", f"read span not ended: {type(error).__name__}: {error}")

    def _end_read_when_done(self, future) -> None:
        try:
            if future is not None and hasattr(future, "done") and not future.done():
                future.add_done_callback(lambda _: self._end_read())
                return
        except Exception as exc:
            log_once("future", f"read end taken at return: {type(exc).__name__}: {exc}")
        self._end_read()

    def failed(self, exc: BaseException) -> None:
        """Record the load's own exception on its span (the caller still gets it)."""
        try:
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        except Exception as error:
            log_once("failed", f"failure not recorded: {type(error).__name__}: {error}")

    def finish(self) -> None:
        """Set the readings on the load span and end any phase still open; never raises."""
        try:
            self._end_plan()
            self._end_read()
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
