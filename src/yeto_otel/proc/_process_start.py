"""When a process started, in wall-clock time: the kernel's start time of the process (in clock
ticks since boot, /proc/<pid>/stat field 22) plus the boot time (/proc/stat `btime`).

A new process is the only thing that changes it: a value that moves is a restart, whatever its
memory does (semantic conventions: resource `process.creation.time`). Precise to a clock tick
(10 ms at the usual 100 Hz) plus the boot time's second.
"""

from __future__ import annotations

import os

__all__ = ["process_start_ns"]

_TICKS = os.sysconf("SC_CLK_TCK")


def process_start_ns(pid: int | str = "self", proc_root: str = "/proc") -> int | None:
    """The start of process `pid` in nanoseconds since the epoch; None when it cannot be read."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), "rb") as f:
            stat = f.read()
        with open(os.path.join(proc_root, "stat"), "rb") as f:
            boot = next(line for line in f if line.startswith(b"btime "))
        # The command name (field 2) may hold spaces and parentheses: count after its last ')'.
        start_ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        return int(boot.split()[1]) * 1_000_000_000 + start_ticks * 1_000_000_000 // _TICKS
    except (OSError, ValueError, IndexError, StopIteration):
        return None
