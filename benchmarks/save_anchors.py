#!/usr/bin/env python
"""Save benchmark for resume anchors: `save_resume_anchors` against `torch.save` + fsync.

Run by hand (not a test):

    python benchmarks/save_anchors.py                      # 512 MiB, 1,869 shards, 5 reps
    python benchmarks/save_anchors.py --size 2GiB --repeat 3

Both save the same FP32 tensors (the shard sizes of `restart_anchors.py`) into the same
directory (`--dir`, default a new temp dir), interleaved, the order swapped every repetition;
each timed from the call to the file being durable: `torch.save(tensors, f)`, flush, fsync,
close, for the plain one; `save_resume_anchors(path, tensors)` (temp file, fsync, rename,
directory fsync) for ours. A previous file of the same name is removed (outside the timing)
before each save, so neither pays for freeing the other's blocks. Reported: the median of each
and their ratio, and the anonymous memory each save added: `RssAnon` of this process sampled
every millisecond by a thread during the save, peak minus the value before it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # restart/ beside this

from restart.anchor_set import parse_size, shard_name, shard_numels  # noqa: E402


def _rss_anon() -> int:
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


class _PeakAnon:
    """Peak RssAnon while the block runs, sampled by a thread every millisecond."""

    def __enter__(self):
        self.before = self.peak = _rss_anon()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.wait(0.001):
            self.peak = max(self.peak, _rss_anon())

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_anon())
        self.delta = self.peak - self.before


def _plain_save(path, tensors):
    import torch

    with open(path, "wb") as f:
        torch.save(tensors, f)
        f.flush()
        os.fsync(f.fileno())


def _ours(path, tensors):
    from yeto_otel.anchors import save_resume_anchors

    save_resume_anchors(path, tensors)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=parse_size, default=parse_size("512MiB"))
    ap.add_argument("--shards", type=int, default=1869)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1869)
    ap.add_argument("--dir", help="directory for the files (default: a new temp dir)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(args.seed)
    tensors = {shard_name(i): torch.randn(numel, generator=g)
               for i, numel in enumerate(shard_numels(args.size, args.shards, args.seed))}
    directory = Path(args.dir or tempfile.mkdtemp(prefix="yeto-save-bench-"))
    variants = {"torch.save + fsync": _plain_save, "save_resume_anchors": _ours}
    times = {name: [] for name in variants}
    anon = {name: [] for name in variants}
    for rep in range(args.repeat):
        order = list(variants) if rep % 2 == 0 else list(variants)[::-1]
        for name in order:
            path = directory / ("plain.pt" if name.startswith("torch") else "anchors.pt")
            path.unlink(missing_ok=True)
            with _PeakAnon() as peak:
                start = time.perf_counter()
                variants[name](path, tensors)
                times[name].append(time.perf_counter() - start)
            anon[name].append(peak.delta)
    for path in directory.iterdir():
        path.unlink()
    if not args.dir:
        directory.rmdir()
    plain = statistics.median(times["torch.save + fsync"])
    print(f"{sum(t.numel() * 4 for t in tensors.values())} B of FP32 in {len(tensors)} tensors, "
          f"{args.repeat} repetitions (median s; peak RssAnon growth during the save, MiB)")
    for name in variants:
        median = statistics.median(times[name])
        print(f"{name:22s} {median:7.3f} s  {median / plain:5.2f}x  "
              f"anon +{max(anon[name]) / (1 << 20):.1f} MiB  "
              f"runs: {' '.join(f'{t:.3f}' for t in times[name])}")


if __name__ == "__main__":
    main()
