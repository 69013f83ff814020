"""The building blocks of both dashboards: grid layout, time-series panels and their styles,
template variables, the restart annotation and the dashboard frame.

The Grafana foundation SDK is imported here, once, under the deprecation filter below; the
panel modules and the generator take its modules (and JSONEncoder) from here.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

with warnings.catch_warnings():
    # The SDK marks its classic-model Dashboard builder deprecated in favour of the v2
    # dashboard resource; Grafana's import page and file provisioning take the classic model,
    # so that is what this writes.
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.builders import common as common_builders, dashboard
    from grafana_foundation_sdk.builders import prometheus, timeseries
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as model
    # For the panel modules and the generator:
    from grafana_foundation_sdk.builders import bargauge, table, tempo  # noqa: F401
    from grafana_foundation_sdk.cog import builder as cogbuilder  # noqa: F401
    from grafana_foundation_sdk.cog import variants as cogvariants  # noqa: F401
    from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: F401
    from grafana_foundation_sdk.models import tempo as tempo_model  # noqa: F401

from yeto_otel.census import RSS, UPTIME

from dashboard_names import (CLUSTER, HOST, HOST_NAME_ATTRIBUTE, JOB_ATTRIBUTE_NAME, JOB_ID, RANK,
                             legend, metric_name, rank_series)

ISLAND_RESTART_UID = "yeto-island-restart"
HOST_MEMORY_CENSUS_UID = "yeto-host-memory-census"
TAGS = ["yeto-otel", "host-memory"]

# refIds with a meaning, so overrides can style a query's series whatever its legend says.
THRESHOLD_REF = "T"  # an alert threshold (red dashed line)
FLOOR_REF = "F"  # a floor recording rule (thick line over the thin raw series)
DASHED_REF = "D"  # the second of a pair: a peak next to its gauge, touched next to mapped
FREED_REF = "R"  # a freed-per-second rate, drawn below the axis
HIGH_REF = "H"  # a soft limit (a cgroup's memory.high: orange dashed line)
AGE_REF = "G"  # how old the panel's other values are: seconds, dotted, on a right axis


def _ref(type_: str, variable: str) -> common.DataSourceRef:
    return common.DataSourceRef(type_val=type_, uid="${%s}" % variable)


PROMETHEUS = _ref("prometheus", "prometheus")
TEMPO = _ref("tempo", "tempo")
JAEGER = _ref("jaeger", "jaeger")


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


def prom(ref: str, expr: str, legend_format: str, *,
         instant: bool = False) -> prometheus.Dataquery:
    query = (prometheus.Dataquery().ref_id(ref).datasource(PROMETHEUS).expr(expr)
             .legend_format(legend_format))
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


def props(**values: Any) -> list[model.DynamicConfigValue]:
    """Override properties; a double underscore stands for a dot (custom__lineWidth)."""
    return [model.DynamicConfigValue(id_val=key.replace("__", "."), value=value)
            for key, value in values.items()]


THRESHOLD_STYLE = props(color={"mode": "fixed", "fixedColor": "red"},
                        custom__lineStyle={"fill": "dash", "dash": [10, 10]},
                        custom__lineWidth=2, custom__fillOpacity=0)
FLOOR_STYLE = props(custom__lineWidth=3, custom__fillOpacity=0)
DASHED_STYLE = props(custom__lineStyle={"fill": "dash", "dash": [10, 10]}, custom__fillOpacity=0)
FREED_STYLE = props(custom__transform="negative-Y")
HIGH_STYLE = props(color={"mode": "fixed", "fixedColor": "orange"},
                   custom__lineStyle={"fill": "dash", "dash": [10, 10]},
                   custom__lineWidth=2, custom__fillOpacity=0)
# A unit of its own: the panel's values are bytes, their age is seconds.
AGE_STYLE = props(unit="s", min=0, custom__axisPlacement="right",
                  custom__axisLabel="age of the value (s)",
                  custom__lineStyle={"fill": "dot", "dash": [0, 10]}, custom__fillOpacity=0)


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
                       (DASHED_REF, DASHED_STYLE), (FREED_REF, FREED_STYLE),
                       (HIGH_REF, HIGH_STYLE), (AGE_REF, AGE_STYLE)):
        if ref in refs:
            panel.override_by_query(ref, style)
    return panel


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


def label_values(label: str, selector: str = "") -> str:
    """A variable query: the values of `label` on the ranks' RSS series."""
    selected = f"{{{selector}}}" if selector else ""
    return f"label_values({metric_name(RSS)}{selected}, {label})"


def prometheus_variables() -> list[Any]:
    return [
        datasource_variable("prometheus", "prometheus", "Prometheus",
                            "Prometheus that the collector remote-writes the census into."),
        label_variable("cluster", "Cluster", label_values(CLUSTER),
                       sort=model.VariableSort.ALPHABETICAL_ASC,
                       description=f"{CLUSTER} of the ranks."),
        label_variable("job_id", "Job", label_values(JOB_ID, f'{CLUSTER}=~"$cluster"'),
                       sort=model.VariableSort.ALPHABETICAL_ASC,
                       description=f"{JOB_ATTRIBUTE_NAME} of the ranks: the launch's job (a "
                       "Slurm job, a chosen torchrun run id, YETO_OTEL_JOB_ID). All also "
                       "shows ranks whose job is not known."),
        label_variable("host", "Host",
                       label_values(HOST, f'{CLUSTER}=~"$cluster", {JOB_ID}=~"$job_id"'),
                       sort=model.VariableSort.ALPHABETICAL_ASC,
                       description=f"{HOST_NAME_ATTRIBUTE} of the ranks."),
        label_variable("rank", "Rank",
                       label_values(RANK, f'{CLUSTER}=~"$cluster", {JOB_ID}=~"$job_id", '
                                    f'{HOST}=~"$host"'),
                       sort=model.VariableSort.NUMERICAL_ASC,
                       description="Global rank (RANK) of the trainer processes."),
    ]


RESTARTS_EXPR = f"count by ({CLUSTER}, {HOST}) (resets({rank_series(UPTIME)}[5m]) > 0)"


def restart_annotation() -> dashboard.AnnotationQuery:
    # A process's uptime falls only when a new process takes the rank's place (instance is
    # stable across restarts). Not VmHWM: the kernel's approximate per-CPU RSS counters let it
    # fall by a few pages within one process. The 5m window must hold two exports; the mark
    # starts at the restart.
    return (dashboard.AnnotationQuery().name("Rank restarts").datasource(PROMETHEUS)
            .enable(True).hide(False).icon_color("orange").expr(RESTARTS_EXPR).step("60s")
            .title_format("Rank restart").text_format(f"{legend(HOST)} ({legend(CLUSTER)})")
            .tag_keys(f"{CLUSTER},{HOST}")
            .placement(None))  # the SDK's default hides the toggle in the controls menu


def dashboard_links() -> dashboard.DashboardLink:
    return (dashboard.DashboardLink("yeto-otel").type(model.DashboardLinkType.DASHBOARDS)
            .tags(["yeto-otel"]).as_dropdown(False).keep_time(True).include_vars(True)
            .target_blank(False).icon("external link").tooltip("").url("")
            .placement(None))  # above the panels, not in the controls menu


def base_dashboard(title: str, uid: str, description: str, time_from: str) -> dashboard.Dashboard:
    """A dashboard with the frame both share: tags, links, the Prometheus variables and the
    restart annotation."""
    builder = (dashboard.Dashboard(title).uid(uid).description(description).tags(TAGS)
               .editable().tooltip(model.DashboardCursorSync.CROSSHAIR).time(time_from, "now")
               .timezone("browser").refresh("1m").link(dashboard_links()))
    for variable in prometheus_variables():
        builder.with_variable(variable)
    return builder.annotation(restart_annotation())
