"""Timing: every variant interleaved call by call, medians and spreads, the ratios that
count; and the cProfile mode."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time

import psutil

import hostinfo

from .mappings import make_mappings, vma_count
from .raw import setup_raw
from .variants import Variant, sanity, setup_anchor_a, setup_anchor_b, setup_census, \
    setup_sdk_only

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
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": hostinfo.cpu_model(""),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "opentelemetry-sdk": hostinfo.version("opentelemetry-sdk"),
        "psutil": psutil.__version__,
        "yeto-otel": hostinfo.version("yeto-otel"),
    }


def _smaps_rollup_bytes() -> int:
    """The size of this process's smaps_rollup text (what the census reads every collection)."""
    with open("/proc/self/smaps_rollup", "rb") as f:
        return len(f.read())


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
        "smaps_rollup_bytes": _smaps_rollup_bytes(),
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
        result["ratios"]["+".join(nums) + "/" + den] = _ratio(by_key, result["variants"],
                                                              nums, den, label)
    for v in variants:
        v.close()
    del keep
    return result


def _ratio(by_key: dict[str, Variant], medians: dict, nums: tuple[str, ...], den: str,
           label: str) -> dict:
    b = by_key[den]
    num_rounds = [sum(x) for x in zip(*(by_key[k].round_medians for k in nums))]
    num_samples = [sum(x) for x in zip(*(by_key[k].samples for k in nums))]
    per_round = [x / y for x, y in zip(num_rounds, b.round_medians)]
    num_median = sum(medians[k]["median_us"] for k in nums)
    return {
        "label": label,
        "of_medians": num_median / medians[den]["median_us"],
        "per_round_min": min(per_round), "per_round_max": max(per_round),
        "per_round_median": statistics.median(per_round),
        # calls of one pass run back to back: the ratio of neighbours cancels drift
        "paired_median": statistics.median(x / y for x, y in zip(num_samples, b.samples)),
    }


def _quantile(samples: list[int], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def profile(mappings: int, collections: int) -> None:
    """cProfile of `collections` census collections (after 50 unprofiled ones)."""
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
