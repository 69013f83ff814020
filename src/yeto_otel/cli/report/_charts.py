"""Which charts the page has, what each panel of the census charts holds, and drawing them all
(plotly is imported here, when a page is built, not when the CLI starts).

The rank charts draw ranks (and processes without RANK) only; the DataLoader workers have a
chart of their own: a forked worker's RSS and anonymous memory count pages it still shares with
its rank, so a worker's memory is never added to, nor drawn beside, its rank's."""

from __future__ import annotations

from ...census import (ANONYMOUS, CENSUS_ERRORS, NODE_ANON_PAGES, NODE_AVAILABLE, PRIVATE_DIRTY,
                       RSS, RSS_PEAK, Kind, allocator_metric)
from ...errors import UserFacingError
from ._cgroup_chart import cgroup_chart
from ._format import when
from ._names import ALLOCATOR_PREFIX, CENSUS_PREFIX, NODE_PREFIX, PROCESS_PREFIX
from ._restart_chart import restart_chart
from ._roster import Roster
from ._steplog import steplog_chart
from ._telemetry import Series, Telemetry
from ._time_charts import panels_of, time_chart
from ._timeline import exit_spans, timeline_spans

__all__ = ["CHART_IDS", "charts"]

# Every chart the page can have, in page order: (div id, title). A chart without data is left
# out, and the page lists the ids it drew in <body data-charts="...">.
CHART_IDS = {
    "census-process": "Process memory per rank, with the restart spans",
    "dataloader-workers": "DataLoader workers, grouped under their rank: what each owns and "
                          "its RSS",
    "census-allocator": "Host (pinned) allocator levels per rank",
    "census-rates": "Running totals as rates per second, per rank",
    "census-node": "Node memory",
    "cgroup-memory": "Memory cgroup per host: usage and working set against the limit, OOM "
                     "kills",
    "restart-bytes": "Restarts and checkpoint loads and saves: bytes mapped vs touched, "
                     "per rank",
    "steplog-memory": "Step log: host memory over step",
}


def _fields(stat: str, *fields: str) -> tuple[str, ...]:
    """The metric names of some fields of one allocator stat, in the order given."""
    return tuple(allocator_metric(stat, f).name for f in fields)


_LEVELS = ("current", "peak")
_TOTALS = ("allocated", "freed")

# (panel title, [metric, ...]); within a panel the n-th metric is drawn with the n-th dash
_PROCESS_PANELS = (
    ("Anonymous memory — what a leak grows", (ANONYMOUS.name,)),
    ("RSS (solid) and its high-water mark (dotted)", (RSS.name, RSS_PEAK.name)),
    ("Private dirty", (PRIVATE_DIRTY.name,)),
)
_ALLOCATOR_PANELS = (
    ("Bytes held from the OS: current (solid), peak (dotted)",
     _fields("allocated_bytes", *_LEVELS)),
    ("Bytes in use by tensors: current (solid), peak (dotted)",
     _fields("active_bytes", *_LEVELS)),
    ("Blocks held (solid, peak dotted); active requests (dashed, peak dash-dot)",
     _fields("allocations", *_LEVELS) + _fields("active_requests", *_LEVELS)),
)
_RATE_PANELS = (
    ("Pinned bytes obtained from (solid) / returned to (dotted) the OS, per second",
     _fields("allocated_bytes", *_TOTALS)),
    ("Bytes handed to (solid) / back from (dotted) tensors, per second",
     _fields("active_bytes", *_TOTALS)),
    ("Allocator OS calls per second: alloc (solid), free (dotted)",
     (allocator_metric("num_host_alloc").name, allocator_metric("num_host_free").name)),
    ("Blocks (solid/dotted) and requests (dashed/dash-dot) allocated/freed per second",
     _fields("allocations", *_TOTALS) + _fields("active_requests", *_TOTALS)),
    ("Census read errors per second, by source", (CENSUS_ERRORS.name,)),
)
_NODE_PANELS = (
    ("MemAvailable", (NODE_AVAILABLE.name,)),
    ("AnonPages — the node-wide leak signal", (NODE_ANON_PAGES.name,)),
)
_LEVEL_KINDS = {Kind.GAUGE, Kind.HIGH_WATER_MARK}
# A worker's own census: what it owns first (its copy-on-read growth), then what it maps.
_WORKER_PANELS = (
    ("Private dirty — what the worker owns: its copy-on-read growth", (PRIVATE_DIRTY.name,)),
    ("RSS (solid) and its high-water mark (dotted) — pages shared with the rank included",
     (RSS.name, RSS_PEAK.name)),
    ("Anonymous — pages still shared with the rank since the fork included",
     (ANONYMOUS.name,)),
)
_WORKER_RATE_PANELS = (("Census read errors per second, by source", (CENSUS_ERRORS.name,)),)

# The metrics the census charts draw, by namespace; anything else is listed as not plotted.
PLOTTED_PREFIXES = (PROCESS_PREFIX, ALLOCATOR_PREFIX, NODE_PREFIX, CENSUS_PREFIX)

# The census charts after the process one: (div id, kinds, metric prefix(es), declared panels)
_CENSUS_CHARTS = (
    ("census-allocator", _LEVEL_KINDS, ALLOCATOR_PREFIX, _ALLOCATOR_PANELS),
    ("census-rates", {Kind.RUNNING_TOTAL}, (ALLOCATOR_PREFIX, CENSUS_PREFIX), _RATE_PANELS),
    ("census-node", _LEVEL_KINDS, NODE_PREFIX, _NODE_PANELS),
)


def charts(data: Telemetry, roster: Roster | None = None) -> list[tuple[str, object]]:
    """[(div id, figure)] of the charts that have data, in page order."""
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        raise UserFacingError("the report draws with plotly, which is not installed: "
                              "pip install 'plotly>=6' (or yeto-otel[demo])") from None
    roster = roster or Roster(data)
    x_range = _x_range(data)

    def ranks_only(series: Series) -> bool:
        return not roster.is_worker(series.instance)

    def draw(panels, **kwargs):
        return time_chart(go, make_subplots, data, panels, roster=roster, x_range=x_range,
                          **kwargs)

    drawn = []
    process = panels_of(data, kinds=_LEVEL_KINDS, prefix=PROCESS_PREFIX,
                        declared=_PROCESS_PANELS, keep=ranks_only)
    timeline = bool(timeline_spans(data)) or bool(exit_spans(data))
    if process or timeline:
        drawn.append(("census-process", draw(process, timeline=timeline)))
    workers = _worker_panels(data, roster)
    if workers:
        drawn.append(("dataloader-workers", draw(workers, timeline=False, workers=True)))
    for chart_id, kinds, prefix, declared in _CENSUS_CHARTS:
        panels = panels_of(data, kinds=kinds, prefix=prefix, declared=declared, keep=ranks_only)
        if panels:
            drawn.append((chart_id, draw(panels, timeline=False)))
    cgroup = cgroup_chart(go, make_subplots, data, x_range=x_range)
    if cgroup is not None:
        drawn.append(("cgroup-memory", cgroup))
    restart = restart_chart(go, data, roster)
    if restart is not None:
        drawn.append(("restart-bytes", restart))
    steplog = steplog_chart(go, make_subplots, data, roster)
    if steplog is not None:
        drawn.append(("steplog-memory", steplog))
    for _, fig in drawn:
        fig.update_layout(template="plotly_white", margin=dict(l=90, t=60, b=50),
                          hoverlabel=dict(align="left"), font=dict(size=12))
    return drawn


def _worker_panels(data: Telemetry, roster: Roster) -> list:
    """The workers' levels, and their census read errors when a worker had any (a worker
    lives an epoch: most have too few exports for a rate, and none of them an error)."""
    def worker(series: Series) -> bool:
        return roster.is_worker(series.instance)

    def erred(series: Series) -> bool:
        return worker(series) and (series.nonzero or any(p.value for p in series.points))

    return (panels_of(data, kinds=_LEVEL_KINDS, prefix=PROCESS_PREFIX,
                      declared=_WORKER_PANELS, keep=worker) +
            panels_of(data, kinds={Kind.RUNNING_TOTAL}, prefix=CENSUS_PREFIX,
                      declared=_WORKER_RATE_PANELS, keep=erred))


def _x_range(data: Telemetry) -> list[str] | None:
    """The time axis every census chart shares (so they line up), padded by 2% (at least
    50 ms) on each side."""
    span_range = data.time_range()
    if not span_range:
        return None
    pad = max(int((span_range[1] - span_range[0]) * 0.02), 50_000_000)
    return [when(span_range[0] - pad), when(span_range[1] + pad)]
