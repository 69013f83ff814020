"""The census of this process's memory cgroup: which one it is, and (for one process per
cgroup) its numbers.

The cgroup is located on the first collection (`locate_memory_cgroup`) and kept: a process is
not moved between cgroups while it trains. When it has none that can be read (no memory
controller, the host's root cgroup, a namespace that hides it), that is a fact about the
machine, not a failed read: it is counted once in `yeto.census.errors` (source `cgroup`) and
logged once, and the cgroup rows are left out from then on. A file that fails later is
counted on every collection that meets it, like the other sources.

The ranks of a pod share one cgroup: `Duty(<the cgroup's identity>)` elects the one process
that reads its files on each collection, and another takes over at its next collection when
that one exits. Every process reports `yeto.cgroup.memory.info` (its path), elected or not.
Reading the files costs a few microseconds (memory.stat included; docs/performance.md), so
they are read on every collection of the elected process, not within a budget.
"""

from __future__ import annotations

from ..proc import CgroupNotFound, MemoryCgroup, MemoryCgroupFiles, locate_memory_cgroup
from ._duty import DEFAULT_LOCK_DIR, Duty
from ._fault_ledger import FaultLedger
from ._node_duty import node_duty_key
from ._quantity import Quantity
from ._table import CENSUS, CGROUP_EVENTS, CGROUP_INFO, CGROUP_PRESSURE, Source

__all__ = ["CgroupCensus", "Labelled"]

Labelled = dict[str, dict[str, Quantity]]  # metric name -> attribute value -> quantity

_LEVEL_ROWS = {m.field: m for m in CENSUS
               if m.source is Source.CGROUP and not m.attribute}
_LABEL = Source.CGROUP.label


class CgroupCensus:
    """`elected`: observe the cgroup's numbers only while this process holds its `Duty` (the
    metric instruments); False reads them on every call (the step log, a one-off command).
    `lock_dir`: where the election's lock files are (YETO_OTEL_LOCK_DIR). `fs_root`: where the
    cgroup mounts are found (a test's fake tree; the real one is /)."""

    def __init__(self, *, elected: bool = True, proc_root: str = "/proc",
                 lock_dir: str = DEFAULT_LOCK_DIR, fs_root: str = "/"):
        self.elected = elected
        self.proc_root = proc_root
        self.lock_dir = lock_dir
        self.fs_root = fs_root
        self._located = False
        self.cgroup: MemoryCgroup | None = None
        self.duty: Duty | None = None
        self.files: MemoryCgroupFiles | None = None

    def take(self, values: dict[str, Quantity], labelled: Labelled, ledger: FaultLedger) -> None:
        """Add this collection's cgroup values; never raises."""
        if not self._located:
            self._locate_once(ledger)
        if self.files is None:
            return
        labelled[CGROUP_INFO.name] = {self.cgroup.path: _quantity(CGROUP_INFO, 1)}
        if self.elected and not self.duty.held():
            return
        reading = self.files.read()
        if reading.problems:
            ledger.record(_LABEL, "; ".join(reading.problems))
        for field, number in reading.levels.items():
            m = _LEVEL_ROWS[field]
            values[m.name] = _quantity(m, number)
        for row, found in ((CGROUP_EVENTS, reading.events), (CGROUP_PRESSURE, reading.pressure)):
            if found:
                labelled[row.name] = {key: _quantity(row, n) for key, n in found.items()}

    def _locate_once(self, ledger: FaultLedger) -> None:
        self._located = True
        try:
            self.cgroup = locate_memory_cgroup(self.proc_root, fs_root=self.fs_root)
        except CgroupNotFound as exc:
            ledger.record(_LABEL, f"no memory cgroup to report ({exc}); the cgroup metrics are "
                                  "left out for the life of this process", kind="absent")
            return
        except Exception as exc:  # never into the trainer
            ledger.record(_LABEL, f"locating the memory cgroup failed: "
                                  f"{type(exc).__name__}: {exc}", kind="absent")
            return
        self.files = MemoryCgroupFiles(self.cgroup)
        if self.elected:
            # The cgroup's id is unique on one boot of one host; the host's key keeps two
            # machines that share a lock directory (a network filesystem) out of one election.
            key = f"{node_duty_key(self.proc_root)}/{self.cgroup.identity}"
            self.duty = Duty(key, directory=self.lock_dir, ledger=ledger)

    def close(self) -> None:
        """Close the files and give the duty up: another process takes the cgroup over."""
        if self.files is not None:
            self.files.close()
        if self.duty is not None:
            self.duty.close()


def _quantity(m, number: int | float) -> Quantity:
    return Quantity(m.name, number, m.kind, m.unit)
