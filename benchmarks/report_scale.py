#!/usr/bin/env python
"""`yeto-otel report` on a synthetic job of 8 ranks exporting the census every 10 s, for 1, 6
and 24 hours, against a bare `json.loads` pass over the same lines, in the same run.

Run by hand (not a test):

    python benchmarks/report_scale.py                  # 1 h, 6 h and 24 h of 8 ranks at 10 s
    python benchmarks/report_scale.py --hours 24 --keep DIR   # keep the synthetic files

Each size: the files are written (`telemetry_day`: lines templated from a real export of the
project's own writer), then, each in a child process of its own, timed by the wall clock and
measured by the child's own `ru_maxrss` (os.wait4):

* bare json.loads  read every line of the metrics files and `json.loads` it, nothing else
                   (the floor of any reader that parses the lines in Python);
* yeto-otel report the command as a user runs it (`python -m yeto_otel.cli report DIR -o F`):
                   interpreter start, reading, downsampling, drawing and writing the page.

Targets (issue: "a report that reads any amount"): report time at most 4x the bare pass,
peak RSS at most 512 MiB, page at most 10 MB, at 24 h. The synthetic files are deleted at the
end unless --keep is given.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # telemetry_day and hostinfo beside

from telemetry_day import template_batch, write_day  # noqa: E402

_BARE = """
import json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("metrics-*.jsonl")):
    with open(path, "rb") as handle:
        for line in handle:
            json.loads(line)
"""
TARGETS = {"ratio": 4.0, "rss_mib": 512, "page_mb": 10.0}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hours", default="1,6,24", help="sizes, in hours of exports (1,6,24)")
    p.add_argument("--ranks", type=int, default=8, help="ranks (default 8)")
    p.add_argument("--interval", type=float, default=10.0,
                   help="seconds between exports (default 10, the SDK's default is 60)")
    p.add_argument("--keep", metavar="DIR", help="write the files under DIR and keep them")
    return p.parse_args(argv)


def _child(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MiB, stderr) of one child process."""
    began = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({child.returncode}): {stderr[-2000:]}")
    return wall, usage.ru_maxrss / 1024, stderr  # ru_maxrss is in KiB on Linux


def measure(directory: Path, out: Path) -> dict:
    bare_s, bare_rss, _ = _child([sys.executable, "-c", _BARE, str(directory)])
    report_s, report_rss, stderr = _child([sys.executable, "-m", "yeto_otel.cli", "report",
                                          str(directory), "-o", str(out)])
    size = sum(p.stat().st_size for p in directory.glob("metrics-*.jsonl"))
    return dict(input_mb=size / 1e6, bare_s=bare_s, bare_rss=bare_rss, report_s=report_s,
                report_rss=report_rss, page_mb=out.stat().st_size / 1e6,
                ratio=report_s / bare_s, progress=stderr.count("yeto-otel: report:"))


def table(rows: list[tuple[float, dict]], ranks: int, interval: float) -> str:
    lines = [f"| hours ({ranks} ranks, {interval:g} s) | metrics | bare json.loads | "
             "yeto-otel report | ratio | report peak RSS | page | progress lines |",
             "|---|---|---|---|---|---|---|---|"]
    for hours, r in rows:
        lines.append(f"| {hours:g} | {r['input_mb']:.0f} MB | {r['bare_s']:.2f} s | "
                     f"{r['report_s']:.2f} s | {r['ratio']:.2f}x | {r['report_rss']:.0f} MiB | "
                     f"{r['page_mb']:.1f} MB | {r['progress']} |")
    return "\n".join(lines)


def verdict(hours: float, r: dict) -> str:
    held = (r["ratio"] <= TARGETS["ratio"] and r["report_rss"] <= TARGETS["rss_mib"]
            and r["page_mb"] <= TARGETS["page_mb"])
    return (f"{hours:g} h: ratio {r['ratio']:.2f}x (target <= {TARGETS['ratio']:g}x), peak RSS "
            f"{r['report_rss']:.0f} MiB (<= {TARGETS['rss_mib']}), page {r['page_mb']:.1f} MB "
            f"(<= {TARGETS['page_mb']:g}): {'met' if held else 'NOT MET'}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [float(h) for h in args.hours.split(",")]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="report-scale-"))
    rows = []
    try:
        print("templating from a real export ...", file=sys.stderr, flush=True)
        template = template_batch()
        for hours in sizes:
            directory = root / f"{hours:g}h"
            written = write_day(directory, template, hours=hours, ranks=args.ranks,
                                interval_s=args.interval)
            print(f"{hours:g} h: {written / 1e6:.0f} MB written; measuring ...",
                  file=sys.stderr, flush=True)
            rows.append((hours, measure(directory, root / f"report-{hours:g}h.html")))
            if not args.keep:
                shutil.rmtree(directory)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows, args.ranks, args.interval))
    print()
    if len(rows) > 1:
        print(slope(rows))
    for hours, r in rows:
        if hours >= 24 or hours == max(sizes):  # the targets are for a day; less shows the slope
            print(verdict(hours, r))
    return 0


def slope(rows: list[tuple[float, dict]]) -> str:
    """Seconds per 100 MB between the smallest and the largest size: what each more hour
    costs, without the fixed cost (interpreter, imports, drawing the page)."""
    (_, small), (_, large) = rows[0], rows[-1]
    mb = (large["input_mb"] - small["input_mb"]) / 100
    report_s = (large["report_s"] - small["report_s"]) / mb
    bare_s = (large["bare_s"] - small["bare_s"]) / mb
    return (f"slope: report {report_s:.2f} s per 100 MB, bare json.loads {bare_s:.2f} s per "
            f"100 MB ({report_s / bare_s:.2f}x); fixed cost about "
            f"{small['report_s'] - small['input_mb'] / 100 * report_s:.2f} s")


if __name__ == "__main__":
    raise SystemExit(main())
