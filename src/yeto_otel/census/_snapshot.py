"""One census snapshot: every source read once, every value a typed `Quantity`.

`CensusReader.take()` reads /proc/self/status, /proc/self/smaps_rollup, /proc/meminfo (when
this process reports node metrics) and queries the host allocator once. It never raises:
a source that fails is left out of the snapshot and counted in the `FaultLedger`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Mapping

from ..settings import Settings
from ._allocator import AllocatorSource, GaugeEvidence, read_allocator_stats, resolve_allocator
from ._bounded_call import CallFailed, CallTimedOut
from ._table import CENSUS, CensusMetric, Source
from ._fault_ledger import FaultLedger
from ..proc import ProcFile, ProcReadError, parse_kb_fields
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

    def get(self, name: str) -> Quantity | None:
        return self.values.get(name)

    def __getitem__(self, name: str) -> Quantity:
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values


class CensusReader:
    """Holds the open /proc files and the allocator's gauge evidence across collections."""

    def __init__(self, *, allocator: AllocatorSource | None, node_metrics: bool,
                 proc_root: str = "/proc", ledger: FaultLedger | None = None):
        self.allocator = allocator
        self.node_metrics = node_metrics
        self.ledger = ledger or FaultLedger()
        self.evidence = GaugeEvidence()
        self.metrics = tuple(
            m for m in CENSUS
            if (node_metrics or not m.node)
            and (allocator is not None or m.source is not Source.ALLOCATOR))
        self._files: dict[Source, tuple[ProcFile, dict[bytes, str]]] = {}
        for source, relative in _PROC_SOURCES.items():
            wanted = {m.field.encode(): m.name for m in self.metrics if m.source is source}
            if wanted:
                self._files[source] = (ProcFile(os.path.join(proc_root, relative)), wanted)
        self._allocator_metrics = tuple(m for m in self.metrics if m.source is Source.ALLOCATOR)

    @classmethod
    def from_settings(cls, settings: Settings, *, node_metrics: bool | None = None,
                      proc_root: str = "/proc") -> "CensusReader":
        """The reader for these settings: the allocator `YETO_OTEL_HOST_ALLOCATOR` names (a bad
        one raises `SettingsError` now), node metrics as `YETO_OTEL_NODE_METRICS` decides
        unless `node_metrics` says otherwise."""
        return cls(allocator=resolve_allocator(settings.host_allocator,
                                               timeout_ms=settings.allocator_timeout_ms),
                   node_metrics=settings.reports_node_metrics if node_metrics is None
                   else node_metrics,
                   proc_root=proc_root)

    @property
    def proc_files(self) -> dict[Source, ProcFile]:
        return {source: pf for source, (pf, _) in self._files.items()}

    def take(self) -> CensusSnapshot:
        values: dict[str, Quantity] = {}
        for source, (proc_file, wanted) in self._files.items():
            self._read_proc(source, proc_file, wanted, values)
        if self.allocator is not None:
            self._read_allocator(values)
        return CensusSnapshot(time.time_ns(), values)

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

    def _read_allocator(self, values: dict[str, Quantity]) -> None:
        try:
            # A user-supplied callable may raise anything, or return a mapping that does; the
            # query is bounded and hands back any BaseException as an Exception (_bounded_call).
            stats, problems = read_allocator_stats(self.allocator.query())
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
        for proc_file, _ in self._files.values():
            proc_file.close()


_TABLE = {m.name: m for m in CENSUS}


def _quantity(name: str, number: int) -> Quantity:
    m: CensusMetric = _TABLE[name]
    return Quantity(name, number, m.kind, m.unit)
