"""One census snapshot: every source read once, every value a typed `Quantity`.

`CensusReader.take()` reads /proc/self/status, /proc/meminfo (when this process reports node
metrics) and queries the host allocator once, each at a cost that does not grow with the
process. /proc/self/smaps_rollup, whose read walks every page of the process, is read within a
CPU budget shared by every reader of the process (`_budgeted_read`): the snapshot carries its
last values and their age. It never raises: a source that fails is left out of the snapshot
and counted in the `FaultLedger`.

A reader made with `wait=False` (the step log's, on the training thread) never waits on a
slow source: a smaps_rollup read that is due runs on the background reader, and the
allocator is answered by its last finished query (a new one starts on the query thread). Its
snapshot carries the latest values, the smaps_rollup ones with their age as always.

A reader made with `shared_refresh_s` (the step log's: 1 s) reads the sources that are not the
process's own (the node's /proc/meminfo, the memory cgroup's files, the host allocator) at most
that often and carries their last values, with their age, in between: together they cost
~0.2 ms right after a training step (eight files, the CPU's caches cold), several percent of a
step of a few milliseconds, and none of them is the step's own. /proc/self/status, the rank's
own memory, is read on every take.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping

from ..settings import Settings
from ._allocator import AllocatorSource, GaugeEvidence, read_allocator_stats, resolve_allocator
from ._bounded_call import CallFailed, CallPending, CallTimedOut
from ._budgeted_read import BudgetedRead, Clock, shared_budgeted_read
from ._table import CENSUS, SMAPS_ROLLUP_AGE, UPTIME, CensusMetric, Source
from ._cgroup import CgroupCensus
from ._duty import DUTY_ERROR_SOURCE
from ._fault_ledger import FaultLedger
from ._node_duty import NodeDuty, node_duty_key
from ..proc import ProcFile, ProcReadError, parse_kb_fields, process_uptime_s
from ._quantity import Kind, Quantity

__all__ = ["CensusReader", "CensusSnapshot"]

_PROC_SOURCES = {
    Source.STATUS: "self/status",
    Source.SMAPS_ROLLUP: "self/smaps_rollup",
    Source.MEMINFO: "meminfo",
}


@dataclass(frozen=True)
class CensusSnapshot:
    taken_ns: int
    values: Mapping[str, Quantity] = field(default_factory=dict)
    # name -> how old its value is (ns), for the values read within a budget, not just now
    ages_ns: Mapping[str, int] = field(default_factory=dict)
    # name -> attribute value -> value, for the rows with one point per attribute value
    labelled: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)

    def get(self, name: str) -> Quantity | None:
        return self.values.get(name)

    def __getitem__(self, name: str) -> Quantity:
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values


class CensusReader:
    """Holds the open /proc files and the allocator's gauge evidence across collections.

    `smaps_budget_percent`: the share of one core smaps_rollup reads may take (0: never read,
    its rows are left out; inf: every collection). Readers with the same budget and `clock`
    share one budget and one last sample; a test passes a clock of its own.

    `node_duty`: with node metrics on, /proc/meminfo is read only in the collections where
    this process holds it (one process per host at a time); None: in every collection.

    `wait`: False for a caller that must never wait on the smaps_rollup walk or the allocator
    (the step log): see the module's docstring.
    """

    def __init__(self, *, allocator: AllocatorSource | None, node_metrics: bool,
                 proc_root: str = "/proc", ledger: FaultLedger | None = None,
                 semconv: bool = True,
                 smaps_budget_percent: float = Settings.smaps_budget_percent,
                 clock: Clock = time.monotonic_ns, node_duty: NodeDuty | None = None,
                 cgroup: CgroupCensus | None = None, wait: bool = True,
                 shared_refresh_s: float = 0.0):
        self.allocator = allocator
        self.wait = wait
        self.clock = clock
        self._shared_refresh_ns = int(shared_refresh_s * 1e9)
        self._shared: _SharedRead | None = None
        self.cgroup = cgroup
        self.node_metrics = node_metrics
        self.node_duty = node_duty
        self.ledger = ledger or FaultLedger()
        self.evidence = GaugeEvidence()
        self.metrics = tuple(
            m for m in CENSUS
            if (node_metrics or not m.node)
            and (semconv or not m.semconv)
            and (smaps_budget_percent > 0 or m.source is not Source.SMAPS_ROLLUP)
            and (allocator is not None or m.source is not Source.ALLOCATOR)
            and (cgroup is not None or m.source is not Source.CGROUP))
        # Rows that read the same field (VmRSS under our name and the semantic conventions')
        # take it from one parse: the first row parses it, the others are its twins.
        self._twins: dict[str, tuple[str, ...]] = {}
        self._files: dict[Source, tuple[ProcFile, dict[bytes, str]]] = {}
        for source, relative in _PROC_SOURCES.items():
            wanted: dict[bytes, str] = {}
            for m in [m for m in self.metrics
                      if m.source is source and not m.sample_age and not m.derived]:
                first = wanted.setdefault(m.field.encode(), m.name)
                if first != m.name:
                    self._twins[first] = (*self._twins.get(first, ()), m.name)
            if wanted:
                self._files[source] = (ProcFile(os.path.join(proc_root, relative)), wanted)
        self._smaps: BudgetedRead[_Fields] | None = None
        self._smaps_seen = 0  # the last sample whose fault this reader has counted
        self._smaps_age = SMAPS_ROLLUP_AGE in self.metrics
        if Source.SMAPS_ROLLUP in self._files:
            proc_file, wanted = self._files.pop(Source.SMAPS_ROLLUP)
            # This reader's own read (its own descriptor, as for the other files); when it runs
            # is up to the budget it shares with the process's other readers.
            self._smaps_fields = _FieldsRead(proc_file, wanted)
            self.smaps_rollup_read = self._smaps_fields  # a test may wrap or replace it
            self._smaps = shared_budgeted_read((proc_file.path, tuple(wanted)),
                                               percent=smaps_budget_percent, clock=clock)
        self._allocator_metrics = tuple(m for m in self.metrics if m.source is Source.ALLOCATOR)
        self._uptime = UPTIME in self.metrics

    @classmethod
    def from_settings(cls, settings: Settings, *, node_metrics: bool | None = None,
                      proc_root: str = "/proc", cgroup_elected: bool = True,
                      wait: bool = True, shared_refresh_s: float = 0.0) -> "CensusReader":
        """The reader for these settings: the allocator `YETO_OTEL_HOST_ALLOCATOR` names (a bad
        one raises `SettingsError` now), node metrics as `YETO_OTEL_NODE_METRICS` decides
        unless `node_metrics` says otherwise, the semantic-conventions names as
        `YETO_OTEL_SEMCONV_METRICS` decides (under `auto`, while this process holds the
        host's node duty)."""
        reader = cls(allocator=resolve_allocator(settings.host_allocator,
                                                 timeout_ms=settings.allocator_timeout_ms),
                     node_metrics=settings.reports_node_metrics if node_metrics is None
                     else node_metrics,
                     proc_root=proc_root, semconv=settings.semconv_metrics,
                     smaps_budget_percent=settings.smaps_budget_percent,
                     cgroup=CgroupCensus(elected=cgroup_elected, proc_root=proc_root,
                                         lock_dir=settings.lock_dir), wait=wait,
                     shared_refresh_s=shared_refresh_s)
        if node_metrics is None and settings.node_metrics == "auto":
            reader.node_duty = NodeDuty(node_duty_key(proc_root), fallback=settings.node_fallback,
                                        directory=settings.lock_dir, ledger=reader.ledger)
        return reader

    @property
    def error_sources(self) -> set[str]:
        """The `source` labels this reader's failures may be counted under."""
        sources = {m.source.label for m in self.metrics if m.source is not None}
        if self.node_duty is not None or (self.cgroup is not None and self.cgroup.elected):
            sources.add(DUTY_ERROR_SOURCE)
        return sources

    @property
    def proc_files(self) -> dict[Source, ProcFile]:
        files = {source: pf for source, (pf, _) in self._files.items()}
        if self._smaps is not None:
            files[Source.SMAPS_ROLLUP] = self._smaps_fields.proc_file
        return files

    @property
    def smaps_rollup(self) -> BudgetedRead | None:
        """The budgeted smaps_rollup read this reader shares (None with a budget of 0)."""
        return self._smaps

    def take(self) -> CensusSnapshot:
        values: dict[str, Quantity] = {}
        ages: dict[str, int] = {}
        own = self._files.get(Source.STATUS)
        if own is not None:
            self._read_proc(Source.STATUS, *own, values)
        if self._uptime and values:  # with the process's status, as the row says
            values[UPTIME.name] = Quantity(UPTIME.name, process_uptime_s(), UPTIME.kind,
                                           UPTIME.unit)
        now = self.clock()
        shared = self._shared
        if shared is None or now - shared.taken_ns >= self._shared_refresh_ns:
            shared = self._shared = self._read_shared(now)
        values.update(shared.values)
        labelled = dict(shared.labelled)
        if self._shared_refresh_ns:  # kept between reads: say how old
            age = now - shared.taken_ns
            ages.update(dict.fromkeys((*shared.values, *shared.labelled), age))
        # smaps_rollup last of all: its walk holds the process's memory map, and a thread
        # start (its stack is mapped) waits for the walk of a whole mapping (80 ms behind a
        # 4 GiB one, measured for the step log's first call).
        if self._smaps is not None:
            self._take_smaps_rollup(self._smaps, values, ages)
        return CensusSnapshot(time.time_ns(), values, ages, labelled)

    def _read_shared(self, now: int) -> "_SharedRead":
        """The node's, the memory cgroup's and the allocator's values, read now."""
        values: dict[str, Quantity] = {}
        labelled: dict[str, dict[str, Quantity]] = {}
        meminfo = self._files.get(Source.MEMINFO)
        if meminfo is not None and (self.node_duty is None or self.node_duty.held()):
            self._read_proc(Source.MEMINFO, *meminfo, values)  # else another process has it
        if self.cgroup is not None:
            self.cgroup.take(values, labelled, self.ledger)
        # Last, after every read that lets go of the GIL: a query handed to another thread
        # here would take the GIL at this caller's next such read, and the caller would wait.
        if self.allocator is not None:
            self._read_allocator(values)
        return _SharedRead(now, values, labelled)

    def _take_smaps_rollup(self, smaps: BudgetedRead, values: dict[str, Quantity],
                           ages: dict[str, int]) -> None:
        # A new read only when the budget allows; without `wait`, on the background reader.
        self._smaps_fields.reopen()
        try:
            sample = smaps.latest(self.smaps_rollup_read, wait=self.wait)
        except _ReaderClosed:
            return
        if sample is None:
            return
        found, problem = sample.value
        if sample.number != self._smaps_seen:  # a new read: count its fault here once
            self._smaps_seen = sample.number
            if problem:
                self.ledger.record(Source.SMAPS_ROLLUP.label, problem)
        age = sample.age_ns(smaps.clock())
        for name, number in found.items():
            values[name] = _quantity(name, number)
            ages[name] = age
        if found and self._smaps_age:
            values[SMAPS_ROLLUP_AGE.name] = Quantity(SMAPS_ROLLUP_AGE.name, age / 1e9,
                                                     SMAPS_ROLLUP_AGE.kind, SMAPS_ROLLUP_AGE.unit)

    def _read_proc(self, source: Source, proc_file: ProcFile, wanted: dict[bytes, str],
                   values: dict[str, Quantity]) -> None:
        try:
            data = proc_file.read()
        except ProcReadError as exc:
            self.ledger.record(source.label, str(exc))
            return
        found, problems = parse_kb_fields(proc_file.path, data, wanted)
        if problems:
            self.ledger.record(source.label, "; ".join(problems))
        for name, number in found.items():
            values[name] = _quantity(name, number)
            for twin in self._twins.get(name, ()):
                values[twin] = _quantity(twin, number)

    def _read_allocator(self, values: dict[str, Quantity]) -> None:
        try:
            # A user-supplied callable may raise anything, or return a mapping that does; the
            # query is bounded and hands back any BaseException as an Exception (_bounded_call).
            raw = self.allocator.query() if self.wait else self.allocator.latest()
            stats, problems = read_allocator_stats(raw)
        except CallPending:  # the first query has not finished yet: nothing to count
            return
        except CallFailed as exc:  # timed out, still stuck, or raised a BaseException
            self.ledger.record(Source.ALLOCATOR.label, str(exc),
                               kind="timeout" if isinstance(exc, CallTimedOut) else "")
            return
        except Exception as exc:
            self.ledger.record(Source.ALLOCATOR.label, f"{self.allocator.name} raised "
                               f"{type(exc).__name__}: {exc}")
            return
        if problems:
            self.ledger.record(Source.ALLOCATOR.label, "; ".join(problems))
        self.evidence.observe(stats)
        for m in self._allocator_metrics:
            number = stats.get(m.field)
            if number is None:
                continue
            kind = m.kind
            if m.field.endswith(".current") and not self.evidence.is_gauge(m.field.split(".")[0]):
                # No proof that frees are counted: this "current" only ever rises.
                kind = Kind.RUNNING_TOTAL
            values[m.name] = Quantity(m.name, number, kind, m.unit)

    def close(self) -> None:
        if self._smaps is not None:
            self._smaps_fields.close()  # a read still queued for it must not reopen it
        for proc_file in self.proc_files.values():
            proc_file.close()
        if self.cgroup is not None:
            self.cgroup.close()
        if self.node_duty is not None:
            self.node_duty.close()  # another process takes the node over at its next collection


@dataclass(frozen=True)
class _SharedRead:
    """The values of the sources that are not the process's own, as of one read."""

    taken_ns: int  # the reader's clock when they were read
    values: dict[str, Quantity]
    labelled: dict[str, dict[str, Quantity]]


_Fields = tuple[dict[str, int], str]  # the values found, and what was wrong ("" if nothing)


class _ReaderClosed(Exception):
    """The read's reader was closed: no read, and no sample (another reader shares the budget
    and its last sample, which an empty one would replace)."""


class _FieldsRead:
    """One read and parse of a /proc file, as `BudgetedRead` calls it: never raises, except
    `_ReaderClosed` from `close()` until `reopen()` (a read handed to the background reader can
    run after its reader was closed, and must not open the file again for nobody)."""

    def __init__(self, proc_file: ProcFile, wanted: dict[bytes, str]):
        self.proc_file = proc_file
        self.wanted = wanted
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self) -> _Fields:
        with self._lock:
            if self._closed:
                raise _ReaderClosed(self.proc_file.path)
            try:
                data = self.proc_file.read()
            except ProcReadError as exc:
                return {}, str(exc)
        found, problems = parse_kb_fields(self.proc_file.path, data, self.wanted)
        return found, "; ".join(problems)

    def close(self) -> None:
        with self._lock:  # waits for a read under way: closing is no step
            self._closed = True

    def reopen(self) -> None:
        """The reader is used again after `close()` (its files open again as they are read)."""
        self._closed = False


_TABLE = {m.name: m for m in CENSUS}


def _quantity(name: str, number: int) -> Quantity:
    m: CensusMetric = _TABLE[name]
    return Quantity(name, number, m.kind, m.unit)
