"""The memory cgroups of a run, gathered from the ranks that observed them in turn.

One process per cgroup observes it at a time (the census's election), and another takes over
when it exits, so a cgroup's numbers arrive under several ranks' identities, a stretch each.
The cgroup metrics carry no path (a restarted Slurm step would otherwise start new series);
`yeto.cgroup.memory.info`, which every process reports, says which cgroup each process (file)
is in. Here each point is given to the cgroup (host, path) of the process that wrote it, so
the page draws one line per cgroup that a takeover continues, not one per rank.

The OOM-kill count is a running total of the cgroup (since it was made), not of the process
that read it: its raw steps (`Series.changes`) are merged across the observers and diffed, so a
kill that took the observer itself shows when the next one first reads the count.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ...census import (CGROUP_ANON, CGROUP_EVENTS, CGROUP_FILE, CGROUP_FILE_MAPPED, CGROUP_HIGH,
                       CGROUP_INFO, CGROUP_LIMIT, CGROUP_PEAK, CGROUP_PRESSURE, CGROUP_SHMEM,
                       CGROUP_USAGE, CGROUP_WORKING_SET)
from ...proc import UNLIMITED_FROM
from ._names import HOST_NAME
from ._telemetry import Series, Telemetry, plotted

__all__ = ["CGROUP_LEVELS", "MAX_CGROUPS", "Cgroup", "Kill", "cgroups", "drawn_cgroup_series"]

# The levels the page draws per cgroup (limits included); pressure is drawn as a rate.
CGROUP_LEVELS = (CGROUP_USAGE, CGROUP_WORKING_SET, CGROUP_PEAK, CGROUP_LIMIT, CGROUP_HIGH,
                 CGROUP_ANON, CGROUP_FILE, CGROUP_SHMEM, CGROUP_FILE_MAPPED)
_DRAWN = {m.name for m in CGROUP_LEVELS} | {CGROUP_PRESSURE.name}
_OOM_KILL = (CGROUP_EVENTS.attribute, CGROUP_EVENTS.step_log_point)
_CGROUP_METRICS = _DRAWN | {CGROUP_EVENTS.name, CGROUP_INFO.name}
# How many cgroups the page draws (3 panels each); the others are listed as not plotted.
MAX_CGROUPS = 16
_TITLE_PATH = 48  # characters of a path a panel title shows
# A line breaks where nobody observed the cgroup for this many times its usual interval.
_GAP_FACTOR = 5


@dataclass(frozen=True)
class Kill:
    time_ns: int  # the first read that showed it (the observer's export)
    added: int  # kills since the read before
    total: int  # the cgroup's count since it was made
    observer: str  # the rank that read it


@dataclass
class Cgroup:
    host: str
    path: str  # "" when no process of it said (files written without the info metric)
    # (metric, attributes) -> [(time, value, observer)], in time order
    lines: dict[tuple[str, tuple], list] = field(default_factory=dict)
    kills: list[Kill] = field(default_factory=list)
    kills_before: int = 0  # kills counted before the first read of the run
    observers: list[str] = field(default_factory=list)  # in the order they took over
    unlimited: set[str] = field(default_factory=set)  # limit rows read as "no limit"

    @property
    def name(self) -> str:
        return f"{self.host} {self.path or '(cgroup path not reported)'}"

    @property
    def title(self) -> str:
        """The name, its path cut to its end when long (a pod's path runs to 100 characters):
        a panel title holds it; the hover has it whole."""
        path = self.path or "(cgroup path not reported)"
        if len(path) > _TITLE_PATH:
            path = "…" + path[-(_TITLE_PATH - 1):]
        return f"{self.host} {path}"

    def points(self, metric: str, attributes: tuple = ()) -> list[tuple[int, float | None]]:
        """(time, value) of one line, None where nobody observed the cgroup for a while."""
        return _with_gaps(self.lines.get((metric, attributes), []))


def _with_gaps(found: list) -> list[tuple[int, float | None]]:
    steps = sorted(b[0] - a[0] for a, b in zip(found, found[1:]) if b[0] > a[0])
    usual = steps[len(steps) // 2] if steps else 0
    out: list[tuple[int, float | None]] = []
    for n, (t, v, _) in enumerate(found):
        if n and usual and t - found[n - 1][0] > _GAP_FACTOR * usual:
            out.append((t, None))
        out.append((t, v))
    return out


def _host(data: Telemetry, instance: str) -> str:
    return str(data.resources.get(instance, {}).get(HOST_NAME) or instance.split("/", 1)[0])


def _paths(data: Telemetry) -> tuple[dict, dict]:
    """({(instance, file): path}, {instance: {path, ...}}) from the info series."""
    by_file: dict[tuple[str, str], str] = {}
    by_instance: dict[str, set] = defaultdict(set)
    for s in data.series.values():
        if s.metric != CGROUP_INFO.name:
            continue
        path = dict(s.attributes).get(CGROUP_INFO.attribute, "")
        by_instance[s.instance].add(path)
        for p in s.points:
            by_file[(s.instance, p.source)] = path
    return by_file, by_instance


def cgroups(data: Telemetry) -> list[Cgroup]:
    """Every cgroup with numbers (not only a path), those with OOM kills first, then by host
    and path."""
    by_file, by_instance = _paths(data)
    found: dict[tuple[str, str], Cgroup] = {}
    steps: dict[tuple[str, str], list] = defaultdict(list)

    def cgroup_of(instance: str, file: str) -> Cgroup:
        path = by_file.get((instance, file))
        if path is None:  # no info from this file: the instance's only path, if it had one
            known = by_instance.get(instance, ())
            path = next(iter(known)) if len(known) == 1 else ""
        key = (_host(data, instance), path)
        if key not in found:
            found[key] = Cgroup(*key)
        return found[key]

    for s in data.series.values():
        if s.metric in _DRAWN:
            values = plotted(s) if s.metric == CGROUP_PRESSURE.name else \
                [(p.time_ns, p.value, p.source) for p in s.points]
            sources = _sources(s)
            for t, v, *rest in values:
                if v is None:
                    continue  # a rate's break: the lines break where nobody observed
                file = rest[0] if rest else sources.get(t, "")
                _add(cgroup_of(s.instance, file), s, t, v)
        elif s.metric == CGROUP_EVENTS.name and _OOM_KILL in s.attributes:
            for t, v, file in s.changes:
                cgroup = cgroup_of(s.instance, file)
                steps[(cgroup.host, cgroup.path)].append((t, v, s.instance))
    for key, cgroup in found.items():
        for line in cgroup.lines.values():
            line.sort(key=lambda item: item[0])
        _kills(cgroup, sorted(steps.get(key, ()), key=lambda item: item[0]))
        cgroup.observers = _observers(cgroup)
    return sorted(found.values(), key=lambda c: (not c.kills, c.host, c.path))


def _sources(series: Series) -> dict[int, str]:
    """time -> file of a rated series' points (its rates carry only their time)."""
    return {p.time_ns: p.source for p in series.points}


def _add(cgroup: Cgroup, series: Series, t: int, v: float) -> None:
    if series.metric in (CGROUP_LIMIT.name, CGROUP_HIGH.name) and v >= UNLIMITED_FROM:
        cgroup.unlimited.add(series.metric)  # "no limit" written as a number: nothing to draw
        return
    cgroup.lines.setdefault((series.metric, series.attributes), []).append(
        (t, v, series.instance))


def _kills(cgroup: Cgroup, steps: list) -> None:
    """Diff the merged steps of the OOM-kill count: each rise is a kill marker; a count that
    went back is a new cgroup under the same path (its count starts again)."""
    previous = None
    for t, v, observer in steps:
        if previous is None:
            cgroup.kills_before = int(v)
        elif v > previous:
            cgroup.kills.append(Kill(t, int(v - previous), int(v), observer))
        previous = v


def _observers(cgroup: Cgroup) -> list[str]:
    first: dict[str, int] = {}
    for line in cgroup.lines.values():
        for t, _, observer in line:
            if t < first.get(observer, t + 1):
                first[observer] = t
    return sorted(first, key=first.get)


def drawn_cgroup_series(data: Telemetry) -> tuple[set[int], int]:
    """(ids of the cgroup series the page draws, how many cgroups it leaves out): every
    series of the first `MAX_CGROUPS` cgroups except events other than OOM kills."""
    found = cgroups(data)
    kept = {(c.host, c.path) for c in found[:MAX_CGROUPS]}
    left_out = max(0, len(found) - MAX_CGROUPS)
    by_file, by_instance = _paths(data)
    drawn = set()
    for s in data.series.values():
        if s.metric not in _CGROUP_METRICS:
            continue
        if s.metric == CGROUP_EVENTS.name and _OOM_KILL not in s.attributes:
            continue
        paths = {by_file.get((s.instance, p.source)) for p in s.points} - {None} or \
            by_instance.get(s.instance) or {""}
        if any((_host(data, s.instance), path) in kept for path in paths):
            drawn.add(id(s))
    return drawn, left_out
