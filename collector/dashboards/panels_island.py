"""The island-restart dashboard: what a restart's anchor resume cost each rank, the memory
around it, and the resume spans with the checkpoint loads and saves beside them in Tempo or
Jaeger (docs/dashboards.md)."""

from __future__ import annotations

from typing import Any, Optional

from yeto_otel.census import ANONYMOUS, NODE_ANON_PAGES, NODE_AVAILABLE, RSS
from yeto_otel.names import (ANCHORS_ANONYMOUS_DELTA, ANCHORS_BYTES_MAPPED, EXIT_CAUSE, EXIT_PHASE,
                             EXIT_RANK, EXIT_STEP, RANK_EXIT,
                             ANCHORS_BYTES_TOUCHED, ANCHORS_FILE_SIZE, ANCHORS_LOAD_MODE,
                             ANCHORS_PATH, ANCHORS_TENSOR_COUNT, DCP_ANONYMOUS_DELTA,
                             DCP_ASYNC_SAVE, DCP_BYTES_READ, DCP_BYTES_WRITTEN, DCP_ITEMS_READ,
                             DCP_ITEMS_WRITTEN, DCP_LOAD, DCP_PATH, DCP_SAVE, FRAGMENT_DONE,
                             RESUME_ANCHORS, RESUME_BYTES_MAPPED, RESUME_BYTES_TOUCHED,
                             SAFETENSORS_ANONYMOUS_DELTA, SAFETENSORS_BYTES_MAPPED,
                             SAFETENSORS_BYTES_TOUCHED, SAFETENSORS_DATA_SIZE,
                             SAFETENSORS_FILE_SIZE, SAFETENSORS_LOAD, SAFETENSORS_LOAD_FILE,
                             SAFETENSORS_PATH, SAFETENSORS_SAFE_OPEN, SAFETENSORS_TENSOR_COUNT,
                             TORCH_LOAD, TORCH_LOAD_BYTES_MAPPED, TORCH_LOAD_FILE_SIZE,
                             TORCH_LOAD_PATH)

from dashboard_kit import (DASHED_REF, ISLAND_RESTART_UID, JAEGER, PROMETHEUS, TEMPO, Layout,
                           bargauge, base_dashboard, cogbuilder, cogvariants, common,
                           common_builders, dashboard, datasource_variable, model, prom, props,
                           series, table, tempo, tempo_model)
from dashboard_names import (CLUSTER, HOST_NAME_ATTRIBUTE, JOB, JOB_ID, LOAD_MODE, NODE_LEGEND,
                             RANK_ATTRIBUTE, RANK_LEGEND, SERVICE_NAME_ATTRIBUTE, legend,
                             metric_name, node_gauge, rank_series, resource_attribute,
                             span_attribute)
from panels_exits import rank_exits_annotation

# Span names and attributes (docs/spans.md): the resume span first, then every checkpoint
# load and save a rank's trainer makes (safetensors, DCP, torch.load), then a rank's death
# (a restart that did not go through, or what made the restart happen).
RESUME_SPAN = RESUME_ANCHORS.name
CHECKPOINT_SPANS = tuple(span.name for span in (
    RESUME_ANCHORS, SAFETENSORS_LOAD_FILE, SAFETENSORS_SAFE_OPEN, SAFETENSORS_LOAD, DCP_LOAD,
    DCP_SAVE, DCP_ASYNC_SAVE, TORCH_LOAD, RANK_EXIT))
# The byte attributes (one column each, in bytes), then the rest a row is read by.
SPAN_BYTE_ATTRIBUTES = tuple(dict.fromkeys(attribute.name for attribute in (
    ANCHORS_BYTES_MAPPED, ANCHORS_BYTES_TOUCHED, ANCHORS_ANONYMOUS_DELTA, ANCHORS_FILE_SIZE,
    SAFETENSORS_BYTES_MAPPED, SAFETENSORS_BYTES_TOUCHED, SAFETENSORS_ANONYMOUS_DELTA,
    SAFETENSORS_FILE_SIZE, SAFETENSORS_DATA_SIZE, DCP_BYTES_READ, DCP_BYTES_WRITTEN,
    DCP_ANONYMOUS_DELTA, TORCH_LOAD_BYTES_MAPPED, TORCH_LOAD_FILE_SIZE)))
SPAN_OTHER_ATTRIBUTES = tuple(attribute.name for attribute in (
    ANCHORS_LOAD_MODE, ANCHORS_TENSOR_COUNT, SAFETENSORS_TENSOR_COUNT, DCP_ITEMS_READ,
    DCP_ITEMS_WRITTEN, ANCHORS_PATH, SAFETENSORS_PATH, DCP_PATH, TORCH_LOAD_PATH, EXIT_RANK,
    EXIT_CAUSE, EXIT_PHASE, EXIT_STEP))
ISLAND_VARIABLES_CARRIED = ("prometheus", "cluster", "job_id", "host", "rank", "service", "tempo",
                            "jaeger", "operation")


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
    parts = dict.fromkeys(name.rsplit(".", 1)[-1] for name in SPAN_BYTE_ATTRIBUTES)
    return "/(" + "|".join(parts) + ")$/"


def tempo_search() -> table.Panel:
    selected = ", ".join([span_attribute(a) for a in SPAN_BYTE_ATTRIBUTES + SPAN_OTHER_ATTRIBUTES]
                         + [resource_attribute(RANK_ATTRIBUTE),
                            resource_attribute(HOST_NAME_ATTRIBUTE)])
    names = " || ".join(f'name="{name}"' for name in CHECKPOINT_SPANS)
    query = (f'{{{resource_attribute(SERVICE_NAME_ATTRIBUTE)}="$service" && ({names})}} '
             f'| select({selected})')
    return (table.Panel().title("Resume and checkpoint spans (Tempo)").datasource(TEMPO)
            .description(
                f"Every `{RESUME_SPAN}` span of the service in the time range (one row per "
                "rank's resume) and every checkpoint load and save beside them ("
                + ", ".join(f"`{name}`" for name in CHECKPOINT_SPANS[1:]) + "), with the "
                "bytes mapped, touched, read or written and the anonymous-memory delta; a cell "
                "is empty where the span has no such attribute. The `torch.load` inside a "
                f"resume has a row too, and so does each rank's death (`{RANK_EXIT.name}`: "
                "the dead rank, its cause, phase and step). Click a Span ID to show its trace "
                "in the panel below.")
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
    return (table.Panel().title("Resume and checkpoint traces (Jaeger)").datasource(JAEGER)
            .description(
                "Traces of the service that contain a span of the operation chosen in the "
                f"Operation variable (`{RESUME_SPAN}` or a checkpoint load or save), newest "
                "first: Jaeger's search takes one operation at a time, and gives traces, not "
                "span attributes (open one to read them). Click a Trace ID to show it in the "
                "panel below.")
            .with_target(_Built(JaegerQuery("A", JAEGER, query_type="search", service="$service",
                                            operation="$operation", limit=100)))
            .override_by_name("traceID", props(links=_trace_link("${__value.raw}"))))


def trace_view(title: str, ds: common.DataSourceRef, target: Any) -> dashboard.Panel:
    return (dashboard.Panel().type("traces").title(title).datasource(ds)
            .description("The trace whose id is in the Trace ID variable (set by a click in the "
                         "search above, or typed): the resume span, its load child span and "
                         f"its {FRAGMENT_DONE.name} events, or a checkpoint load or save with "
                         "its phases.")
            .with_target(target))


# --- The dashboard -------------------------------------------------------------------------


def _add_island_variables(builder: dashboard.Dashboard) -> None:
    service_query = (f'label_values({metric_name(RSS)}{{{CLUSTER}=~"$cluster", '
                     f'{JOB_ID}=~"$job_id"}}, {JOB})')
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
        dashboard.CustomVariable("operation").label("Operation")
        .description("The span the Jaeger search looks for (Jaeger searches one operation at a "
                     "time): the resume, or a checkpoint load or save.")
        .values(",".join(CHECKPOINT_SPANS))
        .options([model.VariableOption(selected=name == RESUME_SPAN, text=name, value=name)
                  for name in CHECKPOINT_SPANS])
        .current(model.VariableOption(selected=True, text=RESUME_SPAN, value=RESUME_SPAN)))
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
    layout.row("Resume and checkpoint traces: Tempo", collapsed=True)
    layout.add(tempo_search(), w=24, h=9)
    layout.add(trace_view("Trace (Tempo)", TEMPO,
                          tempo.Dataquery().ref_id("A").datasource(TEMPO).query_type("traceql")
                          .query("${trace_id}")), w=24, h=14)
    layout.row("Resume and checkpoint traces: Jaeger", collapsed=True)
    layout.add(jaeger_search(), w=24, h=9)
    layout.add(trace_view("Trace (Jaeger)", JAEGER,
                          _Built(JaegerQuery("A", JAEGER, query="${trace_id}"))), w=24, h=14)


def island_restart() -> dashboard.Dashboard:
    builder = base_dashboard(
        "Island restart", ISLAND_RESTART_UID,
        "What a restart's anchor resume cost each rank: bytes mapped vs touched, memory around "
        "the restart (restarts and rank exits marked), and the resume spans with the "
        "checkpoint loads and saves beside them in Tempo or Jaeger. "
        "See docs/dashboards.md.",
        "now-3h")
    _add_island_variables(builder)
    layout = Layout(builder)
    _resume_anchors_row(layout)
    _memory_row(layout)
    _trace_rows(layout)
    layout.finish()
    return builder.annotation(rank_exits_annotation())
