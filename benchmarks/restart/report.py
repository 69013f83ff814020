"""The report: the machine, the files, per cache state a table of every variant, the
product's span next to the independent numbers, and the targets."""

from __future__ import annotations

import os
import platform
import statistics

import hostinfo

from .anchor_set import GiB, MiB, MODES, PRODUCT_MODES, shard_numels, touched_indices


def mib(x) -> str:
    return "n/a" if x is None else f"{x / MiB:,.1f}"


def _med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _span_med(rows, attr):
    vals = [r["span"][attr] for r in rows if r.get("span") and attr in r["span"]]
    return statistics.median(vals) if vals else None


def machine() -> str:
    def v(dist):
        return hostinfo.version(dist, "?")
    return (f"nproc {os.cpu_count()} ({hostinfo.cpu_model()}), {hostinfo.mem_total() / GiB:.1f} GiB "
            f"RAM, kernel {platform.release()}, Python {platform.python_version()}, torch "
            f"{v('torch')}, safetensors {v('safetensors')}, opentelemetry-sdk "
            f"{v('opentelemetry-sdk')}, yeto-otel {v('yeto-otel')}")


def report(results: dict, info: dict, args) -> None:
    size = info["pt_size"]
    payload = _files(info, args)
    for cache, by_mode in results.items():
        print(f"\n### {cache} page cache: medians of {args.repeat} fresh processes per variant\n")
        _variants(by_mode, size, payload)
        _spans(by_mode)
        _targets(by_mode, size, payload, cache)
    sums = {r["checksum"] for by_mode in results.values() for rows in by_mode.values() for r in rows}
    print(f"\nchecksum of the touched shards (sum of float64 sums) in every process: "
          f"{'identical' if len(sums) == 1 else 'DIFFERENT: ' + repr(sorted(sums))} ({next(iter(sums))!r})")


def _files(info: dict, args) -> int:
    size = info["pt_size"]
    numels = shard_numels(args.size, args.shards, args.seed)
    idx = touched_indices(args.shards, args.layout)
    payload = sum(numels[i] for i in idx) * 4
    pages = sum(-(-numels[i] * 4 // 4096) for i in idx) * 4096
    print(f"\nanchor file: {info['pt_size']:,} B ({info['pt_size'] / GiB:.3f} GiB, save_resume_anchors, "
          f"{info['save_pt_s']:.1f} s to write); safetensors: {info['st_size']:,} B "
          f"({info['save_st_s']:.1f} s); {args.shards} shards, {len(idx)} touched ({args.layout}), "
          f"payload of touched shards {mib(payload)} MiB ({payload / size:.1%} of the file), "
          f"their whole pages {mib(pages)} MiB")
    return payload


def _variants(by_mode: dict, size: int, payload: int) -> None:
    print("| variant | restart s (load + catch-up + close) | load s | catch-up s | close s "
          "| anonymous Δ MiB (% of file) | node AnonPages Δ MiB | peak RSS growth MiB "
          "| touched: probe MiB | smaps Rss MiB (mappings) | touched / payload | probe − smaps "
          "| probe cost ms | smaps read ms | cost ratio | CPU s (load + catch-up) "
          "| major / minor faults |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
              f"| {mib(anon)} ({anon / size:.2%}) | {mib(_med(rows, 'node_anon_delta'))} "
              f"| {mib(_med(rows, 'peak_rss_growth'))} | {mib(_med(rows, 'probe_touched'))} "
              f"| {mib(_med(rows, 'smaps_rss'))} ({_med(rows, 'smaps_mappings'):g}) "
              f"| {_med(rows, 'smaps_rss') / payload:.2f}x | {diff} "
              f"| {pc * 1e3:.2f} | {sc * 1e3:.2f} | {pc / sc:.3f} | {_med(rows, 'cpu_s'):.2f} "
              f"| {_med(rows, 'majflt'):g} / {_med(rows, 'minflt'):g} |")


def _spans(by_mode: dict) -> None:
    spanned = [m for m in PRODUCT_MODES if by_mode.get(m)]
    if not spanned:
        return
    print("\nThe product's `yeto.resume.anchors` span (medians) next to the independent numbers:\n")
    print("| variant | load_mode | bytes_mapped MiB | bytes_touched MiB | anonymous_delta MiB "
          "| probe mapped MiB | probe touched MiB | child anonymous Δ MiB | load span s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode in spanned:
        rows = by_mode[mode]
        lm = {r["span"].get("yeto.anchors.load_mode") for r in rows if r.get("span")}
        print(f"| {mode} | {','.join(sorted(lm))} | {mib(_span_med(rows, 'yeto.anchors.bytes_mapped'))} "
              f"| {mib(_span_med(rows, 'yeto.anchors.bytes_touched'))} "
              f"| {mib(_span_med(rows, 'yeto.anchors.anonymous_delta'))} "
              f"| {mib(_med(rows, 'probe_mapped'))} | {mib(_med(rows, 'probe_touched'))} "
              f"| {mib(_med(rows, 'anon_delta'))} | {_med(rows, 'load_span_s'):.3f} |")


def _ratio_text(a: list[dict], b: list[dict], key: str) -> tuple[float, str]:
    """(ratio of the medians, text with the same-repetition ratios) of `key` in a vs b."""
    ratio = _med(a, key) / _med(b, key)
    paired = [x[key] / y[key] for x, y in zip(a, b)]
    return ratio, (f"{ratio:.2f}x of medians (same-repetition ratios: median "
                   f"{statistics.median(paired):.2f}x, {min(paired):.2f}-{max(paired):.2f})")


def _targets(by_mode: dict, size: int, payload: int, cache: str) -> None:
    print("\nTargets:\n")
    print("| target | measured | met |")
    print("|---|---|---|")
    m, e, s = by_mode.get("mapped"), by_mode.get("eager"), by_mode.get("safetensors")
    floor, kernel = by_mode.get("mmap-floor"), by_mode.get("mapped-kernel")
    if m and kernel:
        extra = _med(m, "anon_delta") - _med(kernel, "anon_delta")
        print(f"| mapped anonymous growth unchanged by the prefetch: within 1 MiB of mapped-kernel's "
              f"| {mib(_med(m, 'anon_delta'))} MiB vs {mib(_med(kernel, 'anon_delta'))} MiB "
              f"({_med(m, 'anon_delta') / size:.2%} of the file) | {'yes' if extra <= MiB else 'NO'} |")
    if e:
        ea = _med(e, "anon_delta") / size
        print(f"| eager anonymous growth ~100% of the file (reference) | {ea:.1%} | - |")
    if m and cache == "cold":
        touched = _med(m, "smaps_rss") / payload
        print(f"| cold: mapped touched <= 1.3x the payload | {touched:.2f}x "
              f"({mib(_med(m, 'smaps_rss'))} MiB for {mib(payload)} MiB) | {'yes' if touched <= 1.3 else 'NO'} |")
    if m and floor and cache == "warm":
        ratio, text = _ratio_text(m, floor, "smaps_rss")
        print(f"| warm: mapped touched <= 1.1x a plain mmap reading the same bytes | {text}; floor "
              f"{_med(floor, 'smaps_rss') / payload:.2f}x the payload | {'yes' if ratio <= 1.1 else 'NO'} |")
    if m and s:
        limit = 1.0 if cache == "cold" else 1.5
        ratio, text = _ratio_text(m, s, "time_s")
        print(f"| {cache}: mapped restart time <= {limit}x safetensors | {text} "
              f"({_med(m, 'time_s'):.3f} s vs {_med(s, 'time_s'):.3f} s) | {'yes' if ratio <= limit else 'NO'} |")
    if m:
        _probe_targets(m)


def _probe_targets(m: list[dict]) -> None:
    """The residency probe of the mapped variant: accurate, and cheap next to a smaps read."""
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
