"""Registers the census on a Meter: an observable instrument per table row, one read per collection.

The SDK calls observable callbacks one by one and has no multi-instrument callback, so the
callbacks share a snapshot: a callback that has already been served the current snapshot
asking again means a new collection (or another reader's) has begun, and only then is the
census read again. This holds whatever order the SDK calls them in and however many readers
there are.

The census is this process's own: in a forked child the inherited instruments observe nothing
(the child's memory is not the rank's, and a child reports under an identity of its own or not
at all), without reading a file.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Sequence

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ._table import CENSUS_ERRORS, ERROR_SOURCE_ATTRIBUTE, CensusMetric, Instrument, Source
from ._quantity import Kind
from ._snapshot import CensusReader, CensusSnapshot

__all__ = ["CensusInstruments", "INTERNAL_ERROR_SOURCE"]

INTERNAL_ERROR_SOURCE = "census"


class _SharedSnapshot:
    def __init__(self, reader: CensusReader, owner_pid: int):
        self._reader = reader
        self._lock = threading.Lock()
        self._snapshot: CensusSnapshot | None = None
        self._served: set[str] = set()
        self.stopped = False
        self.owner_pid = owner_pid

    @property
    def silent(self) -> bool:
        return self.stopped or os.getpid() != self.owner_pid

    def for_instrument(self, name: str) -> CensusSnapshot | None:
        with self._lock:
            if self.silent:
                return None
            if self._snapshot is None or name in self._served:
                self._snapshot = self._reader.take()
                self._served.clear()
            self._served.add(name)
            return self._snapshot

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            self._snapshot = None
            self._reader.close()


class CensusInstruments:
    """The census on one Meter, observed only in the process that created it (`owner_pid`).
    `stop()` ends the reads (instruments cannot be unregistered)."""

    def __init__(self, meter: Meter, reader: CensusReader, *, owner_pid: int | None = None):
        self.reader = reader
        self._shared = _SharedSnapshot(reader, os.getpid() if owner_pid is None else owner_pid)
        # Every source in use is exported from 0, so increase() in alert rules has a series.
        self._error_sources = sorted(reader.error_sources)
        self._create = {
            Instrument.UP_DOWN_COUNTER: meter.create_observable_up_down_counter,
            Instrument.GAUGE: meter.create_observable_gauge,
            Instrument.COUNTER: meter.create_observable_counter,
        }
        for m in reader.metrics:
            self._register(m, self._observe_metric(m))
        self._register(CENSUS_ERRORS, self._observe_errors)

    def _register(self, m: CensusMetric, observe: Callable[[], Sequence[Observation]]) -> None:
        ledger = self.reader.ledger

        def callback(_options: CallbackOptions) -> Sequence[Observation]:
            try:
                return observe()
            except Exception as exc:  # never into the SDK: count, log once, leave a gap
                ledger.record(INTERNAL_ERROR_SOURCE, f"{m.name}: {type(exc).__name__}: {exc}")
                return []

        self._create[m.instrument](m.name, callbacks=[callback], unit=m.unit,
                                   description=m.description)

    def _observe_metric(self, m: CensusMetric) -> Callable[[], Sequence[Observation]]:
        shared = self._shared
        name = m.name
        wants_gauge_proof = m.source is Source.ALLOCATOR and m.field.endswith(".current")
        if m.attribute:
            return self._observe_labelled(m)

        def observe() -> Sequence[Observation]:
            snapshot = shared.for_instrument(name)
            quantity = snapshot.get(name) if snapshot is not None else None
            if quantity is None:
                return ()
            if wants_gauge_proof and quantity.kind is not Kind.GAUGE:
                return ()  # exported as .allocated until .freed is seen to move
            return (Observation(quantity.value),)

        return observe

    def _observe_labelled(self, m: CensusMetric) -> Callable[[], Sequence[Observation]]:
        """One point per attribute value (an event, a pressure level, a cgroup's path)."""
        shared, name, attribute = self._shared, m.name, m.attribute

        def observe() -> Sequence[Observation]:
            snapshot = shared.for_instrument(name)
            points = snapshot.labelled.get(name) if snapshot is not None else None
            return [Observation(q.value, {attribute: key}) for key, q in (points or {}).items()]

        return observe

    def _observe_errors(self) -> Sequence[Observation]:
        if self._shared.silent:
            return ()
        counts = dict.fromkeys(self._error_sources, 0)
        counts.update(self.reader.ledger.counts())
        return [Observation(n, {ERROR_SOURCE_ATTRIBUTE: source}) for source, n in counts.items()]

    def stop(self) -> None:
        self._shared.stop()
