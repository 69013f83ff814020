"""The memory-cgroup row of the host-memory census dashboard: what the cgroup holds against its
limit and high, the non-reclaimable share and its peaks against the headroom alert's threshold,
memory events, pressure, which ranks share each cgroup; and OOM kills as annotations
(docs/dashboards.md)."""

from __future__ import annotations

from yeto_otel.census import (CGROUP_ANON, CGROUP_EVENTS, CGROUP_FILE, CGROUP_FILE_MAPPED,
                              CGROUP_HIGH, CGROUP_INFO, CGROUP_LIMIT, CGROUP_PEAK,
                              CGROUP_PRESSURE, CGROUP_SHMEM, CGROUP_USAGE, CGROUP_WORKING_SET)

from dashboard_kit import (DASHED_REF, FLOOR_REF, HIGH_REF, PROMETHEUS, THRESHOLD_REF, Layout,
                           dashboard, prom, series)
from dashboard_names import (CGROUP, CGROUP_HEADROOM_THRESHOLD, CGROUP_LEGEND, CGROUP_LEVEL,
                             CGROUP_NAME_LEGEND, CGROUP_PATH, CGROUP_PRESSURE_THRESHOLD,
                             CGROUP_SELECTOR, CLUSTER, EVENT, FLOOR_RISE_THRESHOLD, FULL_STALL,
                             HOST, INSTANCE, JOB, JOB_ID, JOB_SELECTOR, LEVEL, OOM_KILL,
                             PRESSURE_SECONDS, UNRECLAIMABLE_BYTES, UNRECLAIMABLE_RATIO, alert,
                             cgroup_rule, cgroup_series, legend, metric_name)

OOM_ALERT = alert("YetoCgroupOOMKill")
HEADROOM_ALERT = alert("YetoCgroupMemoryHeadroom")
PRESSURE_ALERT = alert("YetoCgroupMemoryPressure")


def _limits() -> list:
    """The hard limit (red dashed) and memory.high (orange dashed), absent where there is none."""
    return [prom(THRESHOLD_REF, cgroup_series(CGROUP_LIMIT), f"limit {CGROUP_LEGEND}"),
            prom(HIGH_REF, cgroup_series(CGROUP_HIGH), f"high {CGROUP_LEGEND}")]


def _holdings(layout: Layout) -> None:
    layout.add(series(
        "Cgroup usage and working set vs limit and high",
        f"{metric_name(CGROUP_USAGE)} (what the limit is compared with: anonymous memory, page "
        f"cache, kernel memory), {metric_name(CGROUP_WORKING_SET)} (usage minus inactive page "
        "cache, what kubelet evicts on), the high-water mark (dashed), against the limit (red) "
        "and memory.high (orange). Usage at the limit is normal while it is page cache: the "
        "kernel reclaims it there. One line per reporting rank: a takeover starts a new one.",
        "bytes",
        [prom("A", cgroup_series(CGROUP_USAGE), f"usage {CGROUP_LEGEND}"),
         prom("B", cgroup_series(CGROUP_WORKING_SET), f"working set {CGROUP_LEGEND}"),
         prom(DASHED_REF, cgroup_series(CGROUP_PEAK), f"peak {CGROUP_LEGEND}"), *_limits()]),
        w=12, h=8)
    layout.add(series(
        "Cgroup anonymous, shmem and page cache vs limit and high",
        f"{metric_name(CGROUP_ANON)} and {metric_name(CGROUP_SHMEM)} cannot be reclaimed "
        f"without swap; {metric_name(CGROUP_FILE)} (page cache, shmem included) and "
        f"{metric_name(CGROUP_FILE_MAPPED)} (the part mapped into the ranks, mapped anchors "
        "among it) can, unless in use. What meets the limit and cannot be reclaimed gets a "
        "process OOM-killed.", "bytes",
        [prom("A", cgroup_series(CGROUP_ANON), f"anon {CGROUP_LEGEND}"),
         prom("B", cgroup_series(CGROUP_SHMEM), f"shmem {CGROUP_LEGEND}"),
         prom("C", cgroup_series(CGROUP_FILE), f"file {CGROUP_LEGEND}"),
         prom("E", cgroup_series(CGROUP_FILE_MAPPED), f"file mapped {CGROUP_LEGEND}"),
         *_limits()]), w=12, h=8)


def _headroom(layout: Layout) -> None:
    ratio = cgroup_rule(INSTANCE, UNRECLAIMABLE_RATIO, "ratio")
    peaks = cgroup_rule(CGROUP_LEVEL, UNRECLAIMABLE_RATIO, "ratio_max20m")
    layout.add(series(
        "Non-reclaimable share of the limit vs headroom threshold",
        f"{ratio}: (anon + shmem) / limit per reporting rank (thin), and its peaks over 20m "
        f"per cgroup, {peaks} (thick), against the threshold (red). {HEADROOM_ALERT} fires "
        "when the peaks are above it and still rising (next panel), for 10 minutes. Empty for "
        "a cgroup without a limit.", "percentunit",
        [prom("A", f"{ratio}{{{JOB_SELECTOR}}}", CGROUP_LEGEND),
         prom(FLOOR_REF, f"{peaks}{{{JOB_SELECTOR}}}", f"peaks {CGROUP_NAME_LEGEND}"),
         prom(THRESHOLD_REF, CGROUP_HEADROOM_THRESHOLD, "alert threshold")],
        min_zero=True), w=12, h=8)
    rise = cgroup_rule(CGROUP_LEVEL, UNRECLAIMABLE_BYTES, "peak_rise1h")
    layout.add(series(
        "Non-reclaimable peaks: rise over 1h vs threshold",
        f"{rise}: the peaks of anon + shmem over 20m, now minus an hour ago. {HEADROOM_ALERT} "
        "needs it above the threshold (red): a leak, a step up or growing teeth; flat for a "
        "steady sawtooth and across a restart.", "bytes",
        [prom("A", f"{rise}{{{JOB_SELECTOR}}}", CGROUP_NAME_LEGEND),
         prom(THRESHOLD_REF, FLOOR_RISE_THRESHOLD, "alert threshold")]), w=12, h=8)


def _events_and_pressure(layout: Layout) -> None:
    events = CGROUP_EVENTS
    layout.add(series(
        f"Cgroup memory events per second, by {EVENT}",
        f"rate({metric_name(events)}): `max` (usage met the limit; v1 failcnt), `high`, `oom`, "
        f"`{OOM_KILL}` (a process killed: {OOM_ALERT}, and the red marks), `oom_group_kill`. "
        "`max` climbing while anonymous memory is far below the limit is page cache being "
        "reclaimed at the limit, not a danger by itself.", "cps",
        [prom("A", f"sum by ({CGROUP}, {INSTANCE}, {EVENT}) "
                   f"(rate({metric_name(events)}{{{CGROUP_SELECTOR}}}[$__rate_interval]))",
              f"{legend(EVENT)} {CGROUP_LEGEND}")], min_zero=True), w=12, h=8)
    stalled = cgroup_rule(CGROUP_LEVEL, PRESSURE_SECONDS, "rate10m")
    pressure = metric_name(CGROUP_PRESSURE)
    layout.add(series(
        "Cgroup memory pressure: share of time stalled",
        f"rate({pressure}) (thin): seconds per second the cgroup's tasks waited for memory; "
        f"`some`: at least one task, `{FULL_STALL}`: all at once (time lost outright). "
        f"{stalled} for `{FULL_STALL}` (thick) is the same over 10m: {PRESSURE_ALERT} fires "
        "while it is above the threshold (red) for 10 minutes. cgroup v2 only.", "percentunit",
        [prom("A", f"sum by ({CGROUP}, {INSTANCE}, {LEVEL}) "
                   f"(rate({pressure}{{{CGROUP_SELECTOR}}}[$__rate_interval]))",
              f"{legend(LEVEL)} {CGROUP_LEGEND}"),
         prom(FLOOR_REF, f'{stalled}{{{LEVEL}="{FULL_STALL}", {JOB_SELECTOR}}}',
              f"{FULL_STALL} over 10m {CGROUP_NAME_LEGEND}"),
         prom(THRESHOLD_REF, CGROUP_PRESSURE_THRESHOLD, "alert threshold")],
        min_zero=True), w=12, h=8)


def _ranks(layout: Layout) -> None:
    layout.add(series(
        "Ranks per cgroup", f"sum of {metric_name(CGROUP_INFO)} by {CGROUP_PATH}: how many "
        "ranks are in each memory cgroup (every rank reports its own, whether it reports the "
        "cgroup or not). 8 on one path: a pod's ranks share a limit (and, with "
        "memory.oom.group, an OOM kill); 1 on each: a cgroup per rank.", "short",
        [prom("A", f"sum by ({CGROUP}, {CGROUP_PATH}) "
                   f"({metric_name(CGROUP_INFO)}{{{CGROUP_SELECTOR}}})",
              f"{CGROUP_NAME_LEGEND} {legend(CGROUP_PATH)}")], min_zero=True),
        w=24, h=6)


def cgroup_row(layout: Layout) -> None:
    layout.row("Memory cgroup per host (reported by one rank per cgroup)")
    _holdings(layout)
    _headroom(layout)
    _events_and_pressure(layout)
    _ranks(layout)


def oom_kill_annotation() -> dashboard.AnnotationQuery:
    # An observer's oom_kill count that rose, or the cgroup's count one higher when another
    # rank (or the same one, restarted) took over from the rank that was killed.
    counted = cgroup_rule(CGROUP_LEVEL, CGROUP_EVENTS, "max")
    kills = f'{EVENT}="{OOM_KILL}"'
    raw = f"{metric_name(CGROUP_EVENTS)}{{{kills}, {CGROUP_SELECTOR}}}"
    rule = f"{counted}{{{kills}, {JOB_SELECTOR}}}"
    expr = (f"sum by ({CGROUP}) (increase({raw}[5m])) > 0\n"
            f"or max by ({CGROUP}) ({rule} - {rule} offset 5m) > 0")
    return (dashboard.AnnotationQuery().name("Cgroup OOM kills").datasource(PROMETHEUS)
            .enable(True).hide(False).icon_color("red").expr(expr).step("60s")
            .title_format("OOM kill in the memory cgroup")
            .text_format(f"{CGROUP_NAME_LEGEND} ({legend(CLUSTER)})")
            .tag_keys(f"{CLUSTER},{HOST},{JOB},{JOB_ID}")
            .placement(None))
