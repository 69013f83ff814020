"""The resident-size axis: the census with 0, 1, 4, 8 GiB of private anonymous memory resident,
in 4 KiB pages and in transparent huge pages, against psutil at the same size.

One size per child process (this script with `--resident-child GIB PAGES`), so each starts
from the same small process and gives its memory back when it exits. In each, the census's
variants (collection, step log, status) are called once per pass, in an order rotated every
pass, each timed by itself; then, in a second phase, the two page walkers (psutil's pair, the
bare smaps_rollup read) the same way. Apart, because a walk of gigabytes of page tables leaves
the CPU caches cold for whatever runs next, and that is the walker's cost, not the census's:

* collection      `InMemoryMetricReader.get_metrics_data()` with `HostMemoryInstrumentor`
                  instrumented, every instrument (the stand-in CUDA allocator, node metrics on),
                  the default settings: smaps_rollup within YETO_OTEL_SMAPS_BUDGET (0.1 %)
* step log        `add_census_to_step_log({}, rank=0, settings=…)` with the census on, the same
                  allocator; it shares the smaps_rollup budget with the collection above
* psutil pair     `psutil.Process().memory_full_info()` + `psutil.virtual_memory()`
* smaps_rollup    a bare `os.pread` of /proc/self/smaps_rollup on a kept-open fd (the walk
                  the budget paces; its slope per GiB gives the extrapolation)
* status          a bare `os.pread` of /proc/self/status (what the census reads every time)
"""

from __future__ import annotations

import gc
import mmap
import os
import statistics
import time

import psutil

from yeto_otel import add_census_to_step_log
from yeto_otel.proc import (CgroupNotFound, MemoryCgroupFiles, locate_memory_cgroup,
                            read_kb_fields)
from yeto_otel.settings import Settings

from .variants import ALLOCATOR_REF, setup_census

GIB = 1 << 30
MADV_POPULATE_WRITE = 23  # Linux 5.14: fault every page in, writable, in one call
PAGES = {"4k": mmap.MADV_NOHUGEPAGE, "huge": mmap.MADV_HUGEPAGE}
KEYS = ("collection", "step_log", "psutil", "smaps", "status", "cgroup")
_ROLLUP = {b"AnonHugePages": "anon_huge", b"Anonymous": "anonymous", b"Rss": "rss"}


def thp_setting() -> str:
    """/sys/kernel/mm/transparent_hugepage/enabled, e.g. `always [madvise] never`."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().strip()
    except OSError:
        return "unavailable"


def make_resident(gib: int, pages: str) -> mmap.mmap | None:
    """`gib` GiB of private anonymous memory, every page written, in `pages` pages."""
    if gib == 0:
        return None
    size = gib * GIB
    area = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    area.madvise(PAGES[pages])
    try:
        area.madvise(MADV_POPULATE_WRITE)
    except OSError:  # an older kernel: write one byte a page
        for offset in range(0, size, mmap.PAGESIZE):
            area[offset] = 1
    return area


class _Timed:
    def __init__(self, key: str, call):
        self.key, self.call, self.samples = key, call, []


def _variants() -> tuple[list[_Timed], object, callable]:
    census = setup_census()
    step_settings = Settings(step_log_census=True, host_allocator=ALLOCATOR_REF)
    proc = psutil.Process()
    fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC)
           for p in ("/proc/self/smaps_rollup", "/proc/self/status")]

    def psutil_pair():
        proc.memory_full_info()
        psutil.virtual_memory()

    try:  # the bare read of every file of this process's memory cgroup, memory.stat included
        cgroup = MemoryCgroupFiles(locate_memory_cgroup())
    except CgroupNotFound:
        cgroup = None

    def close():
        census.close()
        for fd in fds:
            os.close(fd)
        if cgroup is not None:
            cgroup.close()

    timed = [
        _Timed("collection", census.call),
        _Timed("step_log", lambda: add_census_to_step_log({}, rank=0, settings=step_settings)),
        _Timed("psutil", psutil_pair),
        _Timed("smaps", lambda: os.pread(fds[0], 16384, 0)),
        _Timed("status", lambda: os.pread(fds[1], 16384, 0)),
    ] + ([_Timed("cgroup", cgroup.read)] if cgroup is not None else [])
    return timed, census, close


def _run_passes(timed: list[_Timed], seconds: float, max_passes: int) -> int:
    """Passes over `timed` (order rotated every pass) for `seconds`: at least 5, at most
    `max_passes`."""
    clock = time.perf_counter_ns
    n = len(timed)
    deadline = time.perf_counter() + seconds
    passes = 0
    while passes < max_passes and (passes < 5 or time.perf_counter() < deadline):
        for j in range(n):
            variant = timed[(j + passes) % n]
            t0 = clock()
            variant.call()
            variant.samples.append(clock() - t0)
        passes += 1
    return passes


def measure_size(gib: int, pages: str, seconds: float, max_passes: int) -> dict:
    area = make_resident(gib, pages)
    rollup = read_kb_fields("/proc/self/smaps_rollup", _ROLLUP)
    timed, census, close = _variants()
    from yeto_otel.instrumentation import HostMemoryInstrumentor
    budgeted = HostMemoryInstrumentor().census.reader.smaps_rollup
    for variant in timed:  # warm up; the first census call makes the first budgeted read
        for _ in range(3):
            variant.call()
    reads_before, spent_before = budgeted.reads, budgeted.spent_ns
    gc.collect()
    started = time.perf_counter()
    census_side = [v for v in timed if v.key in ("collection", "step_log", "status", "cgroup")]
    passes = _run_passes(census_side, seconds, max_passes)
    wall = time.perf_counter() - started
    reads_in_window = budgeted.reads - reads_before
    spent_in_window = budgeted.spent_ns - spent_before
    walkers = [v for v in timed if v.key in ("psutil", "smaps")]
    walker_passes = _run_passes(walkers, seconds / 3, max_passes)
    result = {
        "gib": gib, "pages": pages, "passes": passes, "seconds": round(wall, 1),
        "walker_passes": walker_passes,
        "anonymous_bytes": rollup["anonymous"], "anon_huge_bytes": rollup["anon_huge"],
        "rss_bytes": rollup["rss"],
        "budgeted_reads_in_window": reads_in_window,
        "budgeted_read_ms_in_window": spent_in_window / 1e6,
        "budgeted_reads_before": reads_before,
        "budgeted_read_ms_before": spent_before / 1e6,
        "next_budgeted_read_in_s": (budgeted.next_read_ns - budgeted.clock()) / 1e9,
        "variants": {},
    }
    for variant in timed:
        result["variants"][variant.key] = {
            "mean_us": statistics.fmean(variant.samples) / 1000,
            "median_us": statistics.median(variant.samples) / 1000,
            "max_us": max(variant.samples) / 1000,
        }
    close()
    del area
    return result
