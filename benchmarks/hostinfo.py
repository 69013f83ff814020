"""Facts about the machine a benchmark ran on, for its report (shared by the scripts here)."""

from __future__ import annotations

from importlib import metadata

from yeto_otel.proc import read_kb_fields


def cpu_model(default: str = "?") -> str:
    """The first `model name` of /proc/cpuinfo.

    A small parser of its own: the value is free text with spaces ("Intel(R) Xeon(R)
    Processor"), and the package's readers give numbers (`read_kb_fields`) or one token
    (`read_raw_field`)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


def mem_total() -> int:
    """MemTotal of /proc/meminfo, in bytes (the package's parser; ProcReadError if unreadable)."""
    return read_kb_fields("/proc/meminfo", {b"MemTotal": "total"})["total"]


def version(dist: str, missing: str | None = None) -> str | None:
    """An installed distribution's version, or `missing`."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return missing
