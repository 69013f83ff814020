"""The parent: write the files once (in a child), then run every variant in a fresh child
process per repetition, warm (the file evicted, then read once) or cold (the file evicted)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from yeto_otel.proc import evict_from_page_cache

from .anchor_set import MiB, PT_NAME, ST_NAME
from .report import mib

# The entry script: the children are this script with `--child MODE`.
ENTRY = Path(__file__).resolve().parents[1] / "restart_anchors.py"


def evict(path: str) -> str | None:
    """This file alone out of the page cache (the product's `evict_from_page_cache`): a cold
    start without root and without evicting the libraries the children run on, which
    `drop_caches` would and which would then fault in during the timed restart of every
    variant alike. None, or why it could not."""
    try:
        evict_from_page_cache(path)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def warm(path: str) -> None:
    """The file evicted, then read once sequentially: the page-cache state a restart finds
    after the file was copied in or read before (readahead fills it with large folios), the
    same for every variant whatever wrote the file."""
    evict(path)
    with open(path, "rb", buffering=0) as f:
        while f.read(16 * MiB):
            pass


def _child(args, *extra: str, env: dict | None = None) -> dict:
    cmd = [sys.executable, str(ENTRY), "--dir", args.dir, "--size", str(args.size),
           "--shards", str(args.shards), "--seed", str(args.seed), *extra]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        what = "writing the files" if "write" in extra else f"child {extra[1]}"
        raise SystemExit(f"{what} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_files(args) -> dict:
    """The anchor file and the safetensors file (reused with --keep when already written)."""
    meta = os.path.join(args.dir, "write.json")
    if args.keep and os.path.exists(meta):
        with open(meta) as f:
            info = json.load(f)
        print("reusing the files in", args.dir)
        return info
    info = _child(args, "--child", "write")
    with open(meta, "w") as f:
        json.dump(info, f)
    return info


def run_child(args, mode: str) -> dict:
    env = dict(os.environ)
    env.pop("YETO_DILOCO_RESUME_ANCHOR_MMAP", None)
    env.pop("YETO_DILOCO_RESUME_ANCHOR_READAHEAD", None)
    if mode == "eager":
        env["YETO_DILOCO_RESUME_ANCHOR_MMAP"] = "0"
    if mode in ("mapped-kernel", "mapped-off"):
        env["YETO_DILOCO_RESUME_ANCHOR_READAHEAD"] = mode.removeprefix("mapped-")
    return _child(args, "--child", mode, "--layout", args.layout, "--threads", str(args.threads),
                  env=env)


def caches(args) -> list[str]:
    """warm and/or cold; cold only where a file's pages can be evicted."""
    chosen = ([] if args.no_warm else ["warm"]) + (["cold"] if args.cold else [])
    if "cold" in chosen:
        why = evict(os.path.join(args.dir, PT_NAME))
        if why:
            print(f"cannot evict the anchor file from the page cache ({why}): cold runs skipped")
            chosen.remove("cold")
    return chosen


def repetitions(args, modes: list[str], cache_states: list[str]) -> dict:
    """Every variant in a fresh process per repetition, the order rotated every repetition."""
    pt, st = os.path.join(args.dir, PT_NAME), os.path.join(args.dir, ST_NAME)
    results = {c: {m: [] for m in modes} for c in cache_states}
    for rep in range(args.repeat):
        for cache in cache_states:
            order = modes[rep % len(modes):] + modes[:rep % len(modes)]
            for mode in order:
                if cache == "warm":
                    warm(st if mode == "safetensors" else pt)
                else:
                    evict(st if mode == "safetensors" else pt)
                load1 = os.getloadavg()[0]
                r = run_child(args, mode)
                r["loadavg_1m"] = load1
                results[cache][mode].append(r)
                _progress(rep, cache, mode, r, load1)
    return results


def _progress(rep: int, cache: str, mode: str, r: dict, load1: float) -> None:
    print(f"rep {rep} {cache:4} {mode:11} {r['time_s']:.3f} s (load {r['load_s']:.3f}, "
          f"catch-up {r['catchup_s']:.3f}, close {r['close_s']:.3f})  "
          f"anon {mib(r['anon_delta'])} MiB  node {mib(r['node_anon_delta'])} MiB  "
          f"probe {mib(r['probe_touched'])} / smaps {mib(r['smaps_rss'])} MiB  "
          f"cost {r['probe_cost_s'] * 1e3:.2f} / {r['smaps_cost_s'] * 1e3:.2f} ms  "
          f"cpu {r['cpu_s']:.2f} s  majflt {r['majflt']}  minflt {r['minflt']}  "
          f"load {load1:.2f}", flush=True)


def remove_files(directory: str, made_dir: bool) -> None:
    for name in (PT_NAME, ST_NAME, "write.json"):
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass
    if made_dir:
        shutil.rmtree(directory, ignore_errors=True)
