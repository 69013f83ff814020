"""The resident-size report: one table of means at every size, the targets' ratios, and the
smaps_rollup slope per GiB with what it implies at 60 GiB (docs/performance.md records it)."""

from __future__ import annotations

BUDGET = 0.001  # the default YETO_OTEL_SMAPS_BUDGET, 0.1 % of one core
TARGET_GIB = 8
EXTRAPOLATE_GIB = 60


def _label(r: dict) -> str:
    return "0 GiB" if r["gib"] == 0 else f"{r['gib']} GiB, {r['pages']}"


def table(results: list[dict]) -> str:
    base = next(r for r in results if r["gib"] == 0)["variants"]
    lines = ["| resident | collection µs | step-log record µs | psutil pair µs | "
             "bare smaps_rollup pread µs | bare status pread µs | bare cgroup files µs | "
             "collection ÷ 0 GiB | "
             "step log ÷ 0 GiB | collection ÷ psutil | step log ÷ psutil | AnonHugePages MiB | "
             "passes (walkers) | budgeted reads in the window |",
             "|---|" + "---:|" * 13]
    for r in results:
        v = {k: d["mean_us"] for k, d in r["variants"].items()}
        lines.append(
            f"| {_label(r)} | {v['collection']:.0f} | {v['step_log']:.0f} | {v['psutil']:.0f} | "
            f"{v['smaps']:.0f} | {v['status']:.1f} | {v.get('cgroup', float('nan')):.1f} | "
            f"{v['collection'] / base['collection']['mean_us']:.2f} | "
            f"{v['step_log'] / base['step_log']['mean_us']:.2f} | "
            f"{v['collection'] / v['psutil']:.3f} | {v['step_log'] / v['psutil']:.3f} | "
            f"{r['anon_huge_bytes'] / 2**20:.0f} | {r['passes']} ({r['walker_passes']}) | "
            f"{r['budgeted_reads_in_window']} |")
    return "\n".join(lines)


def slope(results: list[dict], pages: str) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of the bare smaps_rollup read, ms against GiB."""
    points = [(r["gib"], r["variants"]["smaps"]["mean_us"] / 1000) for r in results
              if r["gib"] == 0 or r["pages"] == pages]
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def top_slope(results: list[dict], pages: str) -> tuple[int, float, float] | None:
    """(GiB, ms) of the largest size and the ms per GiB from the next largest to it."""
    points = sorted((r["gib"], r["variants"]["smaps"]["mean_us"] / 1000) for r in results
                    if r["gib"] == 0 or r["pages"] == pages)
    if len(points) < 2:
        return None
    (g0, m0), (g1, m1) = points[-2:]
    return g1, m1, (m1 - m0) / (g1 - g0)


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def targets(results: list[dict]) -> str:
    base = next(r for r in results if r["gib"] == 0)["variants"]
    at = next((r for r in results if r["gib"] == TARGET_GIB and r["pages"] == "4k"), None)
    out = []
    if at is not None:
        v = {k: d["mean_us"] for k, d in at["variants"].items()}
        for key, label in (("collection", "a collection"), ("step_log", "a step-log record")):
            grow = v[key] / base[key]["mean_us"]
            share = v[key] / v["psutil"]
            out.append(f"- {label} at {TARGET_GIB} GiB in 4 KiB pages: {grow:.2f}x its cost at "
                       f"0 GiB (target <= 1.2: {'met' if grow <= 1.2 else 'MISSED'}), "
                       f"{share:.3f}x psutil's pair (target <= 0.1: "
                       f"{'met' if share <= 0.1 else 'MISSED'})")
    for pages in ("4k", "huge"):
        fit, top = slope(results, pages), top_slope(results, pages)
        if fit is None or top is None:
            continue
        (a, b), (last_gib, last_ms, per_gib) = fit, top
        steeper = max(b, per_gib)  # the cost per GiB can grow with size: the larger slope
        at60 = last_ms + steeper * (EXTRAPOLATE_GIB - last_gib)
        out.append(f"- smaps_rollup, {pages} pages: least squares {a:.2f} ms + {b:.2f} ms per "
                   f"GiB, {per_gib:.2f} ms per GiB between the two largest sizes; from "
                   f"{last_gib} GiB at the steeper {steeper:.2f} ms per GiB, at "
                   f"{EXTRAPOLATE_GIB} GiB ~{at60:.0f} ms a read. Under the default budget "
                   f"(0.1 %) the next read waits {_duration(at60 / BUDGET / 1000)}: "
                   f"Private_Dirty is at most that old. psutil's pair would cost ~{at60:.0f} ms "
                   f"a call there; the census's collection and step-log record do not grow "
                   f"with size (flat to {TARGET_GIB} GiB above)")
    return "\n".join(out)


def describe(results: list[dict], machine: dict, thp: str) -> str:
    m = machine
    out = [f"machine: nproc={m['nproc']} cpu={m['cpu']!r} kernel={m['kernel']} "
           f"python={m['python']} opentelemetry-sdk={m['opentelemetry-sdk']} "
           f"psutil={m['psutil']} yeto-otel={m['yeto-otel']}; "
           f"transparent_hugepage/enabled: {thp}"]
    for r in results:
        out.append(f"{_label(r)}: Anonymous {r['anonymous_bytes'] / 2**30:.2f} GiB, "
                   f"AnonHugePages {r['anon_huge_bytes'] / 2**30:.2f} GiB, {r['passes']} "
                   f"passes in {r['seconds']} s; budgeted smaps_rollup reads before the window "
                   f"{r['budgeted_reads_before']} ({r['budgeted_read_ms_before']:.1f} ms), in "
                   f"it {r['budgeted_reads_in_window']} "
                   f"({r['budgeted_read_ms_in_window']:.1f} ms); next read due in "
                   f"{max(0.0, r['next_budgeted_read_in_s']):.1f} s")
    return "\n".join(out)
