"""What the kernel counts that says how a process died: the OOM kills of a memory cgroup and of
the node, and a memory cgroup's usage and limit.

- A memory cgroup counts every process the OOM killer killed in it: `oom_kill` in
  memory.events (v2) or memory.oom_control (v1, Linux 4.13 on). The count is the cgroup's own
  and its descendants' (v2's memory.events is hierarchical; v1's oom_control counts kills
  charged to it).
- The node counts every OOM kill on it, in a cgroup or not: `oom_kill` in /proc/vmstat (Linux
  4.13 on). That is the count for a process without a limited cgroup of its own.

The readers keep their files open and re-read them (`ProcFile`, pread at offset 0); a file that
cannot be read gives None, never an exception: evidence that is missing is no evidence.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..proc import (UNLIMITED_FROM, ProcFile, ProcReadError, parse_flat_keyed,
                    parse_single_value)

__all__ = ["CgroupEvidence", "Counts", "NodeEvidence"]

# file names by cgroup version: (oom_kill counts, usage, limit)
_CGROUP_FILES = {2: ("memory.events", "memory.current", "memory.max"),
                 1: ("memory.oom_control", "memory.usage_in_bytes", "memory.limit_in_bytes")}


@dataclass(frozen=True)
class Counts:
    """A memory cgroup's numbers at one read; None where a file could not be read (a limit is
    None when there is none)."""

    oom_kills: int | None = None
    usage: int | None = None
    limit: int | None = None


def _read_int_field(proc_file: ProcFile, key: str) -> int | None:
    try:
        value = parse_flat_keyed(proc_file.read()).get(key)
    except (ProcReadError, ValueError):
        return None
    return value


def _read_single(proc_file: ProcFile, *, limit: bool = False) -> int | None:
    try:
        value = parse_single_value(proc_file.read(), limit=limit)
    except (ProcReadError, ValueError):
        return None
    if limit and value is not None and value >= UNLIMITED_FROM:
        return None
    return value


class CgroupEvidence:
    """One memory cgroup's OOM kill count, usage and limit, from its directory."""

    def __init__(self, directory: str, version: int):
        events, usage, limit = _CGROUP_FILES[version]
        self.directory = directory
        self._events = ProcFile(os.path.join(directory, events))
        self._usage = ProcFile(os.path.join(directory, usage))
        self._limit = ProcFile(os.path.join(directory, limit))

    def read(self) -> Counts:
        return Counts(_read_int_field(self._events, "oom_kill"), _read_single(self._usage),
                      _read_single(self._limit, limit=True))

    def close(self) -> None:
        for proc_file in (self._events, self._usage, self._limit):
            proc_file.close()


class NodeEvidence:
    """The node's OOM kill count (/proc/vmstat `oom_kill`)."""

    def __init__(self, proc_root: str = "/proc"):
        self._vmstat = ProcFile(os.path.join(proc_root, "vmstat"))

    def oom_kills(self) -> int | None:
        try:
            text = self._vmstat.read()
        except ProcReadError:
            return None
        for line in text.splitlines():
            if line.startswith(b"oom_kill "):
                try:
                    return int(line.split()[1])
                except (IndexError, ValueError):
                    return None
        return None

    def close(self) -> None:
        self._vmstat.close()
