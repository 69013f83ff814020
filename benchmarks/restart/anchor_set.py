"""The synthetic anchor set, computed the same way in the parent and in every child."""

from __future__ import annotations

import argparse
import random
import re

MiB = 1 << 20
GiB = 1 << 30
# eager / mapped / mapped-kernel / mapped-off: the product (YETO_DILOCO_RESUME_ANCHOR_MMAP=0;
# the default, read-ahead `anchor`; YETO_DILOCO_RESUME_ANCHOR_READAHEAD=kernel; =off);
# safetensors: the same tensors in a safetensors file; mmap-floor: a plain mmap of the anchor
# file reading the same bytes, the least the kernel maps for that read.
MODES = ("eager", "mapped", "mapped-kernel", "mapped-off", "safetensors", "mmap-floor")
PRODUCT_MODES = ("eager", "mapped", "mapped-kernel", "mapped-off")
FRAGMENTS = 8
SHIFTED_FRAGMENT = 3
PT_NAME = "anchors.pt"
ST_NAME = "anchors.safetensors"


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
