#!/usr/bin/env python
"""Time one full collection of the host-memory census against psutil, in the same run.

Run by hand (not a test):

    python benchmarks/census_collection.py               # resident-size axis (the default)
    python benchmarks/census_collection.py --both        # 0 and ~2000 extra mappings, in children
    python benchmarks/census_collection.py --mappings 0  # one process size, in this process
    python benchmarks/census_collection.py --profile N   # cProfile of N census collections

The default run is the resident-size axis (`collection/resident.py`): a collection, a step-log
record and psutil's `memory_full_info()` + `virtual_memory()` with 0, 1, 4 and 8 GiB of private
anonymous memory resident in 4 KiB pages and in transparent huge pages, one child process per
size, and the smaps_rollup slope per GiB extrapolated to 60 GiB. The variants below are the
per-part breakdown of `--both` / `--mappings`.

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

The parts live beside this script in `collection/` (variants, raw reads, mappings, timing,
report); this script is the entry point (and, with `--both`, of its two child processes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # collection/ and hostinfo beside this

from collection import resident, resident_report  # noqa: E402
from collection.report import describe, markdown  # noqa: E402
from collection.timing import machine, measure, profile  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="0,1,4,8",
                   help="resident GiB of the default run (default 0,1,4,8)")
    p.add_argument("--pages", default="4k,huge", help="4k, huge or both (default 4k,huge)")
    p.add_argument("--seconds", type=float, default=15.0,
                   help="timed seconds per size in the default run (default 15)")
    p.add_argument("--max-passes", type=int, default=5000,
                   help="at most this many passes per size in the default run (default 5000)")
    p.add_argument("--resident-child", nargs=2, metavar=("GIB", "PAGES"),
                   help=argparse.SUPPRESS)  # one size, in this process, JSON out
    p.add_argument("--mappings", type=int, default=None,
                   help="extra 4 KiB file mappings to create before measuring (the variants "
                        "breakdown, in this process)")
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
    return p.parse_args(argv)


def run_both(args: argparse.Namespace) -> list[dict]:
    """--mappings 0 and --mappings BOTH_MAPPINGS, each in a child process (this script)."""
    results = []
    for n in (0, args.both_mappings):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--json", "--mappings", str(n),
               "--rounds", str(args.rounds), "--repeat", str(args.repeat),
               "--warmup", str(args.warmup)]
        print(f"running: {' '.join(cmd)}", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
        results.append(json.loads(done.stdout))
    return results


def run_resident(args: argparse.Namespace) -> int:
    """Every size of the resident axis in a child process of its own; then the report."""
    sizes = [int(x) for x in args.sizes.split(",")]
    pages = args.pages.split(",")
    runs = [(0, "4k")] if 0 in sizes else []
    runs += [(gib, kind) for kind in pages for gib in sizes if gib]
    results = []
    for gib, kind in runs:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--resident-child", str(gib), kind,
               "--seconds", str(args.seconds), "--max-passes", str(args.max_passes)]
        print(f"running: {' '.join(cmd)}", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
        results.append(json.loads(done.stdout))
    print(resident_report.describe(results, machine(), resident.thp_setting()))
    print()
    print(resident_report.table(results))
    print()
    print(resident_report.targets(results))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.resident_child:
        gib, kind = args.resident_child
        print(json.dumps(resident.measure_size(int(gib), kind, args.seconds, args.max_passes)))
        return 0
    if args.profile:
        profile(args.mappings or 0, args.profile)
        return 0
    if args.both:
        results = run_both(args)
    elif args.mappings is None:
        return run_resident(args)
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
