#!/usr/bin/env python
"""Time one full collection of the host-memory census against psutil, in the same run.

Run by hand (not a test):

    python benchmarks/census_collection.py --both        # 0 and ~2000 extra mappings, in children
    python benchmarks/census_collection.py --mappings 0  # one process size, in this process
    python benchmarks/census_collection.py --profile     # cProfile of census collections

What one timed call is, per variant (all interleaved call by call in one process):

* census          `InMemoryMetricReader.get_metrics_data()` with `HostMemoryInstrumentor`
                  instrumented (every process, node, allocator and error instrument observed;
                  the allocator is `yeto_otel.testing:realistic`, with `.freed` > 0).
* anchor A        same SDK and reader, the same six process/node instruments (same types)
                  fed by ONE `psutil.Process().memory_full_info()` + ONE
                  `psutil.virtual_memory()` per collection (psutil's best case), plus the same
                  18 allocator instruments fed by the same fake allocator.
* anchor B        like A, but each process/node callback calls psutil itself, as
                  opentelemetry-instrumentation-system-metrics does: the cheapest psutil call
                  that has its value (`memory_info()` for RSS and its stand-in peak,
                  `memory_full_info()` for the two smaps values, `virtual_memory()` for each
                  node value).
* sdk only        the census's instrument set (24 + `yeto.census.errors` with 4 attribute
                  sets) returning constants: what the SDK costs with no reading at all.
* raw             without the SDK: `CensusReader.take()`, `memory_full_info()` +
                  `virtual_memory()`, a bare `os.pread` of each /proc file the census reads
                  (kept-open fd), the census's parsing of those texts, and open/read/close of
                  smaps_rollup (as psutil reads it).

Medians are in microseconds; the ratios are what count (these machines are noisy).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import mmap
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Callable

import psutil
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from yeto_otel.census import CENSUS, CENSUS_ERRORS, CensusReader, Instrument, Source
from yeto_otel.instrumentation import HostMemoryInstrumentor
from yeto_otel.proc import parse_kb_fields
from yeto_otel.settings import Settings
from yeto_otel.testing import HostAllocatorStandIn

PAGE = mmap.PAGESIZE

# A CUDA build's host allocator stats (`.freed` > 0, so every `.current` is a gauge).
ALLOCATOR_REF = "yeto_otel.testing:realistic"


_PROCESS_NODE = tuple(m for m in CENSUS if m.source is not Source.ALLOCATOR)
_ALLOCATOR = tuple(m for m in CENSUS if m.source is Source.ALLOCATOR)
assert len(_PROCESS_NODE) == 6 and len(_ALLOCATOR) == 18


def _creator(meter, instrument: Instrument):
    return {
        Instrument.UP_DOWN_COUNTER: meter.create_observable_up_down_counter,
        Instrument.GAUGE: meter.create_observable_gauge,
        Instrument.COUNTER: meter.create_observable_counter,
    }[instrument]


# ---------------------------------------------------------------------------------------------
# Variants. Each set-up returns (timed callable, teardown, sanity-check callable).

class Variant:
    def __init__(self, key: str, label: str, call: Callable[[], object],
                 close: Callable[[], None] = lambda: None):
        self.key, self.label, self.call, self.close = key, label, call, close
        self.samples: list[int] = []
        self.round_medians: list[float] = []


def _points(data) -> tuple[int, int]:
    metrics = points = 0
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                metrics += 1
                points += len(m.data.data_points)
    return metrics, points


def setup_census() -> Variant:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrumentor = HostMemoryInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:  # a singleton: clear an earlier set-up
        instrumentor.uninstrument()
    instrumentor.instrument(meter_provider=provider, settings=Settings(
        host_allocator=ALLOCATOR_REF, node_metrics="on"))

    def close() -> None:
        instrumentor.uninstrument()
        provider.shutdown()

    return Variant("census", "census (HostMemoryInstrumentor)", reader.get_metrics_data, close)


def _allocator_callbacks(counter: list[int]):
    """The 18 allocator instruments, one fake-allocator query shared per collection."""
    state: dict = {}
    first = _ALLOCATOR[0].name

    def make(m):
        field = m.field

        def cb(_o: CallbackOptions):
            if m.name == first:
                counter[1] += 1
                state["stats"] = HostAllocatorStandIn.realistic_stats()
            return [Observation(state["stats"][field])]
        return cb
    return {m.name: make(m) for m in _ALLOCATOR}


def _register_anchor(meter, callback_for, counter: list[int]) -> None:
    """The six process/node instruments with the given callbacks, and the allocator's 18."""
    for m in _PROCESS_NODE:
        _creator(meter, m.instrument)(m.name, callbacks=[callback_for(m)], unit=m.unit)
    alloc = _allocator_callbacks(counter)
    for m in _ALLOCATOR:
        _creator(meter, m.instrument)(m.name, callbacks=[alloc[m.name]], unit=m.unit)


def setup_anchor_a(counter: list[int]) -> Variant:
    """One memory_full_info() + one virtual_memory() per collection, shared by six callbacks."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench.anchor_a")
    proc = psutil.Process()
    shared: dict = {}
    # psutil has no VmHWM, Anonymous or Private_Dirty: stand-ins of the same cost (values are
    # not compared, only the reads). The first callback the SDK calls refreshes the reads
    # (the SDK calls callbacks in registration order; checked by the call counter).
    pick = {
        "yeto.process.memory.rss": lambda: shared["full"].rss,
        "yeto.process.memory.rss_peak": lambda: shared["full"].rss,
        "yeto.process.memory.anonymous": lambda: shared["full"].uss,
        "yeto.process.memory.private_dirty": lambda: shared["full"].pss,
        "yeto.node.memory.available": lambda: shared["vm"].available,
        "yeto.node.memory.anon_pages": lambda: shared["vm"].used,
    }
    first = _PROCESS_NODE[0].name

    def make(m):
        value = pick[m.name]

        def cb(_o: CallbackOptions):
            if m.name == first:
                counter[0] += 1
                shared["full"] = proc.memory_full_info()
                shared["vm"] = psutil.virtual_memory()
            return [Observation(value())]
        return cb

    _register_anchor(meter, make, counter)
    return Variant("anchor_a", "anchor A: psutil, one call each", reader.get_metrics_data,
                   provider.shutdown)


def setup_anchor_b(counter: list[int]) -> Variant:
    """Each callback calls psutil itself (contrib system-metrics pattern)."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench.anchor_b")
    proc = psutil.Process()

    def counted(fn):
        def wrapped():
            counter[0] += 1
            return fn()
        return wrapped

    pick = {
        "yeto.process.memory.rss": counted(lambda: proc.memory_info().rss),
        "yeto.process.memory.rss_peak": counted(lambda: proc.memory_info().rss),
        "yeto.process.memory.anonymous": counted(lambda: proc.memory_full_info().uss),
        "yeto.process.memory.private_dirty": counted(lambda: proc.memory_full_info().pss),
        "yeto.node.memory.available": counted(lambda: psutil.virtual_memory().available),
        "yeto.node.memory.anon_pages": counted(lambda: psutil.virtual_memory().used),
    }

    def make(m):
        value = pick[m.name]

        def cb(_o: CallbackOptions):
            return [Observation(value())]
        return cb

    _register_anchor(meter, make, counter)
    return Variant("anchor_b", "anchor B: psutil, contrib pattern", reader.get_metrics_data,
                   provider.shutdown)


def setup_sdk_only() -> Variant:
    """The census's exact instrument set, observing constants: the SDK's share of a collection."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench.sdk_only")
    for m in CENSUS:
        value = 123_456_789

        def cb(_o: CallbackOptions, value=value):
            return [Observation(value)]
        _creator(meter, m.instrument)(m.name, callbacks=[cb], unit=m.unit)
    sources = ("allocator", "meminfo", "smaps_rollup", "status")

    def errors(_o: CallbackOptions):
        return [Observation(0, {"source": s}) for s in sources]
    _creator(meter, CENSUS_ERRORS.instrument)(CENSUS_ERRORS.name, callbacks=[errors],
                                              unit=CENSUS_ERRORS.unit)
    return Variant("sdk_only", "SDK only: census instruments, constant values",
                   reader.get_metrics_data, provider.shutdown)


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


def sanity(variants: dict[str, Variant], counter: list[int]) -> dict:
    """Check that every SDK variant exports what it should and reads what it should."""
    out = {}
    for key in ("census", "anchor_a", "anchor_b", "sdk_only"):
        v = variants[key]
        before = list(counter)
        data = v.call()
        metrics, points = _points(data)
        out[key] = {"metrics": metrics, "points": points,
                    "psutil_calls": counter[0] - before[0], "allocator_queries": counter[1] - before[1]}
    if out["census"]["metrics"] != 25 or out["census"]["points"] != 28:
        raise SystemExit(f"census exported {out['census']}; expected 25 metrics, 28 points "
                         "(24 census + errors with 4 sources): the set-up is wrong")
    if out["anchor_a"]["psutil_calls"] != 1 or out["anchor_b"]["psutil_calls"] != 6:
        raise SystemExit(f"psutil call counts are not as designed: {out}")
    census = HostMemoryInstrumentor().census
    # smaps_rollup read once per collection, not once per instrument.
    pf = census.reader.proc_files[Source.SMAPS_ROLLUP]
    n0 = pf.reads
    variants["census"].call()
    variants["census"].call()
    out["census"]["smaps_rollup_reads_per_collection"] = (pf.reads - n0) / 2
    return out


# ---------------------------------------------------------------------------------------------
# Mappings: ~N separate 4 KiB read-only pages of one temp file, each touched.

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]


def vma_count() -> int:
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


def make_mappings(n: int) -> list[int]:
    """mmap n single pages (ctypes, so no fd is kept per mapping). Page i maps file page 2*i:
    non-contiguous offsets, so the kernel cannot merge neighbouring mappings into one VMA."""
    if n <= 0:
        return []
    fd, path = tempfile.mkstemp(prefix="census-bench-")
    try:
        os.ftruncate(fd, 2 * n * PAGE)
        os.pwrite(fd, b"x" * PAGE, 0)
        addrs = []
        for i in range(n):
            addr = _libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 2 * i * PAGE)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap #{i} failed")
            ctypes.string_at(addr, 1)  # touch: one resident page per mapping
            addrs.append(addr)
        return addrs
    finally:
        os.close(fd)
        os.unlink(path)


# ---------------------------------------------------------------------------------------------
# Timing

def run_rounds(variants: list[Variant], rounds: int, repeat: int, warmup: int) -> None:
    """Interleave call by call: each round makes `repeat` passes, each pass calls every variant
    once, in an order rotated every pass. The machine's speed drifts (on the 2-vCPU machines of
    this workplace a /proc read is ~2x slower on one vCPU than the other, in spells of tens of
    milliseconds): variants timed next to each other see the same state, so their ratio holds
    even when the absolute numbers move."""
    clock = time.perf_counter_ns
    n = len(variants)
    for v in variants:
        for _ in range(warmup):
            v.call()
    for r in range(rounds):
        gc.collect()
        per_round: list[list[int]] = [[] for _ in variants]
        for i in range(repeat):
            shift = (r * repeat + i) % n
            for j in range(n):
                k = (j + shift) % n
                call = variants[k].call
                t0 = clock()
                call()
                per_round[k].append(clock() - t0)
        for v, samples in zip(variants, per_round):
            v.samples.extend(samples)
            v.round_medians.append(statistics.median(samples) / 1000)


def machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "opentelemetry-sdk": metadata.version("opentelemetry-sdk"),
        "psutil": psutil.__version__,
        "yeto-otel": metadata.version("yeto-otel"),
    }


RATIOS = (
    # (numerator keys, summed), denominator key, label
    (("census",), "anchor_a", "census ÷ anchor A (target ≤ 0.7)"),
    (("census",), "anchor_b", "census ÷ anchor B (target ≤ 0.7)"),
    (("sdk_only", "pread_smaps"), "anchor_a",
     "floor: (SDK only + bare smaps_rollup pread) ÷ anchor A"),
    (("sdk_only", "pread_status", "pread_meminfo"), "anchor_a",
     "floor without smaps_rollup: (SDK only + status + meminfo preads) ÷ anchor A"),
    (("take",), "psutil_raw", "take() ÷ memory_full_info()+virtual_memory()"),
    (("pread_smaps",), "psutil_raw", "bare smaps_rollup pread ÷ memory_full_info()+virtual_memory()"),
)


def measure(mappings: int, rounds: int, repeat: int, warmup: int) -> dict:
    vmas_before = vma_count()
    keep = make_mappings(mappings)
    vmas = vma_count()
    counter = [0, 0]  # psutil calls, allocator queries (anchors only)
    variants = [setup_census(), setup_anchor_a(counter), setup_anchor_b(counter),
                setup_sdk_only(), *setup_raw()]
    by_key = {v.key: v for v in variants}
    checks = sanity(by_key, counter)
    t0 = time.perf_counter()
    run_rounds(variants, rounds, repeat, warmup)
    elapsed = time.perf_counter() - t0
    result = {
        "mappings_requested": mappings, "vmas_before": vmas_before, "vmas": vmas,
        "vmas_after": vma_count(), "rounds": rounds, "repeat": repeat,
        "seconds": round(elapsed, 1), "checks": checks, "machine": machine(),
        "smaps_rollup_bytes": len(open("/proc/self/smaps_rollup", "rb").read()),
        "variants": {}, "ratios": {},
    }
    for v in variants:
        result["variants"][v.key] = {
            "label": v.label,
            "median_us": statistics.median(v.samples) / 1000,
            "p10_us": _quantile(v.samples, 0.10) / 1000,
            "p90_us": _quantile(v.samples, 0.90) / 1000,
        }
    for nums, den, label in RATIOS:
        b = by_key[den]
        num_rounds = [sum(x) for x in zip(*(by_key[k].round_medians for k in nums))]
        num_samples = [sum(x) for x in zip(*(by_key[k].samples for k in nums))]
        per_round = [x / y for x, y in zip(num_rounds, b.round_medians)]
        num_median = sum(result["variants"][k]["median_us"] for k in nums)
        result["ratios"]["+".join(nums) + "/" + den] = {
            "label": label,
            "of_medians": num_median / result["variants"][den]["median_us"],
            "per_round_min": min(per_round), "per_round_max": max(per_round),
            "per_round_median": statistics.median(per_round),
            # calls of one pass run back to back: the ratio of neighbours cancels drift
            "paired_median": statistics.median(x / y for x, y in zip(num_samples, b.samples)),
        }
    for v in variants:
        v.close()
    del keep
    return result


def _quantile(samples: list[int], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


# ---------------------------------------------------------------------------------------------
# Reports

ROWS = ("census", "anchor_a", "anchor_b", "sdk_only", "take", "psutil_raw", "mfi",
        "pread_smaps", "open_smaps", "pread_status", "pread_meminfo", "parse")


def markdown(results: list[dict]) -> str:
    head = "| variant (one call) |"
    rule = "|---|"
    for r in results:
        head += f" median µs, {_size(r)} | p10–p90 µs |"
        rule += "---:|---:|"
    lines = [head, rule]
    for key in ROWS:
        line = f"| {results[0]['variants'][key]['label']} |"
        for r in results:
            v = r["variants"][key]
            line += f" {v['median_us']:.1f} | {v['p10_us']:.0f}–{v['p90_us']:.0f} |"
        lines.append(line)
    lines += ["", "| ratio |" + "".join(f" {_size(r)}: of medians | paired | per-round min–max |"
                                       for r in results),
              "|---|" + "---:|---:|---:|" * len(results)]
    for nums, den, label in RATIOS:
        line = f"| {label} |"
        for r in results:
            x = r["ratios"]["+".join(nums) + "/" + den]
            line += (f" **{x['of_medians']:.2f}** | {x['paired_median']:.2f} | "
                     f"{x['per_round_min']:.2f}–{x['per_round_max']:.2f} |")
        lines.append(line)
    lines += ["", "| derived (from the medians above) |" + "".join(f" {_size(r)} µs |" for r in results),
              "|---|" + "---:|" * len(results)]
    derived = (
        ("census − SDK only (the census's reads + glue inside the SDK)",
         lambda v: v["census"] - v["sdk_only"]),
        ("anchor A − SDK only (psutil reads + glue; anchors have no errors instrument)",
         lambda v: v["anchor_a"] - v["sdk_only"]),
        ("take() − the 3 bare preads (parsing, Quantity objects, allocator)",
         lambda v: v["take"] - v["pread_smaps"] - v["pread_status"] - v["pread_meminfo"]),
        ("census − take() − SDK only (callback/snapshot glue)",
         lambda v: v["census"] - v["take"] - v["sdk_only"]),
    )
    for label, fn in derived:
        line = f"| {label} |"
        for r in results:
            med = {k: d["median_us"] for k, d in r["variants"].items()}
            line += f" {fn(med):.1f} |"
        lines.append(line)
    return "\n".join(lines)


def _size(r: dict) -> str:
    return f"{r['vmas']} VMAs" + (f" (+{r['mappings_requested']} mapped pages)"
                                   if r["mappings_requested"] else "")


def describe(results: list[dict]) -> str:
    m = results[0]["machine"]
    out = [f"machine: nproc={m['nproc']} cpu={m['cpu']!r} kernel={m['kernel']} "
           f"python={m['python']} opentelemetry-sdk={m['opentelemetry-sdk']} "
           f"psutil={m['psutil']} yeto-otel={m['yeto-otel']}"]
    for r in results:
        out.append(f"{_size(r)}: vmas before mapping={r['vmas_before']}, after mapping="
                   f"{r['vmas']}, at end={r['vmas_after']}; smaps_rollup text "
                   f"{r['smaps_rollup_bytes']} B; {r['rounds']} rounds x {r['repeat']} calls "
                   f"per variant, {r['seconds']} s; checks: {json.dumps(r['checks'])}")
    return "\n".join(out)


def profile(mappings: int, collections: int) -> None:
    import cProfile
    import pstats
    keep = make_mappings(mappings)
    print(f"VMAs: {vma_count()}")
    census = setup_census()
    for _ in range(50):
        census.call()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(collections):
        census.call()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(25)
    census.close()
    del keep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mappings", type=int, default=0,
                   help="extra 4 KiB file mappings to create before measuring (default 0)")
    p.add_argument("--both", action="store_true",
                   help="run --mappings 0 and --mappings BOTH_MAPPINGS in child processes")
    p.add_argument("--both-mappings", type=int, default=2000, help="default 2000")
    p.add_argument("--rounds", type=int, default=20, help="rounds (default 20); the variants are interleaved call by call within each")
    p.add_argument("--repeat", type=int, default=200,
                   help="passes per round, each calling every variant once (default 200)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--json", action="store_true", help="print the result as JSON (for --both)")
    p.add_argument("--profile", type=int, metavar="N", default=0,
                   help="instead of timing, cProfile N census collections and print the top")
    args = p.parse_args(argv)

    if args.profile:
        profile(args.mappings, args.profile)
        return 0
    if args.both:
        results = []
        for n in (0, args.both_mappings):
            cmd = [sys.executable, os.path.abspath(__file__), "--json", "--mappings", str(n),
                   "--rounds", str(args.rounds), "--repeat", str(args.repeat),
                   "--warmup", str(args.warmup)]
            print(f"running: {' '.join(cmd)}", file=sys.stderr, flush=True)
            done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
            results.append(json.loads(done.stdout))
    else:
        results = [measure(args.mappings, args.rounds, args.repeat, args.warmup)]
        if args.json:
            print(json.dumps(results[0]))
            return 0
    print(describe(results))
    print()
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
