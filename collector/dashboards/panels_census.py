"""The host-memory census dashboard: gauges as values, running totals as rates, the floors and
thresholds of the leak and exhaustion rules, the memory cgroup (panels_cgroup.py), census
errors, the accelerator host allocator, and the ranks' DataLoader workers apart from them
(docs/dashboards.md)."""

from __future__ import annotations

from yeto_otel.census import (ALLOCATOR_PREFIX, ANONYMOUS, CENSUS_ERRORS, NODE_ANON_PAGES,
                              NODE_AVAILABLE, PRIVATE_DIRTY, PROCESS_MEMORY_USAGE,
                              PROCESS_MEMORY_VIRTUAL, RSS, RSS_PEAK, SMAPS_ROLLUP_AGE,
                              allocator_metric)
from yeto_otel.names import prometheus_name

from dashboard_kit import (AGE_REF, DASHED_REF, FLOOR_REF, FREED_REF, HOST_MEMORY_CENSUS_UID,
                           THRESHOLD_REF, Layout, base_dashboard, dashboard, prom, series,
                           timeseries)
from dashboard_names import (CLUSTER, EXHAUSTION_HORIZON, FLOOR, FLOOR_RISE,
                             FLOOR_RISE_THRESHOLD, HOST, INSTANCE, NODE_LEGEND, RANK_LEGEND,
                             SECONDS_TO_EXHAUSTION, SOURCE, WORKER_LEGEND, WORKER_SELECTOR,
                             alert, host_series, legend, metric_name, net_rate, node_gauge,
                             rank_series, rate, recording_rule, worker_series)
from panels_cgroup import cgroup_row, oom_kill_annotation
from panels_exits import exits_row, rank_exits_annotation

THRESHOLD_LEGEND = "alert threshold"
NODE_LEAK = alert("YetoNodeAnonPagesLeak")
RANK_LEAK = alert("YetoRankAnonymousLeak")
NODE_EXHAUSTION = alert("YetoNodeMemoryExhaustion")
CENSUS_ERRORS_ALERT = alert("YetoCensusErrors")
# The allocator metrics' common Prometheus prefix, left out where a description abbreviates.
ALLOCATOR_METRICS = prometheus_name(ALLOCATOR_PREFIX, "", monotonic_counter=False)
ANON_PAGES, MEM_AVAILABLE = NODE_ANON_PAGES.field, NODE_AVAILABLE.field  # /proc/meminfo's words
# Private_Dirty is re-read only within the smaps_rollup budget: between reads the same value is
# exported again, so its panels draw how old it is beside it.
READ_AGE = (f"Between reads the last value is exported again: the dotted line on the right "
            f"axis is its age, {metric_name(SMAPS_ROLLUP_AGE)} (seconds since it was read). "
            "Where the age climbs the value is one read carried forward, not a level that held "
            "still; it was read where the age last fell (that time minus the age).")


def _private_dirty_panel(title: str, what: str, select, legend_format: str
                         ) -> timeseries.Panel:
    """Private dirty and, on a right axis, the age of its values."""
    return series(
        title, f"{what} {READ_AGE}", "bytes",
        [prom("A", select(PRIVATE_DIRTY), legend_format),
         prom(AGE_REF, select(SMAPS_ROLLUP_AGE), f"age {legend_format}")])


def _process_row(layout: Layout) -> None:
    floor = recording_rule(ANONYMOUS, FLOOR)
    layout.row("Process memory per rank (gauges)")
    layout.add(series(
        "RSS", f"{metric_name(RSS)} ({RSS.field}), a gauge.", "bytes",
        [prom("A", rank_series(RSS), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "RSS high-water mark", f"{metric_name(RSS_PEAK)} ({RSS_PEAK.field}): the largest RSS the "
        "process has had. It only rises; a drop means the rank's process was replaced (the "
        "restart annotations come from these drops).", "bytes",
        [prom("A", rank_series(RSS_PEAK), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Anonymous memory and its floor", f"{metric_name(ANONYMOUS)} (thin, a gauge) "
        f"and its floor {floor} (thick): the lowest value over 20 minutes. A sawtooth's raw "
        "value swings while its floor stays flat; a leak raises the floor.", "bytes",
        [prom("A", rank_series(ANONYMOUS), RANK_LEGEND),
         prom(FLOOR_REF, rank_series(floor), f"floor {RANK_LEGEND}")]), w=12, h=8)
    layout.add(_private_dirty_panel(
        "Private dirty and its age", f"{metric_name(PRIVATE_DIRTY)}, a gauge: pages only this "
        "process maps and has written; they cannot be dropped or shared, only swapped.",
        rank_series, RANK_LEGEND), w=12, h=8)
    usage, virtual = PROCESS_MEMORY_USAGE, PROCESS_MEMORY_VIRTUAL
    layout.add(series(
        "Virtual memory and memory in use (OpenTelemetry names)",
        f"{metric_name(virtual)} ({virtual.field}: every mapping, touched or not) and "
        f"{metric_name(usage)} (dashed, {usage.field}: the RSS panel's number), the semantic "
        "conventions' names that stock dashboards and the collector's process scraper use. "
        "Virtual far above RSS is reserved address space (allocator arenas, mapped files not "
        "read), not memory in use. Empty where the ranks run with YETO_OTEL_SEMCONV_METRICS=off.",
        "bytes",
        [prom("A", rank_series(virtual), RANK_LEGEND),
         prom(DASHED_REF, rank_series(usage), f"in use {RANK_LEGEND}")]), w=24, h=8)


def _node_row(layout: Layout) -> None:
    layout.row("Node memory per host (gauges and floors)")
    for row, what, alert_name in (
            (NODE_ANON_PAGES, "a gauge from one rank per host", NODE_LEAK),
            (NODE_AVAILABLE, "a gauge", NODE_EXHAUSTION)):
        floor = recording_rule(row, FLOOR)
        layout.add(series(
            f"Node {row.field} and its floor", f"{metric_name(row)} (thin, {what}) and its "
            f"floor {floor} (thick), the input of {alert_name}.", "bytes",
            [prom("A", node_gauge(row), NODE_LEGEND),
             prom(FLOOR_REF, host_series(floor), f"floor {NODE_LEGEND}")]), w=12, h=8)


def _alerts_row(layout: Layout) -> None:
    layout.row("Leak and exhaustion alerts (what the rules compare)")
    threshold = prom(THRESHOLD_REF, FLOOR_RISE_THRESHOLD, THRESHOLD_LEGEND)
    windows = "in three successive windows"
    rise = recording_rule(NODE_ANON_PAGES, FLOOR_RISE)
    layout.add(series(
        f"Node {ANON_PAGES} floor rise (20m) vs threshold",
        f"{rise}: the floor now minus the floor 20 minutes ago. {NODE_LEAK} fires when it is "
        f"above the threshold (red) {windows}, for 10 minutes.", "bytes",
        [prom("A", host_series(rise), NODE_LEGEND), threshold]), w=12, h=8)
    rise = recording_rule(ANONYMOUS, FLOOR_RISE)
    layout.add(series(
        "Rank anonymous floor rise (20m) vs threshold",
        f"{rise}, per rank. {RANK_LEAK} fires when it is above the threshold (red) {windows}, "
        "for 10 minutes.", "bytes",
        [prom("A", rank_series(rise), RANK_LEGEND),
         prom(THRESHOLD_REF, FLOOR_RISE_THRESHOLD, THRESHOLD_LEGEND)]), w=12, h=8)
    rise = recording_rule(NODE_AVAILABLE, FLOOR_RISE)
    layout.add(series(
        f"Node {MEM_AVAILABLE} floor change (20m) vs -threshold",
        f"{rise}: negative while {MEM_AVAILABLE}'s floor falls. {NODE_EXHAUSTION} needs it "
        f"below minus the threshold (red) {windows}.", "bytes",
        [prom("A", host_series(rise), NODE_LEGEND),
         prom(THRESHOLD_REF, f"-{FLOOR_RISE_THRESHOLD}", f"-{THRESHOLD_LEGEND}")]),
        w=12, h=8)
    eta = recording_rule(NODE_AVAILABLE, SECONDS_TO_EXHAUSTION)
    layout.add(series(
        f"Time to {MEM_AVAILABLE} exhaustion vs horizon",
        f"{eta}: when {MEM_AVAILABLE}'s floor reaches zero at its trend over the last hour "
        f"(absent while the floor is not falling). {NODE_EXHAUSTION} fires below the horizon "
        "(red) while the floor keeps falling.", "s",
        [prom("A", host_series(eta), NODE_LEGEND),
         prom(THRESHOLD_REF, EXHAUSTION_HORIZON, "alert horizon")],
        min_zero=True), w=12, h=8)


def _health_row(layout: Layout) -> None:
    layout.row("Census health")
    layout.add(series(
        f"Census errors per second, by {SOURCE}",
        f"rate({metric_name(CENSUS_ERRORS)}): census reads that failed and were skipped (a "
        "running total, so plotted as a rate). Any value above zero means gaps in that "
        f"{SOURCE}'s series.", "cps",
        [prom("A", f"sum by ({CLUSTER}, {HOST}, {INSTANCE}, {SOURCE}) ({rate(CENSUS_ERRORS)})",
              f"{RANK_LEGEND} {legend(SOURCE)}")], min_zero=True), w=24, h=7)


def _allocator_gauges(layout: Layout) -> None:
    for stat, title, unit, what in (
        ("allocated_bytes", "Bytes held from the OS", "bytes",
         "pinned host memory the allocator holds (freed only when its cache is emptied)"),
        ("active_bytes", "Bytes in use by tensors", "bytes", "bytes in use by tensors"),
        ("allocations", "Blocks held", "short", "host allocations (blocks) the allocator holds"),
        ("active_requests", "Requests in use", "short", "allocation requests in use by tensors"),
    ):
        current, peak = allocator_metric(stat, "current"), allocator_metric(stat, "peak")
        layout.add(series(
            f"{title} ({stat})",
            f"{metric_name(current)} (a gauge: {what}) and _peak (dashed, the resettable "
            "high-water mark). _current appears only once the stat's freed total has moved in "
            "the process, so a build that never counts frees shows no false leak.",
            unit,
            [prom("A", rank_series(current), RANK_LEGEND),
             prom(DASHED_REF, rank_series(peak), f"peak {RANK_LEGEND}")], min_zero=True),
            w=12, h=8)


def _allocator_rates(layout: Layout) -> None:
    for stat, unit in (("allocated_bytes", "binBps"), ("active_bytes", "binBps"),
                       ("allocations", "cps"), ("active_requests", "cps")):
        allocated, freed = allocator_metric(stat, "allocated"), allocator_metric(stat, "freed")
        short_freed = "..." + metric_name(freed).removeprefix(ALLOCATOR_METRICS)
        layout.add(series(
            f"{stat}: allocated and freed per second",
            f"rate({metric_name(allocated)}) above the axis and rate({short_freed}) below it: "
            "running totals, plotted as rates.",
            unit,
            [prom("A", rate(allocated), f"allocated {RANK_LEGEND}"),
             prom(FREED_REF, rate(freed), f"freed {RANK_LEGEND}")]), w=12, h=8)


def _net_panel(title: str, description: str, unit: str,
               stats_and_words: tuple[tuple[str, str], ...]) -> timeseries.Panel:
    return series(title, description, unit, [
        prom(ref, net_rate(allocator_metric(stat, "allocated"), allocator_metric(stat, "freed")),
             f"{word} {RANK_LEGEND}")
        for ref, (stat, word) in zip("AB", stats_and_words)])


def _allocator_row(layout: Layout) -> None:
    layout.row("Accelerator host allocator (pinned host memory), per rank")
    _allocator_gauges(layout)
    _allocator_rates(layout)
    layout.add(_net_panel(
        "Net bytes per second (allocated - freed)",
        "Rate of allocated minus rate of freed, for allocated_bytes (held) and active_bytes "
        "(in use). Above zero on average is growth; a build whose frees are never counted shows "
        "the whole allocation rate here.", "binBps",
        (("allocated_bytes", "held"), ("active_bytes", "in use"))), w=12, h=8)
    layout.add(_net_panel(
        "Net blocks and requests per second (allocated - freed)",
        "The same for allocations (blocks held) and active_requests (requests in use).", "cps",
        (("allocations", "blocks"), ("active_requests", "requests"))), w=12, h=8)
    alloc, free = allocator_metric("num_host_alloc"), allocator_metric("num_host_free")
    layout.add(series(
        "Calls to the OS per second",
        f"rate({metric_name(alloc)}) above the axis and rate({metric_name(free)}) below it: how "
        "often the allocator asks the OS for pinned memory and gives it back. Steady alloc calls "
        "mean the cache is not reused.", "cps",
        [prom("A", rate(alloc), f"alloc {RANK_LEGEND}"),
         prom(FREED_REF, rate(free), f"free {RANK_LEGEND}")]), w=12, h=8)


def _worker_row(layout: Layout) -> None:
    # Per worker, never summed, and never with a rank: a forked worker's RSS and anonymous
    # memory count pages it still shares with its rank.
    layout.row("DataLoader workers (per worker, apart from their ranks)")
    epochs = ("A loader without persistent_workers starts new worker processes every epoch "
              "under the same worker ids, so each line restarts low at every epoch.")
    layout.add(_private_dirty_panel(
        "Private dirty per worker, and its age", f"{metric_name(PRIVATE_DIRTY)} of each "
        "DataLoader worker: what the worker owns (pages it alone maps and has written). A "
        "forked worker starts with almost none; touching the dataset's Python objects copies "
        f"their pages one by one (copy-on-read), which climbs here while the worker iterates. "
        f"{epochs}", worker_series, WORKER_LEGEND), w=12, h=8)
    layout.add(series(
        "RSS per worker", f"{metric_name(RSS)} ({RSS.field}) of each DataLoader worker. It "
        "counts the pages the worker still shares with its rank (they are in the rank's RSS "
        f"too): never add it to the rank's, nor to other workers'. {epochs}", "bytes",
        [prom("A", worker_series(RSS), WORKER_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Anonymous memory per worker", f"{metric_name(ANONYMOUS)} of each DataLoader worker: "
        "anonymous pages it maps, including those still shared with its rank after the fork "
        "(the gap to private dirty is about that shared part). No leak alert reads it "
        "(docs/alerts.md, DataLoader workers).", "bytes",
        [prom("A", worker_series(ANONYMOUS), WORKER_LEGEND)]), w=12, h=8)
    layout.add(series(
        "RSS high-water mark per worker", f"{metric_name(RSS_PEAK)} ({RSS_PEAK.field}) of "
        "each DataLoader worker: it falls when a new process takes the worker id (every epoch "
        "without persistent_workers). Not a rank restart: the restart marks ignore workers.",
        "bytes", [prom("A", worker_series(RSS_PEAK), WORKER_LEGEND)]), w=12, h=8)
    layout.add(series(
        f"Worker census errors per second, by {SOURCE}",
        f"rate({metric_name(CENSUS_ERRORS)}) of each DataLoader worker: census reads that "
        f"failed in the worker (no alert: {CENSUS_ERRORS_ALERT} judges ranks).", "cps",
        [prom("A", rate(CENSUS_ERRORS, WORKER_SELECTOR), f"{WORKER_LEGEND} {legend(SOURCE)}")],
        min_zero=True), w=24, h=7)


def host_memory_census() -> dashboard.Dashboard:
    builder = base_dashboard(
        "Host memory census", HOST_MEMORY_CENSUS_UID,
        "The per-rank host-memory census: gauges as values, running totals as rates, the floors "
        "and alert thresholds of the leak / exhaustion rules, the memory cgroup that really "
        "kills a rank (its limit, OOM kills and pressure), census errors, the accelerator "
        "host allocator, and the ranks' DataLoader workers apart from them. "
        "See docs/dashboards.md.",
        "now-6h")
    layout = Layout(builder)
    for row in (_process_row, _node_row, cgroup_row, exits_row, _alerts_row, _health_row,
                _allocator_row, _worker_row):
        row(layout)
    layout.finish()
    return builder.annotation(oom_kill_annotation()).annotation(rank_exits_annotation())
