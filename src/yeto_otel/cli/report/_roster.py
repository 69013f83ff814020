"""Who reported what: the ranks (and plain processes), the DataLoader workers under each rank,
and each rank's launches, with the names, colours and markers the page gives them.

- A rank keeps its identity (`<host>/rank-<R>`) across restarts, so its launches are told
  apart by their files: each process writes its own `<signal>-<id>-<start stamp>-<pid>.jsonl`.
  Launch n of a rank is its n-th process in start order.
- A DataLoader worker (`yeto.process.role` says so) reports under its rank's identity plus
  `/worker-<K>` (`/loader-<L>/worker-<K>` for a rank's second loader): one identity per worker
  slot, with a new process (its own files) every epoch unless the workers persist. Each of its
  processes belongs to the launch of its rank that had started last when it started.
- Files written before roles existed carry none: they are ranks, or processes without RANK.

A forked worker's RSS and anonymous memory count pages it still shares with its rank, so the
page never adds a worker to its rank nor draws them in one chart: ranks and workers are two
rosters here, and every chart draws one of them.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, replace

from ...otel import ROLE_ATTRIBUTE, Role
from ._format import RANK_COLORS, clock, is_int, shade
from ._names import HOST_NAME, RANK_ATTRIBUTE
from ._telemetry import Series, Telemetry, process_key

__all__ = ["Launch", "Roster"]

# The start stamp and pid at the end of a process's file stem (see `otel.local_file_stem`).
_STAMP = re.compile(r"-(\d{8}T\d{6})-(\d+)$")
_STAMP_FORMAT = "%Y%m%dT%H%M%S"


@dataclass(frozen=True)
class Launch:
    """One process of a rank (a worker's processes carry the launch of their rank)."""
    number: int  # 1, 2, ... in start order among the rank's processes
    started_ns: int  # the process's start stamp (whole seconds, UTC), else its first record
    pid: int | None
    count: int  # how many launches the rank had

    @property
    def suffix(self) -> str:
        """What a legend adds to a rank's name: nothing when it was launched once."""
        return f" (launch {self.number}, {clock(self.started_ns)})" if self.count > 1 else ""


_FIRST = Launch(1, 0, None, 1)


def _started(key: str, first_ns: int) -> tuple[int, int | None]:
    """(start, pid) of a process from its file stem, else (its first record, None)."""
    found = _STAMP.search(key)
    if not found:
        return first_ns, None
    try:
        seconds = calendar.timegm(time.strptime(found.group(1), _STAMP_FORMAT))
    except ValueError:
        return first_ns, int(found.group(2))
    return seconds * 1_000_000_000, int(found.group(2))


class Roster:
    def __init__(self, data: Telemetry):
        self._data = data
        instances = data.instances()
        self.ranks = [i for i in instances if not self._is_worker_resource(i)]
        self.parent = {w: self._parent_of(w) for w in instances if self._is_worker_resource(w)}
        for parent in self.parent.values():
            if parent not in self.ranks:  # its workers reported, the rank itself did not
                self.ranks.append(parent)
        self.ranks.sort(key=self._order)
        self.workers = {r: sorted((w for w, p in self.parent.items() if p == r),
                                  key=data.rank_order) for r in self.ranks}
        self._labels = self._rank_labels()
        self._launches: dict[tuple[str, str], Launch] = {}
        self._processes: dict[str, int] = {}
        self._by_file: dict[tuple[str, str], Launch] = {}  # launch_of, per point: cached
        for rank in self.ranks:
            self._number_launches(rank)
        for worker in self.parent:
            self._assign_worker_launches(worker)

    # --- roles ----------------------------------------------------------------------------

    def _is_worker_resource(self, instance: str) -> bool:
        role = self._data.resources.get(instance, {}).get(ROLE_ATTRIBUTE)
        return role == Role.DATALOADER_WORKER.value

    def is_worker(self, instance: str) -> bool:
        return instance in self.parent

    def _parent_of(self, worker: str) -> str:
        """The rank a worker belongs to: the rank whose identity its own extends, else the
        identity its rank had (`<host>/<first part>`), when the rank wrote no files."""
        found = [r for r in self.ranks if worker.startswith(r + "/")]
        if found:
            return max(found, key=len)
        host = self._data.resources.get(worker, {}).get(HOST_NAME)
        if host and worker.startswith(f"{host}/"):
            return f"{host}/{worker[len(host) + 1:].split('/', 1)[0]}"
        return worker.rsplit("/", 1)[0]

    def _order(self, rank: str):
        known = rank if rank in self._data.resources else \
            next((w for w, p in self.parent.items() if p == rank), rank)
        return self._data.rank_order(known), rank

    def _rank_number(self, rank: str):
        for instance in (rank, *sorted(w for w, p in self.parent.items() if p == rank)):
            number = self._data.resources.get(instance, {}).get(RANK_ATTRIBUTE)
            if is_int(number):
                return number
        return None

    # --- names and colours ----------------------------------------------------------------

    def _rank_labels(self) -> dict[str, str]:
        """`rank R` where the resource says R and no other identity of the page would read
        the same (two hosts' rank 0 in one directory), else the identity itself."""
        labels = {}
        for rank in self.ranks:
            number = self._rank_number(rank)
            labels[rank] = f"rank {number}" if number is not None else rank
        seen = list(labels.values())
        return {r: (l if seen.count(l) == 1 else r) for r, l in labels.items()}

    def label(self, instance: str) -> str:
        """`rank 0`, `rank 0 / worker 1`, `rank 0 / loader 1 / worker 0`, or the identity."""
        parent = self.parent.get(instance)
        if parent is None:
            return self._labels.get(instance, instance)
        rest = instance[len(parent) + 1:] if instance.startswith(parent + "/") else instance
        return " / ".join([self.label(parent)] + [p.replace("-", " ", 1)
                                                  for p in rest.split("/")])

    def color(self, instance: str) -> str:
        """A rank's colour (the same in every chart); its workers are shades of it."""
        parent = self.parent.get(instance)
        if parent is not None:
            return shade(self.color(parent), self.workers[parent].index(instance))
        index = self.ranks.index(instance) if instance in self.ranks else 0
        return RANK_COLORS[index % len(RANK_COLORS)]

    def colors(self) -> dict[str, str]:
        return {i: self.color(i) for i in (*self.ranks, *self.parent)}

    def trace_name(self, instance: str, launch: Launch) -> str:
        return self.label(instance) + launch.suffix

    # --- launches -------------------------------------------------------------------------

    def _keys(self, instance: str) -> list[tuple[int, int | None, int, str]]:
        """(start, pid, first record, process key) of an instance's processes, oldest first."""
        found = []
        for (inst, key), (first, _) in self._data.extents.items():
            if inst == instance:
                found.append((*_started(key, first), first, key))
        return sorted(found, key=lambda item: (item[0], item[2], item[3]))

    def _number_launches(self, rank: str) -> None:
        keys = self._keys(rank)
        for n, (started, pid, _, key) in enumerate(keys, start=1):
            self._launches[(rank, key)] = Launch(n, started, pid, len(keys))
        self._processes[rank] = len(keys)

    def _assign_worker_launches(self, worker: str) -> None:
        keys = self._keys(worker)
        launches = self.launches(self.parent[worker])
        for started, _, _, key in keys:
            before = [launch for launch in launches if launch.started_ns <= started]
            self._launches[(worker, key)] = before[-1] if before else \
                (launches[0] if launches else _FIRST)
        self._processes[worker] = len(keys)

    def launches(self, rank: str) -> list[Launch]:
        return sorted({launch for (inst, _), launch in self._launches.items() if inst == rank},
                      key=lambda launch: launch.number)

    def processes(self, instance: str) -> int:
        """How many processes reported under `instance` (launches, worker epochs)."""
        return self._processes.get(instance, 0)

    def launch_of(self, instance: str, file_name: str) -> Launch:
        found = self._by_file.get((instance, file_name))
        if found is None:
            found = self._by_file[(instance, file_name)] = \
                self._launches.get((instance, process_key(file_name)), _FIRST)
        return found

    def by_launch(self, series: Series) -> list[tuple[Launch, Series]]:
        """A series cut into one per launch of its rank (a worker's: of the rank it ran
        under), each with the points of that launch's processes, oldest launch first."""
        groups: dict[Launch, list] = {}
        for point in series.points:
            groups.setdefault(self.launch_of(series.instance, point.source), []).append(point)
        return [(launch, replace(series, points=points))
                for launch, points in sorted(groups.items(), key=lambda g: g[0].number)]

    def step_log_owner(self, stem: str) -> tuple[str, Launch] | None:
        """(instance, launch) of the process whose files a step log pairs with
        (`steplog-<stem of its telemetry files>.jsonl`), if any."""
        key = process_key(f"{stem}.jsonl")
        for (instance, found), launch in self._launches.items():
            if found == key:
                return instance, launch
        return None

    def position(self, instance: str) -> tuple[int, int]:
        """Where an instance sorts: its rank's place, then 0 for the rank, 1 + K for its
        workers in order."""
        parent = self.parent.get(instance)
        if parent is None:
            return (self.ranks.index(instance) if instance in self.ranks else len(self.ranks), 0)
        return self.ranks.index(parent), 1 + self.workers[parent].index(instance)
