"""The island-restart dashboard: what a restart's anchor resume cost each rank, the memory
around it, and the resume spans in Tempo or Jaeger (docs/dashboards.md)."""

from __future__ import annotations

from typing import Any, Optional

from yeto_otel.census import ANONYMOUS, NODE_ANON_PAGES, NODE_AVAILABLE, RSS
from yeto_otel.names import (ANCHORS_ANONYMOUS_DELTA, ANCHORS_BYTES_MAPPED,
                             ANCHORS_BYTES_TOUCHED, ANCHORS_FILE_SIZE, ANCHORS_LOAD_MODE,
                             FRAGMENT_DONE, RESUME_ANCHORS, RESUME_BYTES_MAPPED,
                             RESUME_BYTES_TOUCHED)

from dashboard_kit import (DASHED_REF, ISLAND_RESTART_UID, JAEGER, PROMETHEUS, TEMPO, Layout,
                           bargauge, base_dashboard, cogbuilder, cogvariants, common,
                           common_builders, dashboard, datasource_variable, model, prom, props,
                           series, table, tempo, tempo_model)
from dashboard_names import (CLUSTER, HOST_NAME_ATTRIBUTE, JOB, LOAD_MODE, NODE_LEGEND,
                             RANK_ATTRIBUTE, RANK_LEGEND, SERVICE_NAME_ATTRIBUTE, legend,
                             metric_name, node_gauge, rank_series, resource_attribute,
                             span_attribute)

# Span names and attributes (docs/spans.md).
RESUME_SPAN = RESUME_ANCHORS.name
SPAN_BYTE_ATTRIBUTES = tuple(attribute.name for attribute in (
    ANCHORS_BYTES_MAPPED, ANCHORS_BYTES_TOUCHED, ANCHORS_ANONYMOUS_DELTA, ANCHORS_FILE_SIZE))
ISLAND_VARIABLES_CARRIED = ("prometheus", "cluster", "host", "rank", "service", "tempo", "jaeger")


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


# --- Trace panels --------------------------------------------------------------------------


def _trace_link(trace_id: str) -> list[dict[str, object]]:
    # Back to this dashboard with the same time range and variables and the trace id set: the
    # traces panel beside the search table then shows that trace.
    params = "&".join(["${__url_time_range}"]
                      + ["${%s:queryparam}" % name for name in ISLAND_VARIABLES_CARRIED]
                      + [f"var-trace_id={trace_id}"])
    url = f"/d/{ISLAND_RESTART_UID}/island-restart?{params}"
    return [{"title": "Show this trace below", "url": url, "targetBlank": False}]


def _byte_columns() -> str:
    """A regexp matching the byte attributes' columns by their last name part."""
    return "/" + "|".join(name.rsplit(".", 1)[-1] for name in SPAN_BYTE_ATTRIBUTES) + "/"


def tempo_search() -> table.Panel:
    selected = ", ".join([span_attribute(a) for a in SPAN_BYTE_ATTRIBUTES]
                         + [span_attribute(ANCHORS_LOAD_MODE.name),
                            resource_attribute(RANK_ATTRIBUTE),
                            resource_attribute(HOST_NAME_ATTRIBUTE)])
    query = (f'{{{resource_attribute(SERVICE_NAME_ATTRIBUTE)}="$service" && '
             f'name="{RESUME_SPAN}"}} | select({selected})')
    return (table.Panel().title("Resume spans (Tempo)").datasource(TEMPO)
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
            .override_by_regexp(_byte_columns(), props(unit="bytes"))
            .override_by_name("spanID",
                              props(links=_trace_link("${__data.fields.traceIdHidden}"))))


def jaeger_search() -> table.Panel:
    return (table.Panel().title("Resume traces (Jaeger)").datasource(JAEGER)
            .description(
                f"Traces of the service that contain a `{RESUME_SPAN}` span, newest first "
                "(Jaeger's search gives traces, not span attributes: open one to read them). "
                "Click a Trace ID to show it in the panel below.")
            .with_target(_Built(JaegerQuery("A", JAEGER, query_type="search", service="$service",
                                            operation=RESUME_SPAN, limit=100)))
            .override_by_name("traceID", props(links=_trace_link("${__value.raw}"))))


def trace_view(title: str, ds: common.DataSourceRef, target: Any) -> dashboard.Panel:
    return (dashboard.Panel().type("traces").title(title).datasource(ds)
            .description("The trace whose id is in the Trace ID variable (set by a click in the "
                         "search above, or typed): the resume span, its load child span and "
                         f"its {FRAGMENT_DONE.name} events.")
            .with_target(target))


# --- The dashboard -------------------------------------------------------------------------


def _add_island_variables(builder: dashboard.Dashboard) -> None:
    service_query = f'label_values({metric_name(RSS)}{{{CLUSTER}=~"$cluster"}}, {JOB})'
    builder.with_variable(
        dashboard.QueryVariable("service").label("Service")
        .description(f"{SERVICE_NAME_ATTRIBUTE} of the trainer (from Prometheus {JOB} = "
                     "[namespace/]name), used to search its spans.")
        .datasource(PROMETHEUS).query(service_query).definition(service_query)
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


def _resume_anchors_row(layout: Layout) -> None:
    mapped, touched = metric_name(RESUME_BYTES_MAPPED), metric_name(RESUME_BYTES_TOUCHED)
    layout.row("Resume anchors per rank")
    layout.add(series(
        "Bytes mapped vs touched per rank",
        "Gauges per rank, the values of the process's last anchor resume "
        f"({mapped} / _touched, label {LOAD_MODE}). "
        "Mapped is the part of the anchor file mapped into the process; touched (dashed) is "
        "what of it became resident: the bytes the resume read. Touched far below mapped is the "
        "point of mapping. Eager loads map nothing.",
        "bytes",
        [prom("A", rank_series(mapped), f"mapped {RANK_LEGEND} ({legend(LOAD_MODE)})"),
         prom(DASHED_REF, rank_series(touched), f"touched {RANK_LEGEND} ({legend(LOAD_MODE)})")],
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
            "A", f"{rank_series(touched)}\n/ ({rank_series(mapped)} > 0)",
            RANK_LEGEND, instant=True)),
        w=8, h=9)


def _memory_row(layout: Layout) -> None:
    layout.row("Memory around the restart")
    layout.add(series(
        "RSS per rank", f"{metric_name(RSS)} ({RSS.field}), a gauge: anonymous, file-backed "
        "and shared pages of the rank's process now in RAM. Mapped anchors that were touched "
        "count here as file-backed pages.", "bytes",
        [prom("A", rank_series(RSS), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        "Anonymous memory per rank", f"{metric_name(ANONYMOUS)}, a gauge: anonymous "
        "pages resident in the rank's process. An eager resume adds about the anchor file's "
        "size here; a mapped one adds about nothing.", "bytes",
        [prom("A", rank_series(ANONYMOUS), RANK_LEGEND)]), w=12, h=8)
    layout.add(series(
        f"Node {NODE_ANON_PAGES.field}", f"{metric_name(NODE_ANON_PAGES)}, a gauge per host "
        "(from one rank per host): anonymous pages of all processes on the host.", "bytes",
        [prom("A", node_gauge(NODE_ANON_PAGES), NODE_LEGEND)]), w=12, h=8)
    layout.add(series(
        f"Node {NODE_AVAILABLE.field}", f"{metric_name(NODE_AVAILABLE)}, a gauge per host "
        "(from one rank per host): the kernel's estimate of memory available without swapping.",
        "bytes",
        [prom("A", node_gauge(NODE_AVAILABLE), NODE_LEGEND)]), w=12, h=8)


def _trace_rows(layout: Layout) -> None:
    layout.row("Resume traces: Tempo", collapsed=True)
    layout.add(tempo_search(), w=24, h=9)
    layout.add(trace_view("Trace (Tempo)", TEMPO,
                          tempo.Dataquery().ref_id("A").datasource(TEMPO).query_type("traceql")
                          .query("${trace_id}")), w=24, h=14)
    layout.row("Resume traces: Jaeger", collapsed=True)
    layout.add(jaeger_search(), w=24, h=9)
    layout.add(trace_view("Trace (Jaeger)", JAEGER,
                          _Built(JaegerQuery("A", JAEGER, query="${trace_id}"))), w=24, h=14)


def island_restart() -> dashboard.Dashboard:
    builder = base_dashboard(
        "Island restart", ISLAND_RESTART_UID,
        "What a restart's anchor resume cost each rank: bytes mapped vs touched, memory around "
        "the restart (restarts marked), and the resume spans in Tempo or Jaeger. "
        "See docs/dashboards.md.",
        "now-3h")
    _add_island_variables(builder)
    layout = Layout(builder)
    _resume_anchors_row(layout)
    _memory_row(layout)
    _trace_rows(layout)
    layout.finish()
    return builder
