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

The parts live beside this script in `restart/` (anchor set, /proc readings, the children,
the runs, the report); this script is the entry point of the parent and (with `--child`) of
the children.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # restart/ and hostinfo beside this

from restart.anchor_set import MODES, parse_size  # noqa: E402


def parse_args() -> argparse.Namespace:
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
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.child:  # a child process: write the files, or one restart
        from restart import child
        result = child.child_write(args) if args.child == "write" else child.child_run(args)
        print(json.dumps(result))
        return

    from restart import runs
    from restart.report import machine, report

    made_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="restart_anchors.")
    os.makedirs(args.dir, exist_ok=True)
    modes = [m for m in args.modes.split(",") if m]
    print(machine())
    print(f"size {args.size:,} B, {args.shards} shards, layout {args.layout}, repeat {args.repeat}, "
          f"torch threads in children {args.threads}, dir {args.dir}")
    try:
        info = runs.write_files(args)
        results = runs.repetitions(args, modes, runs.caches(args))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"info": info, "results": results}, f, indent=1)
        report(results, info, args)
    finally:
        if not args.keep:
            runs.remove_files(args.dir, made_dir)


if __name__ == "__main__":
    main()
