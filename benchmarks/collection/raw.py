"""The variants timed without the SDK: `CensusReader.take()`, psutil's pair of calls, a bare
`os.pread` of each /proc file the census reads (kept-open fd), the census's parsing of those
texts, and open/read/close of smaps_rollup (as psutil reads it).

The /proc reads here are raw on purpose: timing the raw cost of each file is the point."""

from __future__ import annotations

import os

import psutil

from yeto_otel.census import CensusReader, Source
from yeto_otel.proc import parse_kb_fields
from yeto_otel.settings import Settings

from .variants import ALLOCATOR_REF, Variant


def setup_raw() -> list[Variant]:
    census_reader = CensusReader.from_settings(Settings(host_allocator=ALLOCATOR_REF), node_metrics=True)
    proc = psutil.Process()

    def psutil_pair():
        proc.memory_full_info()
        psutil.virtual_memory()

    fds = {name: os.open(path, os.O_RDONLY | os.O_CLOEXEC) for name, path in (
        ("smaps_rollup", "/proc/self/smaps_rollup"), ("status", "/proc/self/status"),
        ("meminfo", "/proc/meminfo"))}

    def pread(fd):
        return lambda: os.pread(fd, 8192, 0)

    def read_smaps_rollup_open_close():
        with open("/proc/self/smaps_rollup", "rb") as f:
            f.read()

    # The census's own parsing, on texts read once now (parsing cost without the reads).
    wanted: dict[str, dict[bytes, str]] = {}
    for m in census_reader.metrics:
        if m.source in (Source.STATUS, Source.SMAPS_ROLLUP, Source.MEMINFO):
            wanted.setdefault(m.source.name, {})[m.field.encode()] = m.name
    texts = {"STATUS": os.pread(fds["status"], 8192, 0),
             "SMAPS_ROLLUP": os.pread(fds["smaps_rollup"], 8192, 0),
             "MEMINFO": os.pread(fds["meminfo"], 8192, 0)}

    def parse_three():
        for key, text in texts.items():
            parse_kb_fields(key, text, wanted[key])

    def close():
        census_reader.close()
        for fd in fds.values():
            os.close(fd)

    return [
        Variant("take", "raw: CensusReader.take()", census_reader.take, close),
        Variant("psutil_raw", "raw: memory_full_info() + virtual_memory()", psutil_pair),
        Variant("pread_smaps", "raw: os.pread smaps_rollup (kept-open fd)", pread(fds["smaps_rollup"])),
        Variant("pread_status", "raw: os.pread status", pread(fds["status"])),
        Variant("pread_meminfo", "raw: os.pread meminfo", pread(fds["meminfo"])),
        Variant("parse", "raw: census parsing of the 3 texts (no read)", parse_three),
        Variant("open_smaps", "raw: open/read/close smaps_rollup", read_smaps_rollup_open_close),
        Variant("mfi", "raw: memory_full_info() alone", proc.memory_full_info),
    ]

