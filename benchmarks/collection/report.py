"""The report: the machine and the set-up, then Markdown tables of the medians, the ratios
and what is derived from them (as docs/performance.md records them)."""

from __future__ import annotations

import json

from .timing import RATIOS

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

