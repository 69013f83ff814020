"""`DataLoaderWorkerInstrumentor`: each DataLoader worker reports as `<rank id>/worker-<K>`.

A worker is a child of its rank (forked, spawned or from the forkserver) and so never reports
under the rank's identity (see `yeto_otel.otel.Role`). Its memory is still worth seeing: a
worker that touches the dataset's Python objects copies their pages one by one
(copy-on-read), which grows like a leak. So when a DataLoader of a reporting process starts
workers, its `worker_init_fn` is wrapped for that start only: the wrapper, a picklable object
that spawned workers unpickle whether or not they are instrumented, sets up the worker's own
pipeline (`yeto_otel.otel.start_process_pipeline`) with its process census (no node, no
allocator) and its `torch.load` spans, then calls the user's `worker_init_fn`. The worker id
K is reused across epochs, so a job has ranks x num_workers worker identities however many
epochs run. The pipeline is flushed when the worker exits.

    DataLoaderWorkerInstrumentor().instrument()

or `opentelemetry-instrument` (entry point `yeto_dataloader_workers`);
YETO_OTEL_DATALOADER_WORKERS=off, or OTEL_PYTHON_DISABLED_INSTRUMENTATIONS, turns it off.
Nothing of ours fails an epoch: when the workers' telemetry cannot be prepared, the loader
starts its workers as it would without yeto-otel. `uninstrument()` puts torch's
`_get_iterator` back unless another library wrapped ours since (theirs stays, and ours
inside it calls straight through).
"""

from __future__ import annotations

import logging
import multiprocessing.util
import threading
import weakref
from typing import Any, Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from ..census import CensusInstruments, CensusReader
from ..otel import (current_role, mark_worker, rank_attributes, reported_attributes,
                    start_process_pipeline, worker_resource_attributes)
from ..settings import Settings, current_settings, local_exporters_only
from ..version import __version__
from ._guard import attempt
from ._host_memory import METER_NAME
from ._load_tracing import Switch
from ._post_import import when_imported

__all__ = ["WORKER_EXIT_FLUSH_MS", "DataLoaderWorkerInstrumentor", "WorkerTelemetry"]

_log = logging.getLogger("yeto_otel.dataloader")
# After the worker's own finalizers (torch's run at priority 0 and up): flush last.
_FLUSH_PRIORITY = -10
# How long a worker's exit may wait for its last export to a collector. The DataLoader joins
# its workers at the end of every epoch (non-persistent workers, the default), so this is paid
# per epoch whenever the collector is slow or gone: small, and fixed. An agent on the host
# takes a few milliseconds; what a slower collector has not taken by then is dropped. Local
# files wait on no one, so a worker writing only to them has YETO_OTEL_EXIT_FLUSH_TIMEOUT, the
# same as its rank: on a busy host its last collection may take longer than this to write.
WORKER_EXIT_FLUSH_MS = 30


def worker_exit_flush_ms(settings: Settings) -> int:
    if local_exporters_only():
        return settings.exit_flush_timeout_ms
    return min(settings.exit_flush_timeout_ms, WORKER_EXIT_FLUSH_MS)
_STEP = "the DataLoader wrapper"


def start_worker_telemetry(settings: Settings, attributes: dict, loader_slot: int,
                           worker_id: int) -> None:
    """In a DataLoader worker: its own pipeline, with the process census (and its loads'
    spans with YETO_OTEL_WORKER_LOAD_SPANS=on), flushed at exit within WORKER_EXIT_FLUSH_MS."""
    mark_worker()
    pipeline = start_process_pipeline(
        worker_resource_attributes(attributes, worker_id, loader_slot), settings,
        exit_flush_timeout_ms=worker_exit_flush_ms(settings),
        trace_loads=settings.worker_load_spans)
    meter = pipeline.meter_provider.get_meter(METER_NAME, __version__)
    CensusInstruments(meter, CensusReader(
        allocator=None, node_metrics=False, semconv=settings.semconv_metrics,
        smaps_budget_percent=settings.smaps_budget_percent))
    # multiprocessing runs finalizers with a priority when the worker's target returns,
    # before os._exit, which skips atexit.
    multiprocessing.util.Finalize(None, pipeline.shutdown, exitpriority=_FLUSH_PRIORITY)


class WorkerTelemetry:
    """A DataLoader's `worker_init_fn`, wrapped: the worker's telemetry, then the user's own."""

    def __init__(self, user_init, settings: Settings, attributes: dict, loader_slot: int):
        self.user_init = user_init
        self.settings = settings
        self.attributes = attributes
        self.loader_slot = loader_slot

    def __call__(self, worker_id: int) -> None:
        try:
            start_worker_telemetry(self.settings, self.attributes, self.loader_slot, worker_id)
        except Exception as exc:  # telemetry never fails the worker (nor the epoch)
            _log.warning("DataLoader worker %s: telemetry not started: %s: %s", worker_id,
                         type(exc).__name__, exc)
        if self.user_init is not None:
            self.user_init(worker_id)


class _LoaderSlots:
    """The rank's DataLoaders in the order they first start workers: 0, 1, ..."""

    def __init__(self) -> None:
        self._slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def of(self, loader) -> int:
        with self._lock:
            return self._slots.setdefault(loader, len(self._slots))


class DataLoaderWorkerInstrumentor(BaseInstrumentor):
    _original = None
    _wrapper = None
    _switch = None
    _watch = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("torch >= 2.1",)

    def _instrument(self, **kwargs: Any) -> None:
        """Keyword argument `settings` (tests); the environment's otherwise."""
        role = current_role()
        if role is not None and not role.reports:
            return  # a launcher or a child: its loaders' workers stay silent too
        settings = kwargs.get("settings") or current_settings()
        if not settings.dataloader_workers:
            return
        self._settings = settings
        self._slots = _LoaderSlots()
        self._watch = when_imported("torch", self._patch,
                                    "DataLoaderWorkerInstrumentor (yeto_dataloader_workers)")

    def _worker_telemetry(self, loader) -> WorkerTelemetry | None:
        role = current_role()
        if loader.num_workers == 0 or (role is not None and not role.reports):
            return None  # no workers, or a child's loader: its workers stay silent too
        attributes = rank_attributes()
        if attributes is None:  # telemetry set up in code, not by our configurator
            attributes = reported_attributes(self._settings)
        return WorkerTelemetry(loader.worker_init_fn, self._settings, attributes,
                               self._slots.of(loader))

    def _patch(self, torch) -> None:
        from torch.utils.data import DataLoader

        original = DataLoader._get_iterator
        switch = Switch()

        def _get_iterator(loader):
            if not switch.on:
                return original(loader)
            wrapper = attempt(f"{_STEP}: preparing the workers' telemetry",
                              self._worker_telemetry, loader)
            # Only while the iterator starts its workers: the loader keeps the user's function.
            if wrapper is None or not attempt(f"{_STEP}: setting worker_init_fn", _set_init,
                                              loader, wrapper, default=False):
                return original(loader)
            try:
                return original(loader)
            finally:
                attempt(f"{_STEP}: giving worker_init_fn back", _set_init, loader,
                        wrapper.user_init)

        self._original, self._wrapper, self._switch = original, _get_iterator, switch
        DataLoader._get_iterator = _get_iterator

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._original is not None:
            from torch.utils.data import DataLoader

            self._switch.on = False
            # Only our own wrapper is taken out: one another library put over it stays, and
            # keeps working through ours, which now calls straight through.
            if DataLoader.__dict__.get("_get_iterator") is self._wrapper:
                DataLoader._get_iterator = self._original
            self._original = self._wrapper = self._switch = None


def _set_init(loader, init) -> bool:
    loader.worker_init_fn = init
    return True

