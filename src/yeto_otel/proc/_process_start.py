"""When a process started, in wall-clock time: the kernel's start time of the process (in clock
ticks since boot, /proc/<pid>/stat field 22) plus the boot time (/proc/stat `btime`).

A new process is the only thing that changes it: a value that moves is a restart, whatever its
memory does (semantic conventions: resource `process.creation.time`). Precise to a clock tick
(10 ms at the usual 100 Hz) plus the boot time's second.
"""

from __future__ import annotations

import os
import time

__all__ = ["process_start_ns", "process_started_after_boot_s", "process_uptime_s"]

_TICKS = os.sysconf("SC_CLK_TCK")
# Where the uptime counts from when /proc/self/stat cannot be read: when this module was
# first imported in the process (under opentelemetry-instrument, the interpreter's start).
_IMPORTED_AFTER_BOOT_S = time.clock_gettime(time.CLOCK_BOOTTIME)
_started: tuple[int, float] | None = None  # (pid, seconds after boot), read once per process


def process_started_after_boot_s(pid: int | str = "self", proc_root: str = "/proc") -> float:
    """Seconds from boot to the start of process `pid` (to a clock tick); its uptime is
    CLOCK_BOOTTIME now minus this, which no change of the wall clock moves. Raises OSError or
    ValueError when /proc/<pid>/stat cannot be read or parsed."""
    with open(os.path.join(proc_root, str(pid), "stat"), "rb") as f:
        stat = f.read()
    try:
        # The command name (field 2) may hold spaces and parentheses: count after its last ')'.
        return int(stat[stat.rindex(b")") + 2:].split()[19]) / _TICKS
    except IndexError:
        raise ValueError(f"{proc_root}/{pid}/stat has no start time") from None


def process_uptime_s() -> float:
    """How long this process has been running, in seconds, on the boot clock (no change of the
    wall clock moves it). Its start is read once per process (a forked child reads its own);
    without /proc, from when yeto-otel was first imported in it. Never raises."""
    global _started
    pid = os.getpid()
    if _started is None or _started[0] != pid:
        try:
            after_boot = process_started_after_boot_s()
        except (OSError, ValueError):
            after_boot = _IMPORTED_AFTER_BOOT_S if _started is None else \
                time.clock_gettime(time.CLOCK_BOOTTIME)
        _started = (pid, after_boot)
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - _started[1])


def process_start_ns(pid: int | str = "self", proc_root: str = "/proc") -> int | None:
    """The start of process `pid` in nanoseconds since the epoch; None when it cannot be read."""
    try:
        after_boot = process_started_after_boot_s(pid, proc_root)
        with open(os.path.join(proc_root, "stat"), "rb") as f:
            boot = next(line for line in f if line.startswith(b"btime "))
        return int(boot.split()[1]) * 1_000_000_000 + round(after_boot * 1_000_000_000)
    except (OSError, ValueError, IndexError, StopIteration):
        return None
