#!/usr/bin/env python
"""Restart benchmark for resume anchors: eager vs mapped vs safetensors, each in a fresh process.

Run by hand (not a test):

    python benchmarks/restart_anchors.py                    # 2 GiB, 1,869 shards, warm cache, 3 reps
    python benchmarks/restart_anchors.py --cold             # also with the page cache dropped
    python benchmarks/restart_anchors.py --size 256MiB --repeat 5

What it does:

* writes one synthetic per-rank anchor file (FP32, `--shards` shards of varied sizes adding up to
  `--size`: about 40% small vector shards -- norms, biases -- and the rest matrices with
  log-normal sizes) with `yeto_otel.anchors.save_resume_anchors` (page-aligned storages), and the
  same tensors with `safetensors.torch.save_file`; both in a temp dir (`--dir`), removed at the
  end unless `--keep`;
* a catch-up touches the shards of one shifted fragment, 1/8 of the shards (`--layout strided`:
  every 8th shard, index % 8 == 3, the default; `--layout contiguous`: the 4th eighth of the
  shards in file order). Touching = reading every element: `t.sum(dtype=torch.float64)` per shard,
  accumulated into a checksum that must be the same in every variant;
* three variants, each in a fresh child process (this script with `--child MODE`), interleaved
  (order rotated every repetition), warm (the file read once before the child starts) and, with
  `--cold`, after `sync` + `echo 1 > /proc/sys/vm/drop_caches`:
    eager        `load_resume_anchors` with YETO_DILOCO_RESUME_ANCHOR_MMAP=0
    mapped       `load_resume_anchors` (default: torch.load(mmap=True))
    safetensors  `safetensors.safe_open(path, framework="pt")` + `get_tensor` of touched shards only
* each child reports: time (load, catch-up, close; perf_counter), its anonymous-memory delta
  (smaps_rollup `Anonymous`, before the load vs after the catch-up, anchors still held), node
  `AnonPages` delta (/proc/meminfo, same two points), peak RSS growth (VmHWM - VmRSS before),
  bytes touched from `ResidencyProbe(path).measure()` vs the summed smaps `Rss` of the file's
  mappings (ground truth, /proc/self/smaps read once), and the cost of one probe measurement
  (median of 20) vs one full /proc/self/smaps read (median of 5), in the same process at the end;
  for eager and mapped also the attributes of the product's `yeto.resume.anchors` span
  (InMemorySpanExporter).

The children run torch with one intra-op thread (`--threads 1`): on a small shared machine a
second OpenMP thread spin-waits whenever another process holds the other core, which made the
same catch-up (same faults, same bytes) take 25x more CPU and wall time in some repetitions
and hid every difference between the variants. The anchors' residency does not depend on it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata

MiB = 1 << 20
GiB = 1 << 30
MODES = ("eager", "mapped", "safetensors")
FRAGMENTS = 8
SHIFTED_FRAGMENT = 3
PT_NAME = "anchors.pt"
ST_NAME = "anchors.safetensors"


# ---------------------------------------------------------------------------------------------
# The synthetic anchor set (computed the same way in parent and children)

def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?i?B?)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 2GiB, 256MiB, 1073741824)")
    unit = (m.group(2) or "").upper().rstrip("B").rstrip("I")
    scale = {"": 1, "K": 1 << 10, "M": MiB, "G": GiB, "T": 1 << 40}[unit]
    return int(float(m.group(1)) * scale)


def shard_numels(total_bytes: int, shards: int, seed: int) -> list[int]:
    """FP32 element counts of `shards` shards adding up to total_bytes // 4: ~40% small vectors
    (1-8 K elements), the rest matrices with log-normal sizes (sigma 1) scaled to fill the rest."""
    rng = random.Random(seed)
    total = total_bytes // 4
    small = [rng.random() < 0.4 for _ in range(shards)]
    if all(small):
        small[0] = False
    numels = [rng.randint(1024, 8192) if s else 0 for s in small]
    weights = [0.0 if s else rng.lognormvariate(0.0, 1.0) for s in small]
    rest = total - sum(numels)
    if rest <= 0:
        raise SystemExit(f"--size {total_bytes} is too small for {shards} shards")
    scale = rest / sum(weights)
    for i, w in enumerate(weights):
        if w:
            numels[i] = max(1, int(w * scale))
    big = max(range(shards), key=lambda i: weights[i])
    numels[big] += total - sum(numels)  # exact total
    return numels


def shard_name(i: int) -> str:
    return f"shard.{i:04d}"


def touched_indices(shards: int, layout: str) -> list[int]:
    if layout == "strided":
        return [i for i in range(shards) if i % FRAGMENTS == SHIFTED_FRAGMENT]
    lo = shards * SHIFTED_FRAGMENT // FRAGMENTS
    hi = shards * (SHIFTED_FRAGMENT + 1) // FRAGMENTS
    return list(range(lo, hi))


# ---------------------------------------------------------------------------------------------
# /proc readings used by the children

def _kb_field(path: str, field: bytes) -> int:
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field!r} not in {path}")


def anonymous() -> int:
    return _kb_field("/proc/self/smaps_rollup", b"Anonymous:")


def node_anon_pages() -> int:
    return _kb_field("/proc/meminfo", b"AnonPages:")


_HEADER = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ (\S+) (\d+)")


def read_smaps() -> bytes:
    with open("/proc/self/smaps", "rb") as f:
        return f.read()


def smaps_rss_of(path: str, text: bytes) -> tuple[int, int]:
    """(summed Rss bytes, number of mappings) of `path`'s mappings in a /proc/self/smaps text."""
    st = os.stat(path)
    dev = (os.major(st.st_dev), os.minor(st.st_dev))
    rss = count = 0
    inside = False
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            major, minor = (int(x, 16) for x in m.group(3).split(b":"))
            inside = int(m.group(4)) == st.st_ino and (major, minor) == dev
            count += inside
        elif inside and line.startswith(b"Rss:"):
            rss += int(line.split()[1]) * 1024
    return rss, count


def _median_time(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# Children

def child_write(args) -> dict:
    import torch
    from safetensors.torch import save_file

    from yeto_otel.anchors import save_resume_anchors

    numels = shard_numels(args.size, args.shards, args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    tensors = {shard_name(i): torch.randn(n, generator=gen, dtype=torch.float32)
               for i, n in enumerate(numels)}
    pt, st = os.path.join(args.dir, PT_NAME), os.path.join(args.dir, ST_NAME)
    t = time.perf_counter()
    save_resume_anchors(pt, tensors)
    t_pt = time.perf_counter() - t
    t = time.perf_counter()
    save_file(tensors, st)
    os.sync()
    t_st = time.perf_counter() - t
    return {"pt": pt, "pt_size": os.path.getsize(pt), "st": st, "st_size": os.path.getsize(st),
            "save_pt_s": t_pt, "save_st_s": t_st}


def child_run(args) -> dict:
    import torch
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from safetensors import safe_open

    from yeto_otel.anchors import load_resume_anchors
    from yeto_otel.proc import ResidencyProbe

    torch.set_num_threads(args.threads)
    mode = args.child
    path = os.path.join(args.dir, ST_NAME if mode == "safetensors" else PT_NAME)
    names = [shard_name(i) for i in touched_indices(args.shards, args.layout)]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rss_before = _kb_field("/proc/self/status", b"VmRSS:")
    gc.collect()

    anon0, node0 = anonymous(), node_anon_pages()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if mode == "safetensors":
        handle = safe_open(path, framework="pt")
        handle.__enter__()
    else:
        handle = load_resume_anchors(path, tracer_provider=provider)
        handle.__enter__()
    t1 = time.perf_counter()
    checksum = 0.0
    held = []
    for name in names:
        # Mapped/eager: the product's tensors. safetensors: get_tensor of this shard only.
        t = handle.get_tensor(name) if mode == "safetensors" else handle.tensors[name]
        held.append(t)  # the old anchors of the fragment stay referenced until it is done
        checksum += float(t.sum(dtype=torch.float64))
    if mode != "safetensors":
        handle.fragment_done(SHIFTED_FRAGMENT)
    t2 = time.perf_counter()
    ru2 = resource.getrusage(resource.RUSAGE_SELF)

    # Measurements, anchors still held (not timed as part of the restart).
    anon1, node1 = anonymous(), node_anon_pages()
    hwm = _kb_field("/proc/self/status", b"VmHWM:")
    probe = ResidencyProbe(path)
    residency = probe.measure()
    smaps_rss, smaps_mappings = smaps_rss_of(path, read_smaps())  # ground truth, read once
    probe_s = _median_time(probe.measure, 20)  # full: rereads /proc/self/maps (as at close)
    # what fragment_done does: the mapping's range kept from the load, pagemap only
    probe_cached_s = _median_time(lambda: probe.measure(rescan=False), 20)
    smaps_s = _median_time(read_smaps, 5)
    vmas = sum(1 for _ in open("/proc/self/maps", "rb"))

    t3 = time.perf_counter()
    del held, t
    handle.__exit__(None, None, None)
    t4 = time.perf_counter()

    spans = {s.name: s for s in exporter.get_finished_spans()}
    span = spans.get("yeto.resume.anchors")
    load_span = spans.get("yeto.resume.anchors.load")
    return {
        "mode": mode, "path": path, "file_size": os.path.getsize(path), "touched_shards": len(names),
        "load_s": t1 - t0, "catchup_s": t2 - t1, "close_s": t4 - t3, "time_s": (t2 - t0) + (t4 - t3),
        "anon_delta": anon1 - anon0, "node_anon_delta": node1 - node0, "peak_rss_growth": hwm - rss_before,
        "probe_mapped": residency.bytes_mapped if residency else None,
        "probe_touched": residency.bytes_touched if residency else None,
        "probe_mappings": residency.mappings if residency else None,
        "smaps_rss": smaps_rss, "smaps_mappings": smaps_mappings,
        "probe_cost_s": probe_s, "probe_cached_cost_s": probe_cached_s, "smaps_cost_s": smaps_s,
        "vmas": vmas,
        "checksum": checksum,
        "cpu_s": (ru2.ru_utime + ru2.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
        "majflt": ru2.ru_majflt - ru0.ru_majflt, "minflt": ru2.ru_minflt - ru0.ru_minflt,
        "span": dict(span.attributes) if span is not None else None,
        "load_span_s": (load_span.end_time - load_span.start_time) / 1e9 if load_span else None,
    }


# ---------------------------------------------------------------------------------------------
# Parent

def drop_caches() -> str | None:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def warm(path: str) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(16 * MiB):
            pass


def run_child(args, mode: str) -> dict:
    env = dict(os.environ)
    env.pop("YETO_DILOCO_RESUME_ANCHOR_MMAP", None)
    if mode == "eager":
        env["YETO_DILOCO_RESUME_ANCHOR_MMAP"] = "0"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--dir", args.dir,
           "--size", str(args.size), "--shards", str(args.shards), "--seed", str(args.seed),
           "--layout", args.layout, "--threads", str(args.threads)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child {mode} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mib(x) -> str:
    return "n/a" if x is None else f"{x / MiB:,.1f}"


def _med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _span_med(rows, attr):
    vals = [r["span"][attr] for r in rows if r.get("span") and attr in r["span"]]
    return statistics.median(vals) if vals else None


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = _kb_field("/proc/meminfo", b"MemTotal:")

    def v(p):
        try:
            return metadata.version(p)
        except metadata.PackageNotFoundError:
            return "?"
    return (f"nproc {os.cpu_count()} ({cpu}), {mem / GiB:.1f} GiB RAM, kernel {platform.release()}, "
            f"Python {platform.python_version()}, torch {v('torch')}, safetensors {v('safetensors')}, "
            f"opentelemetry-sdk {v('opentelemetry-sdk')}, yeto-otel {v('yeto-otel')}")


def report(results: dict, info: dict, args) -> None:
    size = info["pt_size"]
    numels = shard_numels(args.size, args.shards, args.seed)
    idx = touched_indices(args.shards, args.layout)
    payload = sum(numels[i] for i in idx) * 4
    pages = sum(-(-numels[i] * 4 // 4096) for i in idx) * 4096
    print(f"\nanchor file: {info['pt_size']:,} B ({info['pt_size'] / GiB:.3f} GiB, save_resume_anchors, "
          f"{info['save_pt_s']:.1f} s to write); safetensors: {info['st_size']:,} B "
          f"({info['save_st_s']:.1f} s); {args.shards} shards, {len(idx)} touched ({args.layout}), "
          f"payload of touched shards {_mib(payload)} MiB ({payload / size:.1%} of the file), "
          f"their whole pages {_mib(pages)} MiB")
    for cache, by_mode in results.items():
        print(f"\n### {cache} page cache: medians of {args.repeat} fresh processes per variant\n")
        print("| variant | restart s (load + catch-up + close) | load s | catch-up s | close s "
              "| anonymous Δ MiB (% of file) | node AnonPages Δ MiB | peak RSS growth MiB "
              "| touched: probe MiB | smaps Rss MiB (mappings) | probe − smaps | probe cost ms "
              "| smaps read ms | cost ratio | CPU s (load + catch-up) | major / minor faults |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for mode in MODES:
            rows = by_mode.get(mode)
            if not rows:
                continue
            diffs = [(r["probe_touched"] - r["smaps_rss"]) / r["smaps_rss"] for r in rows
                     if r["probe_touched"] is not None and r["smaps_rss"]]
            diff = f"{statistics.median(diffs):+.2%}" if diffs else ("0 (no mapping)" if
                                                                      not _med(rows, "smaps_rss") else "n/a")
            pc, sc = _med(rows, "probe_cost_s"), _med(rows, "smaps_cost_s")
            anon = _med(rows, "anon_delta")
            print(f"| {mode} | {_med(rows, 'time_s'):.3f} | {_med(rows, 'load_s'):.3f} "
                  f"| {_med(rows, 'catchup_s'):.3f} | {_med(rows, 'close_s'):.3f} "
                  f"| {_mib(anon)} ({anon / size:.2%}) | {_mib(_med(rows, 'node_anon_delta'))} "
                  f"| {_mib(_med(rows, 'peak_rss_growth'))} | {_mib(_med(rows, 'probe_touched'))} "
                  f"| {_mib(_med(rows, 'smaps_rss'))} ({_med(rows, 'smaps_mappings'):g}) | {diff} "
                  f"| {pc * 1e3:.2f} | {sc * 1e3:.2f} | {pc / sc:.3f} | {_med(rows, 'cpu_s'):.2f} "
                  f"| {_med(rows, 'majflt'):g} / {_med(rows, 'minflt'):g} |")
        spanned = [m for m in ("eager", "mapped") if by_mode.get(m)]
        if spanned:
            print("\nThe product's `yeto.resume.anchors` span (medians) next to the independent numbers:\n")
            print("| variant | load_mode | bytes_mapped MiB | bytes_touched MiB | anonymous_delta MiB "
                  "| probe mapped MiB | probe touched MiB | child anonymous Δ MiB | load span s |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
            for mode in spanned:
                rows = by_mode[mode]
                lm = {r["span"].get("yeto.anchors.load_mode") for r in rows if r.get("span")}
                print(f"| {mode} | {','.join(sorted(lm))} | {_mib(_span_med(rows, 'yeto.anchors.bytes_mapped'))} "
                      f"| {_mib(_span_med(rows, 'yeto.anchors.bytes_touched'))} "
                      f"| {_mib(_span_med(rows, 'yeto.anchors.anonymous_delta'))} "
                      f"| {_mib(_med(rows, 'probe_mapped'))} | {_mib(_med(rows, 'probe_touched'))} "
                      f"| {_mib(_med(rows, 'anon_delta'))} | {_med(rows, 'load_span_s'):.3f} |")
        # Targets
        print("\nTargets:\n")
        print("| target | measured | met |")
        print("|---|---|---|")
        m, e, s = by_mode.get("mapped"), by_mode.get("eager"), by_mode.get("safetensors")
        if m:
            ma = _med(m, "anon_delta") / size
            print(f"| mapped anonymous growth < 1% of the file | {ma:.3%} "
                  f"({_mib(_med(m, 'anon_delta'))} MiB of {_mib(size)} MiB) | {'yes' if ma < 0.01 else 'NO'} |")
        if e:
            ea = _med(e, "anon_delta") / size
            print(f"| eager anonymous growth ~100% of the file (reference) | {ea:.1%} | - |")
        if m and s:
            ratio = _med(m, "time_s") / _med(s, "time_s")
            paired = statistics.median(a["time_s"] / b["time_s"] for a, b in zip(m, s))
            print(f"| mapped restart time ≤ 1.5× safetensors | {ratio:.2f}× of medians "
                  f"({_med(m, 'time_s'):.3f} s vs {_med(s, 'time_s'):.3f} s; same-repetition "
                  f"ratios: median {paired:.2f}×, {min(a['time_s'] / b['time_s'] for a, b in zip(m, s)):.2f}–"
                  f"{max(a['time_s'] / b['time_s'] for a, b in zip(m, s)):.2f}) "
                  f"| {'yes' if ratio <= 1.5 else 'NO'} |")
        if m:
            diffs = [abs(r["probe_touched"] - r["smaps_rss"]) / r["smaps_rss"] for r in m
                     if r["probe_touched"] is not None and r["smaps_rss"]]
            worst = max(diffs) if diffs else None
            print(f"| mapped: touched measurement within 2% of smaps Rss | worst |probe − smaps| / smaps = "
                  f"{worst:.3%} over {len(diffs)} processes | {'yes' if worst is not None and worst <= 0.02 else 'NO'} |")
            costs = [r["probe_cost_s"] / r["smaps_cost_s"] for r in m]
            print(f"| mapped: one measurement ≤ 1/10 of one smaps read | median {statistics.median(costs):.3f} "
                  f"({_med(m, 'probe_cost_s') * 1e3:.2f} ms vs {_med(m, 'smaps_cost_s') * 1e3:.2f} ms), "
                  f"worst {max(costs):.3f} | {'yes' if max(costs) <= 0.1 else 'NO'} |")
            cached = [r["probe_cached_cost_s"] / r["smaps_cost_s"] for r in m]
            print(f"| mapped: one measurement as fragment_done and the close take it (range kept from the load) ≤ 1/10 of one "
                  f"smaps read | median {statistics.median(cached):.4f} "
                  f"({_med(m, 'probe_cached_cost_s') * 1e3:.3f} ms), worst {max(cached):.4f} | "
                  f"{'yes' if max(cached) <= 0.1 else 'NO'} |")
    sums = {r["checksum"] for by_mode in results.values() for rows in by_mode.values() for r in rows}
    print(f"\nchecksum of the touched shards (sum of float64 sums) in every process: "
          f"{'identical' if len(sums) == 1 else 'DIFFERENT: ' + repr(sorted(sums))} ({next(iter(sums))!r})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=parse_size, default=parse_size("2GiB"), help="anchor bytes (2GiB)")
    ap.add_argument("--shards", type=int, default=1869)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="also run with the page cache dropped")
    ap.add_argument("--no-warm", action="store_true", help="cold only (with --cold)")
    ap.add_argument("--layout", choices=("strided", "contiguous"), default="strided",
                    help="touched shards: every 8th (strided) or one contiguous eighth")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--seed", type=int, default=1869)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads in the children (1: see the module docstring)")
    ap.add_argument("--dir", help="directory for the files (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the files (and reuse them if present)")
    ap.add_argument("--json", help="write every child's result to this file")
    ap.add_argument("--child", choices=MODES + ("write",), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        result = child_write(args) if args.child == "write" else child_run(args)
        print(json.dumps(result))
        return

    made_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="restart_anchors.")
    os.makedirs(args.dir, exist_ok=True)
    modes = [m for m in args.modes.split(",") if m]
    print(machine())
    print(f"size {args.size:,} B, {args.shards} shards, layout {args.layout}, repeat {args.repeat}, "
          f"torch threads in children {args.threads}, dir {args.dir}")
    try:
        pt, st = os.path.join(args.dir, PT_NAME), os.path.join(args.dir, ST_NAME)
        meta = os.path.join(args.dir, "write.json")
        if args.keep and os.path.exists(meta):
            info = json.load(open(meta))
            print("reusing the files in", args.dir)
        else:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "write",
                                  "--dir", args.dir, "--size", str(args.size), "--shards",
                                  str(args.shards), "--seed", str(args.seed)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"writing the files failed:\n{out.stderr}")
            info = json.loads(out.stdout.strip().splitlines()[-1])
            with open(meta, "w") as f:
                json.dump(info, f)
        caches = ([] if args.no_warm else ["warm"]) + (["cold"] if args.cold else [])
        if "cold" in caches:
            why = drop_caches()
            if why:
                print(f"cannot drop the page cache ({why}): cold runs skipped")
                caches.remove("cold")
        results = {c: {m: [] for m in modes} for c in caches}
        for rep in range(args.repeat):
            for cache in caches:
                order = modes[rep % len(modes):] + modes[:rep % len(modes)]
                for mode in order:
                    path = st if mode == "safetensors" else pt
                    if cache == "warm":
                        warm(path)
                    else:
                        drop_caches()
                    load1 = os.getloadavg()[0]
                    r = run_child(args, mode)
                    r["loadavg_1m"] = load1
                    results[cache][mode].append(r)
                    print(f"rep {rep} {cache:4} {mode:11} {r['time_s']:.3f} s (load {r['load_s']:.3f}, "
                          f"catch-up {r['catchup_s']:.3f}, close {r['close_s']:.3f})  "
                          f"anon {_mib(r['anon_delta'])} MiB  node {_mib(r['node_anon_delta'])} MiB  "
                          f"probe {_mib(r['probe_touched'])} / smaps {_mib(r['smaps_rss'])} MiB  "
                          f"cost {r['probe_cost_s'] * 1e3:.2f} / {r['smaps_cost_s'] * 1e3:.2f} ms  "
                          f"cpu {r['cpu_s']:.2f} s  majflt {r['majflt']}  minflt {r['minflt']}  "
                          f"load {load1:.2f}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"info": info, "results": results}, f, indent=1)
        report(results, info, args)
    finally:
        if not args.keep:
            for name in (PT_NAME, ST_NAME, "write.json"):
                try:
                    os.unlink(os.path.join(args.dir, name))
                except FileNotFoundError:
                    pass
            if made_dir:
                shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
