#!/usr/bin/env python3
"""Grafana dashboards for yeto-otel, as code.

    python collector/dashboards/generate.py           # (re)write the JSON files beside this script
    python collector/dashboards/generate.py --check   # exit 1, naming each file that differs

Needs the Grafana foundation SDK: `pip install -e ".[dashboards]"`. Output is deterministic
(sorted keys, two-space indent, trailing newline), so the committed JSON is exactly what this
script writes and a test fails when the two drift apart. docs/dashboards.md describes every
panel.

The dashboards use Grafana's classic JSON model (schemaVersion 42, Grafana 12), the form that
"Import dashboard" and file provisioning take. Every datasource is a template variable, so the
files carry no instance-specific datasource uid.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

with warnings.catch_warnings():
    # The SDK marks its classic-model Dashboard builder deprecated in favour of the v2
    # dashboard resource; Grafana's import page and file provisioning take the classic model,
    # so that is what this writes.
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.builders import bargauge, common as common_builders, dashboard
    from grafana_foundation_sdk.builders import prometheus, table, tempo, timeseries
    from grafana_foundation_sdk.cog import builder as cogbuilder
    from grafana_foundation_sdk.cog import variants as cogvariants
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as model
    from grafana_foundation_sdk.models import tempo as tempo_model

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root, for tools/ (not installed)
from tools.generated_files import sync_generated  # noqa: E402
REGENERATE = 'python collector/dashboards/generate.py  (needs: pip install -e ".[dashboards]")'

ISLAND_RESTART_UID = "yeto-island-restart"
HOST_MEMORY_CENSUS_UID = "yeto-host-memory-census"
TAGS = ["yeto-otel", "host-memory"]

# Span names and attributes (docs/spans.md).
RESUME_SPAN = "yeto.resume.anchors"
SPAN_BYTE_ATTRIBUTES = (
    "yeto.anchors.bytes_mapped",
    "yeto.anchors.bytes_touched",
    "yeto.anchors.anonymous_delta",
    "yeto.anchors.file_size",
)

# Template-variable selectors. Rank series carry every label; node series come from local rank
# 0 of each host only, so they are selected (and aggregated) by host, never by rank.
RANK_SELECTOR = 'yeto_cluster=~"$cluster", host_name=~"$host", yeto_rank=~"$rank"'
NODE_SELECTOR = 'yeto_cluster=~"$cluster", host_name=~"$host"'
RANK_LEGEND = "{{instance}}"  # <host>/rank-<RANK>: names host and rank, stable across restarts
NODE_LEGEND = "{{host_name}}"

# refIds with a meaning, so overrides can style a query's series whatever its legend says.
THRESHOLD_REF = "T"  # an alert threshold (red dashed line)
FLOOR_REF = "F"  # a floor recording rule (thick line over the thin raw series)
DASHED_REF = "D"  # the second of a pair: a peak next to its gauge, touched next to mapped
FREED_REF = "R"  # a freed-per-second rate, drawn below the axis


def _ref(type_: str, variable: str) -> common.DataSourceRef:
    return common.DataSourceRef(type_val=type_, uid="${%s}" % variable)


PROMETHEUS = _ref("prometheus", "prometheus")
TEMPO = _ref("tempo", "tempo")
JAEGER = _ref("jaeger", "jaeger")


# --- Jaeger queries ------------------------------------------------------------------------
# The SDK ships no Jaeger query type; this is the datasource's query model (JaegerQuery):
# queryType "search" with service/operation, or no queryType and the trace id in `query`.


class JaegerQuery(cogvariants.Dataquery):
    def __init__(self, ref_id: str, datasource: common.DataSourceRef, *,
                 query_type: Optional[str] = None, service: Optional[str] = None,
                 operation: Optional[str] = None, query: Optional[str] = None,
                 limit: Optional[int] = None) -> None:
        self.ref_id = ref_id
        self.datasource = datasource
        self.query_type = query_type
        self.service = service
        self.operation = operation
        self.query = query
        self.limit = limit

    def to_json(self) -> dict[str, object]:
        payload: dict[str, object] = {"refId": self.ref_id, "datasource": self.datasource}
        for key, value in (("queryType", self.query_type), ("service", self.service),
                           ("operation", self.operation), ("query", self.query),
                           ("limit", self.limit)):
            if value is not None:
                payload[key] = value
        return payload


class _Built(cogbuilder.Builder[Any]):
    """A ready object handed to an SDK method that takes a builder."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def build(self) -> Any:
        return self._value


# --- Layout --------------------------------------------------------------------------------


class Grid:
    """Explicit grid positions, left to right then top to bottom (24 columns)."""

    WIDTH = 24

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.line_height = 0
        self.next_id = 1

    def new_id(self) -> int:
        value = self.next_id
        self.next_id += 1
        return value

    def _newline(self) -> None:
        if self.x:
            self.y += self.line_height
            self.x = 0
            self.line_height = 0

    def row(self) -> model.GridPos:
        self._newline()
        pos = model.GridPos(h=1, w=self.WIDTH, x=0, y=self.y)
        self.y += 1
        return pos

    def place(self, w: int, h: int) -> model.GridPos:
        if self.x + w > self.WIDTH:
            self._newline()
        pos = model.GridPos(h=h, w=w, x=self.x, y=self.y)
        self.x += w
        self.line_height = max(self.line_height, h)
        return pos


class Layout:
    """Rows of panels. An expanded row's panels follow it at the top level of the dashboard; a
    collapsed row holds its panels (and runs none of their queries until it is opened)."""

    def __init__(self, builder: dashboard.Dashboard) -> None:
        self.builder = builder
        self.grid = Grid()
        self._open_row: Optional[dashboard.Row] = None
        self._collapsed_y = 0

    def row(self, title: str, *, collapsed: bool = False) -> None:
        self._close()
        row = dashboard.Row(title).id(self.grid.new_id()).grid_pos(self.grid.row())
        if collapsed:
            self._open_row = row.collapsed(True)
            self._collapsed_y = self.grid.y
        else:
            self.builder.with_row(row.collapsed(False))

    def add(self, panel: Any, w: int, h: int) -> None:
        panel.id(self.grid.new_id()).grid_pos(self.grid.place(w, h))
        if self._open_row is not None:
            self._open_row.with_panel(panel)
        else:
            self.builder.with_panel(panel)

    def _close(self) -> None:
        if self._open_row is not None:
            self.builder.with_row(self._open_row)
            self._open_row = None
            # A collapsed row takes one grid line; what follows starts right below it.
            self.grid.x = 0
            self.grid.line_height = 0
            self.grid.y = self._collapsed_y

    def finish(self) -> None:
        self._close()


# --- Panels --------------------------------------------------------------------------------


def prom(ref: str, expr: str, legend: str, *, instant: bool = False) -> prometheus.Dataquery:
    query = (prometheus.Dataquery().ref_id(ref).datasource(PROMETHEUS).expr(expr)
             .legend_format(legend))
    return query.instant() if instant else query.range()


def _legend(table_legend: bool = False) -> common_builders.VizLegendOptions:
    return (common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE if table_legend
                          else common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM).show_legend(True)
            .calcs(["lastNotNull", "max"] if table_legend else []))


def _tooltip() -> common_builders.VizTooltipOptions:
    return (common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING))


def _props(**values: Any) -> list[model.DynamicConfigValue]:
    """Override properties; a double underscore stands for a dot (custom__lineWidth)."""
    return [model.DynamicConfigValue(id_val=key.replace("__", "."), value=value)
            for key, value in values.items()]


THRESHOLD_STYLE = _props(color={"mode": "fixed", "fixedColor": "red"},
                         custom__lineStyle={"fill": "dash", "dash": [10, 10]},
                         custom__lineWidth=2, custom__fillOpacity=0)
FLOOR_STYLE = _props(custom__lineWidth=3, custom__fillOpacity=0)
DASHED_STYLE = _props(custom__lineStyle={"fill": "dash", "dash": [10, 10]}, custom__fillOpacity=0)
FREED_STYLE = _props(custom__transform="negative-Y")


def series(title: str, description: str, unit: str, targets: list[prometheus.Dataquery], *,
           table_legend: bool = False, min_zero: bool = False) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).description(description).datasource(PROMETHEUS)
             .unit(unit).line_width(1).fill_opacity(0).show_points(common.VisibilityMode.NEVER)
             .legend(_legend(table_legend)).tooltip(_tooltip()))
    if min_zero:
        panel.min(0)
    refs = set()
    for target in targets:
        panel.with_target(target)
        refs.add(target.build().ref_id)
    for ref, style in ((THRESHOLD_REF, THRESHOLD_STYLE), (FLOOR_REF, FLOOR_STYLE),
                       (DASHED_REF, DASHED_STYLE), (FREED_REF, FREED_STYLE)):
        if ref in refs:
            panel.override_by_query(ref, style)
    return panel


def rank_gauge(metric: str) -> str:
    return f"{metric}{{{RANK_SELECTOR}}}"


def node_gauge(metric: str) -> str:
    # Node gauges come from local rank 0 of each host: drop its rank labels (the same series
    # goes on across that rank's restarts, as the recording rules see it).
    return f"max by (yeto_cluster, host_name) ({metric}{{{NODE_SELECTOR}}})"


def rate(metric: str, selector: str = RANK_SELECTOR) -> str:
    return f"rate({metric}{{{selector}}}[$__rate_interval])"


# --- Variables and annotations -------------------------------------------------------------


def datasource_variable(name: str, plugin: str, label: str, description: str) -> Any:
    return (dashboard.DatasourceVariable(name).label(label).type(plugin)
            .description(description))


def label_variable(name: str, label: str, query: str, *, sort: model.VariableSort,
                   description: str) -> Any:
    return (dashboard.QueryVariable(name).label(label).description(description)
            .datasource(PROMETHEUS).query(query).definition(query)
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(sort)
            .multi(True).include_all(True).all_value(".*"))


def prometheus_variables() -> list[Any]:
    return [
        datasource_variable("prometheus", "prometheus", "Prometheus",
                            "Prometheus that the collector remote-writes the census into."),
        label_variable("cluster", "Cluster",
                       "label_values(yeto_process_memory_rss_bytes, yeto_cluster)",
                       sort=model.VariableSort.ALPHABETICAL_ASC,
                       description="yeto_cluster of the ranks."),
        label_variable("host", "Host",
                       'label_values(yeto_process_memory_rss_bytes{yeto_cluster=~"$cluster"}, '
                       "host_name)",
                       sort=model.VariableSort.ALPHABETICAL_ASC,
                       description="host.name of the ranks."),
        label_variable("rank", "Rank",
                       'label_values(yeto_process_memory_rss_bytes{yeto_cluster=~"$cluster", '
                       'host_name=~"$host"}, yeto_rank)',
                       sort=model.VariableSort.NUMERICAL_ASC,
                       description="Global rank (RANK) of the trainer processes."),
    ]


RESTARTS_EXPR = (
    "count by (yeto_cluster, host_name) ("
    f"resets(yeto_process_memory_rss_peak_bytes{{{RANK_SELECTOR}}}[5m]) > 0)"
)


def restart_annotation() -> dashboard.AnnotationQuery:
    # VmHWM only falls when a new process takes the rank's place (instance is stable across
    # restarts). The 5m window must hold two exports; the mark starts at the restart.
    return (dashboard.AnnotationQuery().name("Rank restarts").datasource(PROMETHEUS)
            .enable(True).hide(False).icon_color("orange").expr(RESTARTS_EXPR).step("60s")
            .title_format("Rank restart").text_format("{{host_name}} ({{yeto_cluster}})")
            .tag_keys("yeto_cluster,host_name")
            .placement(None))  # the SDK's default hides the toggle in the controls menu


def dashboard_links() -> dashboard.DashboardLink:
    return (dashboard.DashboardLink("yeto-otel").type(model.DashboardLinkType.DASHBOARDS)
            .tags(["yeto-otel"]).as_dropdown(False).keep_time(True).include_vars(True)
            .target_blank(False).icon("external link").tooltip("").url("")
            .placement(None))  # above the panels, not in the controls menu


def base_dashboard(title: str, uid: str, description: str, time_from: str) -> dashboard.Dashboard:
    return (dashboard.Dashboard(title).uid(uid).description(description).tags(TAGS)
            .editable().tooltip(model.DashboardCursorSync.CROSSHAIR).time(time_from, "now")
            .timezone("browser").refresh("1m").link(dashboard_links()))


# --- Island restart ------------------------------------------------------------------------

ISLAND_VARIABLES_CARRIED = ("prometheus", "cluster", "host", "rank", "service", "tempo", "jaeger")


def _trace_link(trace_id: str) -> list[dict[str, object]]:
    # Back to this dashboard with the same time range and variables and the trace id set: the
    # traces panel beside the search table then shows that trace.
    params = "&".join(["${__url_time_range}"]
                      + ["${%s:queryparam}" % name for name in ISLAND_VARIABLES_CARRIED]
                      + [f"var-trace_id={trace_id}"])
    url = f"/d/{ISLAND_RESTART_UID}/island-restart?{params}"
    return [{"title": "Show this trace below", "url": url, "targetBlank": False}]


def tempo_search() -> table.Panel:
    selected = ", ".join([f"span.{a}" for a in SPAN_BYTE_ATTRIBUTES]
                         + ["span.yeto.anchors.load_mode", "resource.yeto.rank",
                            "resource.host.name"])
    query = (f'{{resource.service.name="$service" && name="{RESUME_SPAN}"}} '
             f"| select({selected})")
    panel = (table.Panel().title("Resume spans (Tempo)").datasource(TEMPO)
             .description(
                 f"Every `{RESUME_SPAN}` span of the service in the time range, one row per "
                 "rank's resume, with the bytes mapped and touched and the anonymous-memory delta. "
                 "Click a Span ID to show its trace in the panel below.")
             .with_target(tempo.Dataquery().ref_id("A").datasource(TEMPO).query_type("traceql")
                          .query(query).table_type(tempo_model.SearchTableType.SPANS)
                          .limit(100).spss(20))
             .with_transformation(model.DataTransformerConfig(
                 id_val="convertFieldType",
                 options={"conversions": [{"targetField": a, "destinationType": "number"}
                                          for a in SPAN_BYTE_ATTRIBUTES],
                          "fields": {}}))
             .override_by_regexp("/bytes_mapped|bytes_touched|anonymous_delta|file_size/",
                                 _props(unit="bytes"))
             .override_by_name("spanID",
                               _props(links=_trace_link("${__data.fields.traceIdHidden}"))))
    return panel


def jaeger_search() -> table.Panel:
    return (table.Panel().title("Resume traces (Jaeger)").datasource(JAEGER)
            .description(
                f"Traces of the service that contain a `{RESUME_SPAN}` span, newest first "
                "(Jaeger's search gives traces, not span attributes: open one to read them). "
                "Click a Trace ID to show it in the panel below.")
            .with_target(_Built(JaegerQuery("A", JAEGER, query_type="search", service="$service",
                                            operation=RESUME_SPAN, limit=100)))
            .override_by_name("traceID", _props(links=_trace_link("${__value.raw}"))))


def trace_view(title: str, ds: common.DataSourceRef, target: Any) -> dashboard.Panel:
    return (dashboard.Panel().type("traces").title(title).datasource(ds)
            .description("The trace whose id is in the Trace ID variable (set by a click in the "
                         "search above, or typed): the resume span, its load child span and "
                         "its fragment_done events.")
            .with_target(target))


def island_restart() -> dashboard.Dashboard:
    builder = base_dashboard(
        "Island restart", ISLAND_RESTART_UID,
        "What a restart's anchor resume cost each rank: bytes mapped vs touched, memory around "
        "the restart (restarts marked), and the resume spans in Tempo or Jaeger. "
        "See docs/dashboards.md.",
        "now-3h")
    for variable in prometheus_variables():
        builder.with_variable(variable)
    builder.with_variable(
        dashboard.QueryVariable("service").label("Service")
        .description("service.name of the trainer (from Prometheus job = [namespace/]name), "
                     "used to search its spans.")
        .datasource(PROMETHEUS)
        .query('label_values(yeto_process_memory_rss_bytes{yeto_cluster=~"$cluster"}, job)')
        .definition('label_values(yeto_process_memory_rss_bytes{yeto_cluster=~"$cluster"}, job)')
        .regex("/^(?:.*\\/)?([^\\/]+)$/")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC))
    builder.with_variable(datasource_variable(
        "tempo", "tempo", "Tempo", "Tempo datasource (used by the Tempo row only)."))
    builder.with_variable(datasource_variable(
        "jaeger", "jaeger", "Jaeger", "Jaeger datasource (used by the Jaeger row only)."))
    builder.with_variable(
        dashboard.TextBoxVariable("trace_id").label("Trace ID").default_value("")
        .description("Trace shown in the traces panels; set by clicking a search result."))
    builder.annotation(restart_annotation())

    layout = Layout(builder)
    layout.row("Resume anchors per rank")
    layout.add(series(
        "Bytes mapped vs touched per rank",
        "Gauges per rank, the values of the process's last anchor resume "
        "(yeto_resume_anchors_bytes_mapped / _touched, label yeto_anchors_load_mode). "
        "Mapped is the part of the anchor file mapped into the process; touched (dashed) is "
        "what of it became resident: the bytes the resume read. Touched far below mapped is the "
        "point of mapping. Eager loads map nothing.",
        "bytes",
        [prom("A", rank_gauge("yeto_resume_anchors_bytes_mapped"),
              f"mapped {RANK_LEGEND} ({{{{yeto_anchors_load_mode}}}})"),
         prom(DASHED_REF, rank_gauge("yeto_resume_anchors_bytes_touched"),
              f"touched {RANK_LEGEND} ({{{{yeto_anchors_load_mode}}}})")],
        table_legend=True, min_zero=True), w=16, h=9)
    layout.add(
        bargauge.Panel().title("Share of the mapping touched").datasource(PROMETHEUS)
        .description("Bytes touched / bytes mapped of each rank's last resume (ranks that "
                     "mapped nothing are left out). Low is good: the resume read a small part "
                     "of the anchors.")
        .unit("percentunit").min(0).max(1)
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.BASIC)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(prom(
            "A", f"{rank_gauge('yeto_resume_anchors_bytes_touched')}\n"
                 f"/ ({rank_gauge('yeto_resume_anchors_bytes_mapped')} > 0)",
            RANK_LEGEND, instant=True)),
        w=8, h=9)

    layout.row("Memory around the restart")
    layout.add(series(
        "RSS per rank", "yeto_process_memory_rss_bytes (VmRSS), a gauge: anonymous, file-backed "
        "and shared pages of the rank's process now in RAM. Mapped anchors that were touched "
        "count here as file-backed pages.", "bytes",
        [prom("A", rank_gauge("yeto_process_memory_rss_bytes"), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Anonymous memory per rank", "yeto_process_memory_anonymous_bytes, a gauge: anonymous "
        "pages resident in the rank's process. An eager resume adds about the anchor file's "
        "size here; a mapped one adds about nothing.", "bytes",
        [prom("A", rank_gauge("yeto_process_memory_anonymous_bytes"), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Node AnonPages", "yeto_node_memory_anon_pages_bytes, a gauge per host (from local rank "
        "0): anonymous pages of all processes on the host.", "bytes",
        [prom("A", node_gauge("yeto_node_memory_anon_pages_bytes"), NODE_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Node MemAvailable", "yeto_node_memory_available_bytes, a gauge per host (from local "
        "rank 0): the kernel's estimate of memory available without swapping.", "bytes",
        [prom("A", node_gauge("yeto_node_memory_available_bytes"), NODE_LEGEND)]), w=12, h=8)

    layout.row("Resume traces: Tempo", collapsed=True)
    layout.add(tempo_search(), w=24, h=9)
    layout.add(trace_view("Trace (Tempo)", TEMPO,
                          tempo.Dataquery().ref_id("A").datasource(TEMPO).query_type("traceql")
                          .query("${trace_id}")), w=24, h=14)

    layout.row("Resume traces: Jaeger", collapsed=True)
    layout.add(jaeger_search(), w=24, h=9)
    layout.add(trace_view("Trace (Jaeger)", JAEGER,
                          _Built(JaegerQuery("A", JAEGER, query="${trace_id}"))), w=24, h=14)
    layout.finish()
    return builder


# --- Host memory census --------------------------------------------------------------------

THRESHOLD_LEGEND = "alert threshold"
ALLOCATOR_STATS = ("allocations", "allocated_bytes", "active_requests", "active_bytes")


def host_memory_census() -> dashboard.Dashboard:
    builder = base_dashboard(
        "Host memory census", HOST_MEMORY_CENSUS_UID,
        "The per-rank host-memory census: gauges as values, running totals as rates, the floors "
        "and alert thresholds of the leak / exhaustion rules, census errors and the accelerator "
        "host allocator. See docs/dashboards.md.",
        "now-6h")
    for variable in prometheus_variables():
        builder.with_variable(variable)
    builder.annotation(restart_annotation())
    layout = Layout(builder)

    layout.row("Process memory per rank (gauges)")
    layout.add(series(
        "RSS", "yeto_process_memory_rss_bytes (VmRSS), a gauge.", "bytes",
        [prom("A", rank_gauge("yeto_process_memory_rss_bytes"), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "RSS high-water mark", "yeto_process_memory_rss_peak_bytes (VmHWM): the largest RSS the "
        "process has had. It only rises; a drop means the rank's process was replaced (the "
        "restart annotations come from these drops).", "bytes",
        [prom("A", rank_gauge("yeto_process_memory_rss_peak_bytes"), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Anonymous memory and its floor", "yeto_process_memory_anonymous_bytes (thin, a gauge) "
        "and its floor instance:yeto_process_memory_anonymous_bytes:min20m (thick): the lowest "
        "value over 20 minutes. A sawtooth's raw value swings while its floor stays flat; a "
        "leak raises the floor.", "bytes",
        [prom("A", rank_gauge("yeto_process_memory_anonymous_bytes"), RANK_LEGEND),
         prom(FLOOR_REF, rank_gauge("instance:yeto_process_memory_anonymous_bytes:min20m"),
              f"floor {RANK_LEGEND}")]), w=12, h=8)
    layout.add(series(
        "Private dirty", "yeto_process_memory_private_dirty_bytes, a gauge: pages only this "
        "process maps and has written; they cannot be dropped or shared, only swapped.",
        "bytes",
        [prom("A", rank_gauge("yeto_process_memory_private_dirty_bytes"), RANK_LEGEND)]),
        w=12, h=8)

    layout.row("Node memory per host (gauges and floors)")
    layout.add(series(
        "Node AnonPages and its floor", "yeto_node_memory_anon_pages_bytes (thin, a gauge from "
        "local rank 0 of each host) and its floor host_name:yeto_node_memory_anon_pages_bytes:"
        "min20m (thick), the input of YetoNodeAnonPagesLeak.", "bytes",
        [prom("A", node_gauge("yeto_node_memory_anon_pages_bytes"), NODE_LEGEND),
         prom(FLOOR_REF, f"host_name:yeto_node_memory_anon_pages_bytes:min20m{{{NODE_SELECTOR}}}",
              f"floor {NODE_LEGEND}")]), w=12, h=8)
    layout.add(series(
        "Node MemAvailable and its floor", "yeto_node_memory_available_bytes (thin, a gauge) and "
        "its floor host_name:yeto_node_memory_available_bytes:min20m (thick), the input of "
        "YetoNodeMemoryExhaustion.", "bytes",
        [prom("A", node_gauge("yeto_node_memory_available_bytes"), NODE_LEGEND),
         prom(FLOOR_REF, f"host_name:yeto_node_memory_available_bytes:min20m{{{NODE_SELECTOR}}}",
              f"floor {NODE_LEGEND}")]), w=12, h=8)

    layout.row("Leak and exhaustion alerts (what the rules compare)")
    threshold = prom(THRESHOLD_REF, "yeto:floor_rise_threshold:bytes", THRESHOLD_LEGEND)
    layout.add(series(
        "Node AnonPages floor rise (20m) vs threshold",
        "host_name:yeto_node_memory_anon_pages_bytes:floor_rise20m: the floor now minus the "
        "floor 20 minutes ago. YetoNodeAnonPagesLeak fires when it is above the threshold "
        "(red) in three successive windows, for 10 minutes.", "bytes",
        [prom("A", f"host_name:yeto_node_memory_anon_pages_bytes:floor_rise20m{{{NODE_SELECTOR}}}",
              NODE_LEGEND), threshold]), w=12, h=8)
    layout.add(series(
        "Rank anonymous floor rise (20m) vs threshold",
        "instance:yeto_process_memory_anonymous_bytes:floor_rise20m, per rank. "
        "YetoRankAnonymousLeak fires when it is above the threshold (red) in three successive "
        "windows, for 10 minutes.", "bytes",
        [prom("A", rank_gauge("instance:yeto_process_memory_anonymous_bytes:floor_rise20m"),
              RANK_LEGEND),
         prom(THRESHOLD_REF, "yeto:floor_rise_threshold:bytes", THRESHOLD_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Node MemAvailable floor change (20m) vs -threshold",
        "host_name:yeto_node_memory_available_bytes:floor_rise20m: negative while MemAvailable's "
        "floor falls. YetoNodeMemoryExhaustion needs it below minus the threshold (red) in "
        "three successive windows.", "bytes",
        [prom("A", f"host_name:yeto_node_memory_available_bytes:floor_rise20m{{{NODE_SELECTOR}}}",
              NODE_LEGEND),
         prom(THRESHOLD_REF, "-yeto:floor_rise_threshold:bytes", f"-{THRESHOLD_LEGEND}")]),
        w=12, h=8)
    layout.add(series(
        "Time to MemAvailable exhaustion vs horizon",
        "host_name:yeto_node_memory_available_bytes:seconds_to_exhaustion: when MemAvailable's "
        "floor reaches zero at its trend over the last hour (absent while the floor is not "
        "falling). YetoNodeMemoryExhaustion fires below the horizon (red) while the floor keeps "
        "falling.", "s",
        [prom("A", "host_name:yeto_node_memory_available_bytes:seconds_to_exhaustion"
                   f"{{{NODE_SELECTOR}}}", NODE_LEGEND),
         prom(THRESHOLD_REF, "yeto:exhaustion_horizon:seconds", "alert horizon")],
        min_zero=True), w=12, h=8)

    layout.row("Census health")
    layout.add(series(
        "Census errors per second, by source",
        "rate(yeto_census_errors_total): census reads that failed and were skipped (a running "
        "total, so plotted as a rate). Any value above zero means gaps in that source's series.",
        "cps",
        [prom("A", "sum by (yeto_cluster, host_name, instance, source) ("
                   f"{rate('yeto_census_errors_total')})",
              f"{RANK_LEGEND} {{{{source}}}}")], min_zero=True), w=24, h=7)

    layout.row("Accelerator host allocator (pinned host memory), per rank")
    for stat, title, unit, what in (
        ("allocated_bytes", "Bytes held from the OS", "bytes",
         "pinned host memory the allocator holds (freed only when its cache is emptied)"),
        ("active_bytes", "Bytes in use by tensors", "bytes", "bytes in use by tensors"),
        ("allocations", "Blocks held", "short", "host allocations (blocks) the allocator holds"),
        ("active_requests", "Requests in use", "short", "allocation requests in use by tensors"),
    ):
        layout.add(series(
            f"{title} ({stat})",
            f"yeto_host_allocator_{stat}_current (a gauge: {what}) and _peak (dashed, the "
            "resettable high-water mark). _current appears only once the stat's freed total has "
            "moved in the process, so a build that never counts frees shows no false leak.",
            unit,
            [prom("A", rank_gauge(f"yeto_host_allocator_{stat}_current"), RANK_LEGEND),
             prom(DASHED_REF, rank_gauge(f"yeto_host_allocator_{stat}_peak"),
                  f"peak {RANK_LEGEND}")], min_zero=True), w=12, h=8)
    for stat, unit in (("allocated_bytes", "binBps"), ("active_bytes", "binBps"),
                       ("allocations", "cps"), ("active_requests", "cps")):
        layout.add(series(
            f"{stat}: allocated and freed per second",
            f"rate(yeto_host_allocator_{stat}_allocated_total) above the axis and "
            f"rate(..._{stat}_freed_total) below it: running totals, plotted as rates.",
            unit,
            [prom("A", rate(f"yeto_host_allocator_{stat}_allocated_total"),
                  f"allocated {RANK_LEGEND}"),
             prom(FREED_REF, rate(f"yeto_host_allocator_{stat}_freed_total"),
                  f"freed {RANK_LEGEND}")]), w=12, h=8)
    layout.add(series(
        "Net bytes per second (allocated - freed)",
        "Rate of allocated minus rate of freed, for allocated_bytes (held) and active_bytes "
        "(in use). Above zero on average is growth; a build whose frees are never counted shows "
        "the whole allocation rate here.", "binBps",
        [prom("A", f"{rate('yeto_host_allocator_allocated_bytes_allocated_total')}\n"
                   f"- {rate('yeto_host_allocator_allocated_bytes_freed_total')}",
              f"held {RANK_LEGEND}"),
         prom("B", f"{rate('yeto_host_allocator_active_bytes_allocated_total')}\n"
                   f"- {rate('yeto_host_allocator_active_bytes_freed_total')}",
              f"in use {RANK_LEGEND}")]), w=12, h=8)
    layout.add(series(
        "Net blocks and requests per second (allocated - freed)",
        "The same for allocations (blocks held) and active_requests (requests in use).", "cps",
        [prom("A", f"{rate('yeto_host_allocator_allocations_allocated_total')}\n"
                   f"- {rate('yeto_host_allocator_allocations_freed_total')}",
              f"blocks {RANK_LEGEND}"),
         prom("B", f"{rate('yeto_host_allocator_active_requests_allocated_total')}\n"
                   f"- {rate('yeto_host_allocator_active_requests_freed_total')}",
              f"requests {RANK_LEGEND}")]), w=12, h=8)
    layout.add(series(
        "Calls to the OS per second",
        "rate(yeto_host_allocator_num_host_alloc_total) above the axis and "
        "rate(yeto_host_allocator_num_host_free_total) below it: how often the allocator asks "
        "the OS for pinned memory and gives it back. Steady alloc calls mean the cache is not "
        "reused.", "cps",
        [prom("A", rate("yeto_host_allocator_num_host_alloc_total"), f"alloc {RANK_LEGEND}"),
         prom(FREED_REF, rate("yeto_host_allocator_num_host_free_total"),
              f"free {RANK_LEGEND}")]), w=12, h=8)
    layout.finish()
    return builder


# --- Output --------------------------------------------------------------------------------

DASHBOARDS = {
    "island-restart.json": island_restart,
    "host-memory-census.json": host_memory_census,
}


def render() -> dict[str, str]:
    """File name -> the exact text of that dashboard's JSON file."""
    encoder = JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False)
    return {name: encoder.encode(build().build()) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each file that is missing or differs")
    parser.add_argument("--dir", type=Path, default=HERE,
                        help="folder of the JSON files (default: beside this script)")
    args = parser.parse_args(argv)
    return sync_generated({args.dir / name: text for name, text in render().items()},
                          check=args.check, regenerate=REGENERATE)

if __name__ == "__main__":
    sys.exit(main())
