"""The numbers of one memory cgroup, v1 or v2, from its files; pure parsing, no OpenTelemetry.

Each file is kept open and re-read with pread (`ProcFile`), as the /proc readers are: cgroup
files are regenerated on every read at offset 0. Every value comes back under one name
whatever the version (the kernel's cgroup-v2.rst and cgroup-v1/memory.rst say what each is):

| name | v2 | v1 |
|---|---|---|
| usage | memory.current | memory.usage_in_bytes |
| limit | memory.max (absent when `max`) | memory.limit_in_bytes (absent when unlimited) |
| high | memory.high (absent when `max`) | - |
| peak | memory.peak | memory.max_usage_in_bytes |
| anon, file, shmem, file_mapped | memory.stat anon, file, shmem, file_mapped | memory.stat total_rss, total_cache, total_shmem, total_mapped_file |
| working_set | usage - inactive_file | usage - total_inactive_file |
| events | memory.events (low high max oom oom_kill oom_group_kill) | memory.oom_control oom_kill; memory.failcnt as `max` |
| pressure | memory.pressure some / full `total` (seconds) | - |

v1's `total_*` fields are the hierarchical ones: what v2's memory.stat always reports and what
the limit and usage cover. The working set is computed as kubelet computes it for eviction
(never below 0).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from ._cgroup_location import MemoryCgroup
from ._files import ProcFile, ProcReadError

__all__ = ["CgroupReading", "MemoryCgroupFiles", "UNLIMITED_FROM", "parse_flat_keyed",
           "parse_pressure_totals", "parse_single_value"]

# v1 writes "unlimited" as PAGE_COUNTER_MAX pages: 2^63 - 1 rounded down to the page size
# (9223372036854771712 with 4 KiB pages). No machine has 4 EiB: anything from 2^62 is unlimited.
UNLIMITED_FROM = 1 << 62

_STAT_FIELDS = {
    2: {"anon": "anon", "file": "file", "shmem": "shmem", "file_mapped": "file_mapped",
        "inactive_file": "inactive_file"},
    1: {"total_rss": "anon", "total_cache": "file", "total_shmem": "shmem",
        "total_mapped_file": "file_mapped", "total_inactive_file": "inactive_file"},
}
_V2_EVENTS = ("low", "high", "max", "oom", "oom_kill", "oom_group_kill")
_PRESSURE_LEVELS = ("some", "full")

# file -> how it is parsed and what it gives; "limit" files may say `max` / unlimited.
_FILES = {
    2: {"memory.current": ("single", "usage"), "memory.max": ("limit", "limit"),
        "memory.high": ("limit", "high"), "memory.peak": ("single", "peak"),
        "memory.stat": ("stat", ""), "memory.events": ("events", ""),
        "memory.pressure": ("pressure", "")},
    1: {"memory.usage_in_bytes": ("single", "usage"), "memory.limit_in_bytes": ("limit", "limit"),
        "memory.max_usage_in_bytes": ("single", "peak"), "memory.stat": ("stat", ""),
        "memory.oom_control": ("oom_control", ""), "memory.failcnt": ("failcnt", "")},
}


@dataclass
class CgroupReading:
    levels: dict[str, int] = field(default_factory=dict)  # bytes, by the names above
    events: dict[str, int] = field(default_factory=dict)  # event -> count since creation
    pressure: dict[str, float] = field(default_factory=dict)  # level -> seconds stalled
    problems: list[str] = field(default_factory=list)  # files missing, unreadable or odd


def parse_single_value(text: bytes, *, limit: bool = False) -> int | None:
    """A file holding one number. With `limit`, `max` (v2) and the v1 unlimited value give
    None (no limit: nothing to export). Raises ValueError on anything else."""
    token = text.strip()
    if limit and token == b"max":
        return None
    if not token.isdigit():
        raise ValueError(f"expected a number{' or max' if limit else ''}, found {token[:40]!r}")
    value = int(token)
    return None if limit and value >= UNLIMITED_FROM else value


def parse_flat_keyed(text: bytes) -> dict[str, int]:
    """`key value` lines (memory.stat, memory.events, memory.oom_control); lines whose value is
    not a number are left out, and so is a last line without its newline (the text was cut,
    maybe mid-value), so a missing key is reported by the caller that needs it."""
    values = {}
    lines = text.split(b"\n")
    lines.pop()  # "" after the final newline, or the cut line
    for line in lines:
        key, _, value = line.partition(b" ")
        if value.strip().isdigit():
            values[key.decode("ascii", "replace")] = int(value)
    return values


def parse_pressure_totals(text: bytes) -> dict[str, float]:
    """`some avg10=0.00 avg60=0.00 avg300=0.00 total=123` -> {"some": 0.000123} (the total is
    microseconds stalled since boot or the cgroup's creation)."""
    totals = {}
    for line in text.split(b"\n"):
        level, *pairs = line.split() or [b""]
        for pair in pairs:
            key, _, value = pair.partition(b"=")
            if key == b"total" and value.isdigit():
                totals[level.decode("ascii", "replace")] = int(value) / 1e6
    return totals


class MemoryCgroupFiles:
    """The files of one memory cgroup, held open. A file that does not exist on the first read
    (memory.peak before Linux 5.19, memory.pressure without PSI) is reported once and not
    tried again; any other failure is reported on every read that meets it."""

    def __init__(self, cgroup: MemoryCgroup):
        self.cgroup = cgroup
        self._files = {name: (ProcFile(f"{cgroup.directory}/{name}"), how)
                       for name, how in _FILES[cgroup.version].items()}
        self._first = True

    @property
    def files(self) -> list[ProcFile]:
        return [proc_file for proc_file, _ in self._files.values()]

    def read(self) -> CgroupReading:
        reading = CgroupReading()
        for name, (proc_file, (parser, target)) in list(self._files.items()):
            try:
                text = proc_file.read()
            except ProcReadError as exc:
                if self._first and _not_found(proc_file):
                    del self._files[name]
                    reading.problems.append(f"{exc} (not read again)")
                else:
                    reading.problems.append(str(exc))
                continue
            try:
                self._parse(parser, target, text, reading)
            except ValueError as exc:
                reading.problems.append(f"{proc_file.path}: {exc}")
        self._first = False
        inactive = reading.levels.pop("inactive_file", None)
        if "usage" in reading.levels and inactive is not None:
            reading.levels["working_set"] = max(0, reading.levels["usage"] - inactive)
        return reading

    def _parse(self, parser: str, target: str, text: bytes, reading: CgroupReading) -> None:
        if parser in ("single", "limit"):
            value = parse_single_value(text, limit=parser == "limit")
            if value is not None:
                reading.levels[target] = value
        elif parser == "stat":
            _pick(parse_flat_keyed(text), _STAT_FIELDS[self.cgroup.version], reading.levels)
        elif parser == "events":
            _pick(parse_flat_keyed(text), {e: e for e in _V2_EVENTS}, reading.events)
        elif parser == "oom_control":
            # oom_kill is there from Linux 4.13; older kernels have no count to report.
            _pick(parse_flat_keyed(text), {"oom_kill": "oom_kill"}, reading.events)
        elif parser == "failcnt":  # times usage hit the limit: v2's `max` event
            reading.events["max"] = parse_single_value(text)
        else:
            totals = parse_pressure_totals(text)
            missing = [level for level in _PRESSURE_LEVELS if level not in totals]
            reading.pressure.update({k: v for k, v in totals.items() if k in _PRESSURE_LEVELS})
            if missing:
                raise ValueError(f"no total for {', '.join(missing)}")

    def close(self) -> None:
        for proc_file in self.files:
            proc_file.close()


def _pick(found: dict[str, int], wanted: dict[str, str], into: dict) -> None:
    missing = [key for key in wanted if key not in found]
    into.update({name: found[key] for key, name in wanted.items() if key in found})
    if missing:
        raise ValueError(f"{', '.join(missing)} missing")


def _not_found(proc_file: ProcFile) -> bool:
    try:
        with open(proc_file.path, "rb"):
            return False
    except OSError as exc:
        return exc.errno == errno.ENOENT
