"""Readings of the measured processes and of the machine, and facts for the report.

Memory comes from /proc/<pid>/status through the package's parser (`read_kb_fields`). CPU time
comes from /proc/<pid>/stat and /proc/stat, which are not `Key: value` files but lines of
space-separated numbers: each keeps the small parser of its own below.
"""

from __future__ import annotations

import os
import platform

from yeto_otel.proc import read_kb_fields

import hostinfo

CLK_TCK = os.sysconf("SC_CLK_TCK")
_MEMORY = {b"VmRSS": "rss", b"VmHWM": "hwm"}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process. /proc/<pid>/stat is one line of fields; the command name
    (field 2) may hold spaces and parentheses, so fields are counted after the last ')'."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def memory(pid: int) -> dict[str, int]:
    """A process's VmRSS ("rss") and VmHWM ("hwm"), in bytes."""
    return read_kb_fields(f"/proc/{pid}/status", _MEMORY)


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat's first line (`cpu` and the jiffies
    in each state: user nice system idle iowait irq softirq steal ...)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine_info() -> dict:
    versions = {dist: hostinfo.version(dist) for dist in (
        "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc", "grpcio", "yeto-otel",
        "torch")}
    return {"nproc": os.cpu_count(), "cpu": hostinfo.cpu_model(),
            "mem_gib": round(hostinfo.mem_total() / (1 << 30), 1),
            "kernel": platform.release(), "python": platform.python_version(), **versions}
