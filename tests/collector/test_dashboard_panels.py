"""What the Grafana dashboards in collector/dashboards show: units, legends, rates of running
totals, floors over their raw series, alert inputs against their thresholds, restarts, the job
filter, and the island-restart dashboard's trace search in Tempo or Jaeger. Reads the committed
JSON.
"""

from __future__ import annotations

import re

import pytest
from opentelemetry.sdk.resources import HOST_NAME

from dashboard_testkit import (names, override_values, panel_metrics, panel_with, panels,
                               prometheus_targets, variables)
from yeto_otel.census import CENSUS, PRIVATE_DIRTY, RSS, RSS_PEAK, SMAPS_ROLLUP_AGE, UPTIME
from yeto_otel.names import prometheus_label, prometheus_name_of
from yeto_otel.otel import JOB_ATTRIBUTE


# --- What the panels show ------------------------------------------------------------------------


def _kind(expr: str) -> str:
    # A ratio: a division, or a recorded one (level:metric:...ratio...). Seconds per second
    # (a rate of time stalled) is a share of time: a ratio too.
    recorded = [m.split(":")[2] for m in names.metric_names(expr) if m.count(":") == 2]
    if "/" in expr or any("ratio" in ops for ops in recorded):
        return "ratio"
    if re.search(r"rate\(\s*\w+_seconds_total\b", expr) or any(
            m.count(":") == 2 and "_seconds" in m.split(":")[1] and m.split(":")[2].startswith(
                "rate") for m in names.metric_names(expr)):
        return "ratio"
    if "rate(" in expr:
        return "rate"
    return "value"


def _is_bytes(metric: str) -> bool:
    if ":" in metric:  # level:metric:operations, or a yeto:...:unit constant
        level, base, ops = metric.split(":")
        if "seconds" in ops:
            return False
        return ops == "bytes" or "_bytes" in base
    return bool(re.search(r"_bytes(_|$)", metric))


def _queries_by_unit(panel: dict) -> dict[str, list[str]]:
    """The panel's queries by the unit they are drawn in: the panel's, or a query's own (an
    override of its refId, drawn on an axis of its own)."""
    default = panel["fieldConfig"]["defaults"].get("unit")
    by_unit: dict[str, list[str]] = {}
    for target in panel["targets"]:
        own = override_values(panel, "byFrameRefID", target["refId"], "unit")
        by_unit.setdefault(own or default, []).append(target["expr"])
    return by_unit


def test_units_follow_what_is_plotted(dashboards):
    for name, dashboard in dashboards.items():
        for panel in panels(dashboard):
            if panel["datasource"]["type"] != "prometheus":
                continue
            for unit, exprs in _queries_by_unit(panel).items():
                metrics = set().union(*(names.metric_names(e) for e in exprs))
                kinds = {_kind(e) for e in exprs}
                where = f"{name}: {panel['title']!r} ({unit})"
                assert len(kinds) == 1, f"{where} mixes values, rates and ratios"
                if kinds == {"ratio"}:
                    assert unit == "percentunit", where
                elif all(_is_bytes(m) for m in metrics):
                    assert unit == ("binBps" if kinds == {"rate"} else "bytes"), where
                elif any("seconds" in m for m in metrics):
                    assert unit == "s", where
                else:
                    assert unit in ("short", "cps"), where


def test_private_dirty_is_drawn_with_its_age_on_an_axis_of_its_own(census):
    """Private_Dirty is re-read only within its budget: every panel of it draws the age of
    its values beside it, in seconds on a right axis (its own unit)."""
    private_dirty = prometheus_name_of(PRIVATE_DIRTY)
    age = prometheus_name_of(SMAPS_ROLLUP_AGE)
    shown = [p for p in panels(census) if private_dirty in panel_metrics(p)]
    assert len(shown) == 2  # the ranks' and the workers'
    for panel in shown:
        (target,) = [t for t in panel["targets"] if age in names.metric_names(t["expr"])]
        ref = target["refId"]
        assert override_values(panel, "byFrameRefID", ref, "unit") == "s"
        assert override_values(panel, "byFrameRefID", ref, "custom.axisPlacement") == "right"
        assert target["legendFormat"].startswith("age ")
        assert age in panel["description"]


def test_legends_name_the_rank_or_the_host(dashboards):
    for name, dashboard in dashboards.items():
        for panel, target in prometheus_targets(dashboard):
            metrics = names.metric_names(target["expr"])
            legend = target.get("legendFormat", "")
            if all(m.startswith("yeto:") for m in metrics):  # a threshold: one unlabelled series
                assert "threshold" in legend or "horizon" in legend
                assert override_values(panel, "byFrameRefID", target["refId"], "color")
            else:
                assert "{{instance}}" in legend or "{{host_name}}" in legend, \
                    f"{name}: {panel['title']!r} {target['refId']} legend {legend!r}"


def test_running_totals_are_only_plotted_as_rates(dashboards):
    counters = {n for n in names.exported_metric_names() if n.endswith("_total")}
    for name, dashboard in dashboards.items():
        for panel, target in prometheus_targets(dashboard):
            for counter in counters & names.metric_names(target["expr"]):
                raw = len(re.findall(rf"\b{counter}\b", target["expr"]))
                rated = len(re.findall(rf"\b(?:rate|irate|increase)\(\s*{counter}\b",
                                       target["expr"]))
                assert raw == rated, f"{name}: {panel['title']!r} plots {counter} as a value"


def test_node_gauges_are_selected_by_host_not_rank(dashboards):
    for name, dashboard in dashboards.items():
        for panel, target in prometheus_targets(dashboard):
            if any(m.startswith(("yeto_node_", "host_name:"))
                   for m in names.metric_names(target["expr"])):
                assert "yeto_rank" not in target["expr"].replace("by (yeto_cluster", ""), \
                    f"{name}: {panel['title']!r} filters node series by rank"
                assert "{{host_name}}" in target["legendFormat"]


def test_census_plots_each_floor_with_its_raw_series(census):
    floors = {n for n in names.metric_names(" ".join(
        t["expr"] for _, t in prometheus_targets(census))) if n.endswith(":min20m")}
    assert floors == {"host_name:yeto_node_memory_anon_pages_bytes:min20m",
                      "host_name:yeto_node_memory_available_bytes:min20m",
                      "instance:yeto_process_memory_anonymous_bytes:min20m"}
    for floor in floors:
        raw = floor.split(":")[1]
        panel = panel_with(census, floor)
        assert raw in panel_metrics(panel), f"{floor} is not drawn over {raw}"


def test_census_draws_alert_inputs_against_their_thresholds(census):
    for rule, threshold in (
            ("host_name:yeto_node_memory_anon_pages_bytes:floor_rise20m",
             "yeto:floor_rise_threshold:bytes"),
            ("instance:yeto_process_memory_anonymous_bytes:floor_rise20m",
             "yeto:floor_rise_threshold:bytes"),
            ("host_name:yeto_node_memory_available_bytes:floor_rise20m",
             "yeto:floor_rise_threshold:bytes"),
            ("host_name:yeto_node_memory_available_bytes:seconds_to_exhaustion",
             "yeto:exhaustion_horizon:seconds")):
        assert threshold in panel_metrics(panel_with(census, rule)), rule


def test_census_shows_errors_and_allocator_net_rates(census):
    errors = panel_with(census, "yeto_census_errors_total")
    assert "rate(" in errors["targets"][0]["expr"] and "source" in errors["targets"][0]["expr"]
    for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        allocated = f"yeto_host_allocator_{stat}_allocated_total"
        freed = f"yeto_host_allocator_{stat}_freed_total"
        net = [t["expr"] for _, t in prometheus_targets(census)
               if re.search(rf"rate\({allocated}\b.*\)\s*-\s*rate\({freed}\b", t["expr"],
                            re.DOTALL)]
        assert net, f"no allocated-minus-freed rate for {stat}"


def _prometheus_annotations(dashboard: dict) -> list[dict]:
    return [a for a in dashboard["annotations"]["list"] if a["datasource"]["type"] == "prometheus"]


def test_census_and_island_mark_restarts(dashboards):
    for name, dashboard in dashboards.items():
        # A new process's uptime starts again; VmHWM also falls by a few pages within one.
        restarts = [a for a in _prometheus_annotations(dashboard)
                    if f"resets({prometheus_name_of(UPTIME)}" in a["expr"]]
        assert not [a for a in _prometheus_annotations(dashboard)
                    if f"resets({prometheus_name_of(RSS_PEAK)}" in a["expr"]]
        assert len(restarts) == 1, name
        annotation = restarts[0]
        assert annotation["enable"] and not annotation["hide"]
        assert "{{host_name}}" in annotation["textFormat"]


def test_census_marks_cgroup_oom_kills(census, island):
    others = [a for a in _prometheus_annotations(census) if "resets(" not in a["expr"]]
    (kills,) = [a for a in others if "yeto_rank_exit_info" not in a["expr"]]
    assert kills["enable"] and not kills["hide"] and kills["iconColor"] == "red"
    # An observer's count that rose, or the cgroup's count above itself 5 minutes earlier (the
    # rank that took over from the killed one reports it), by cgroup: host and job, no rank.
    assert re.search(r'increase\(yeto_cgroup_memory_events_total\{event="oom_kill",', kills["expr"])
    assert 'host_name_job:yeto_cgroup_memory_events_total:max{event="oom_kill",' in kills["expr"]
    assert "yeto_rank" not in kills["expr"]
    assert "{{host_name}}" in kills["textFormat"] and "{{job}}" in kills["textFormat"]
    assert len(_prometheus_annotations(island)) == 2  # restarts and rank exits


def test_census_has_a_cgroup_row(census):
    rows = [p["title"] for p in census["panels"] if p["type"] == "row"]
    assert [title for title in rows if "cgroup" in title.lower()], rows
    cgroup = [(panel, target) for panel, target in prometheus_targets(census)
              if any("cgroup" in m for m in names.metric_names(target["expr"]))]
    assert cgroup
    for panel, target in cgroup:
        # Whichever rank reports the cgroup: selected by host, never by rank.
        assert "$rank" not in target["expr"] and "yeto_rank" not in target["expr"], panel["title"]
    # Usage, anon, file and working set against the limit and high, in one panel each way.
    limit, high = "yeto_cgroup_memory_limit_bytes", "yeto_cgroup_memory_high_bytes"
    for metric in ("yeto_cgroup_memory_usage_bytes", "yeto_cgroup_memory_working_set_bytes",
                   "yeto_cgroup_memory_anon_bytes", "yeto_cgroup_memory_file_bytes"):
        assert {limit, high} <= panel_metrics(panel_with(census, metric)), metric
    # The alert inputs against their thresholds.
    for rule, threshold in (
            ("host_name_job:yeto_cgroup_memory_unreclaimable:ratio_max20m",
             "yeto:cgroup_headroom_threshold:ratio"),
            ("host_name_job:yeto_cgroup_memory_unreclaimable_bytes:peak_rise1h",
             "yeto:floor_rise_threshold:bytes"),
            ("host_name_job:yeto_cgroup_memory_pressure_seconds:rate10m",
             "yeto:cgroup_pressure_threshold:ratio")):
        assert threshold in panel_metrics(panel_with(census, rule)), rule
    assert panel_with(census, rule)["fieldConfig"]["defaults"]["unit"] == "percentunit"


# --- Island restart: the Jaeger / Tempo choice --------------------------------------------------


def _row_of(dashboard: dict, panel_id: int) -> dict:
    return next(row for row in dashboard["panels"] if row["type"] == "row"
                and any(p["id"] == panel_id for p in row.get("panels", [])))


@pytest.mark.parametrize("backend", ["tempo", "jaeger"])
def test_island_has_a_trace_search_and_a_trace_view_per_backend(island, backend):
    defined = variables(island)
    assert defined[backend]["type"] == "datasource" and defined[backend]["query"] == backend
    assert defined["trace_id"]["type"] == "textbox"
    mine = [p for p in panels(island) if p["datasource"]["type"] == backend]
    assert sorted(p["type"] for p in mine) == ["table", "traces"]
    search, view = sorted(mine, key=lambda p: p["type"])
    # Both in one collapsed row of their own, which runs no query until it is opened.
    row = _row_of(island, search["id"])
    assert row is _row_of(island, view["id"])
    assert row["collapsed"] is True and backend in row["title"].lower()
    assert [p["id"] for p in row["panels"]] == [search["id"], view["id"]]
    assert [t["refId"] for t in view["targets"]] == ["A"]
    assert view["targets"][0]["query"] == "${trace_id}"
    # A click in the search sets trace_id and keeps everything else.
    links = [item["value"] for o in search["fieldConfig"]["overrides"]
             for item in o["properties"] if item["id"] == "links"]
    assert len(links) == 1 and len(links[0]) == 1
    url = links[0][0]["url"]
    assert url.startswith(f"/d/{island['uid']}/")
    assert "${__url_time_range}" in url and "var-trace_id=${__" in url
    for other in set(defined) - {"trace_id"}:
        assert "${%s:queryparam}" % other in url, f"the link drops {other}"


# The resume span and every checkpoint load and save a trainer makes, with the byte attributes
# of each (docs/spans.md): the trace searches find them all, side by side.
CHECKPOINT_SPANS = {
    "yeto.resume.anchors": ("yeto.anchors.bytes_mapped", "yeto.anchors.bytes_touched",
                            "yeto.anchors.anonymous_delta"),
    "safetensors.load_file": ("yeto.safetensors.bytes_mapped", "yeto.safetensors.bytes_touched",
                              "yeto.safetensors.anonymous_delta"),
    "safetensors.safe_open": ("yeto.safetensors.file_size",),
    "safetensors.load": ("yeto.safetensors.data_size",),
    "dcp.load": ("yeto.dcp.bytes_read", "yeto.dcp.anonymous_delta"),
    "dcp.save": ("yeto.dcp.bytes_written",),
    "dcp.async_save": (),
    "torch.load": ("yeto.torch_load.bytes_mapped", "yeto.torch_load.file_size"),
    "yeto.rank.exit": (),  # a death beside the restarts: its rank, cause, phase and step
}


def test_island_tempo_search_selects_the_resume_and_checkpoint_spans(island):
    search = next(p for p in panels(island) if p["datasource"]["type"] == "tempo"
                  and p["type"] == "table")
    target = search["targets"][0]
    assert target["queryType"] == "traceql" and target["tableType"] == "spans"
    spanset, selected = re.fullmatch(r"\{(.*)\} \| select\((.*)\)", target["query"]).groups()
    assert re.findall(r'(?<![.\w])name="([^"]+)"', spanset) == list(CHECKPOINT_SPANS)
    assert spanset.startswith('resource.service.name="$service" && (')  # the service, any name
    columns = selected.split(", ")
    converted = {c["targetField"] for t in search["transformations"]
                 if t["id"] == "convertFieldType" for c in t["options"]["conversions"]}
    (bytes_matcher,) = [o["matcher"]["options"] for o in search["fieldConfig"]["overrides"]
                        if {"id": "unit", "value": "bytes"} in o["properties"]]
    bytes_columns = re.compile(bytes_matcher.strip("/"))
    for attribute in (a for attributes in CHECKPOINT_SPANS.values() for a in attributes):
        assert f"span.{attribute}" in columns, attribute
        assert attribute in converted and bytes_columns.search(attribute), attribute
    for other in ("yeto.anchors.load_mode", "yeto.safetensors.path", "yeto.dcp.items_read",
                  "yeto.torch_load.path", "yeto.rank", "yeto.exit.cause", "yeto.exit.phase",
                  "yeto.exit.step"):
        assert f"span.{other}" in columns and not bytes_columns.search(other), other
    assert override_values(search, "byName", "spanID", "links")


def test_island_jaeger_search_takes_its_operation_from_a_variable(island):
    """Jaeger's search matches one operation: a variable picks the resume or a load."""
    search = next(p for p in panels(island) if p["datasource"]["type"] == "jaeger"
                  and p["type"] == "table")
    target = search["targets"][0]
    assert target["queryType"] == "search"
    assert target["operation"] == "$operation" and target["service"] == "$service"
    operation = variables(island)["operation"]
    assert operation["type"] == "custom" and not operation["multi"]
    assert operation["query"].split(",") == list(CHECKPOINT_SPANS)
    assert [o["value"] for o in operation["options"]] == list(CHECKPOINT_SPANS)
    assert operation["current"]["value"] == "yeto.resume.anchors"
    assert override_values(search, "byName", "traceID", "links")


def test_island_shows_bytes_and_memory_around_the_restart(island):
    mapped = panel_with(island, "yeto_resume_anchors_bytes_mapped")
    assert "yeto_resume_anchors_bytes_touched" in panel_metrics(mapped)
    for metric in ("yeto_process_memory_rss_bytes", "yeto_process_memory_anonymous_bytes",
                   "yeto_node_memory_anon_pages_bytes", "yeto_node_memory_available_bytes"):
        panel = panel_with(island, metric)
        assert panel["type"] == "timeseries"
        # In an open row: the memory panels are there when the dashboard loads.
        assert panel in island["panels"]


# --- Ranks and their DataLoader workers ------------------------------------------------------

WORKERS_ROW = "DataLoader workers"


def _roles(expr: str) -> set[tuple[str, str]]:
    """The yeto_process_role matchers of every selector in `expr`."""
    return {(op, value) for block in re.findall(r"\{([^{}]*)\}", expr)
            for label, op, value in names.matchers(block) if label == names.ROLE}


def _row_title_of(dashboard: dict, panel: dict) -> str:
    title = ""
    for item in dashboard["panels"]:  # open rows: panels follow their row at the top level
        if item["type"] == "row":
            title = item["title"]
            if any(p["id"] == panel["id"] for p in item.get("panels", [])):
                return title
        elif item["id"] == panel["id"]:
            return title
    raise AssertionError(f"{panel['title']!r} is in no row")


def test_rank_panels_exclude_workers_and_worker_panels_select_only_workers(dashboards):
    worker_targets = 0
    for name, dashboard in dashboards.items():
        for panel, target in prometheus_targets(dashboard):
            expr, where = target["expr"], f"{name}: {panel['title']!r} {target['refId']}"
            roles = _roles(expr)
            # Never a rank and its workers in one expression: nothing sums across roles.
            assert len(roles) <= 1, f"{where} mixes roles {roles}"
            if "yeto_rank=~" in expr:  # selected by $rank: a rank panel or a worker panel
                assert roles in ({names.NOT_A_WORKER}, {names.WORKERS_ONLY}), where
            in_worker_row = WORKERS_ROW in _row_title_of(dashboard, panel)
            if roles == {names.WORKERS_ONLY}:
                worker_targets += 1
                assert in_worker_row, f"{where} reads workers outside the {WORKERS_ROW} row"
                legend = target["legendFormat"]
                assert "rank {{yeto_rank}} / worker {{yeto_dataloader_worker_id}}" in legend, where
                assert "{{instance}}" in legend, f"{where}: a second loader reuses worker ids"
                # Per worker: no aggregation (and so no sum with anything else).
                assert not re.search(r"\b(sum|max|min|avg|count|topk)\b", expr), where
            else:
                assert not in_worker_row, f"{where} in the {WORKERS_ROW} row reads no worker"
    assert worker_targets >= 2


def test_census_has_a_dataloader_workers_row(census, island):
    rows = [p["title"] for p in census["panels"] if p["type"] == "row"]
    assert [title for title in rows if WORKERS_ROW in title], rows
    shown = {metric for panel, target in prometheus_targets(census)
             if _roles(target["expr"]) == {names.WORKERS_ONLY}
             for metric in names.metric_names(target["expr"])}
    # What a worker owns (copy-on-read growth) and its RSS, at least.
    assert {"yeto_process_memory_private_dirty_bytes", "yeto_process_memory_rss_bytes"} <= shown
    # The worker panels take the rank's filters.
    for panel, target in prometheus_targets(census):
        if _roles(target["expr"]) == {names.WORKERS_ONLY}:
            for variable in ("$cluster", "$host", "$rank"):
                assert variable in target["expr"], (panel["title"], variable)
    assert not [t for _, t in prometheus_targets(island)
                if _roles(t["expr"]) == {names.WORKERS_ONLY}]


def test_restart_marks_ignore_workers(dashboards):
    # A worker's VmHWM falls at every epoch (a new process without persistent_workers): it
    # must not mark a rank restart.
    for name, dashboard in dashboards.items():
        for annotation in dashboard["annotations"]["list"]:
            if annotation["datasource"]["type"] == "prometheus":
                assert _roles(annotation["expr"]) == {names.NOT_A_WORKER}, name


# --- Jobs ----------------------------------------------------------------------------------------
HOST, JOB_ID = prometheus_label(HOST_NAME), prometheus_label(JOB_ATTRIBUTE)
CLUSTER = prometheus_label("yeto.cluster")  # the agent inserts it (collector/agent.yaml)
CGROUP_LEVEL = f"{HOST}_job"  # the cgroup rules: per host and job (docs/alerts.md)
EXIT_INFO_METRIC, EXITS_METRIC = "yeto_rank_exit_info", "yeto_rank_exits_total"
DEAD_JOB = prometheus_label("yeto.exit.job.id")


def test_the_job_variable_filters_ranks_workers_and_cgroups_never_nodes(dashboards):
    # Two jobs on one host: a rank's, a worker's and a cgroup's series belong to one job
    # (yeto_job_id), a node's to the host all its jobs share.
    node_rules = {m for d in dashboards.values() for _, t in prometheus_targets(d)
                  for m in names.metric_names(t["expr"]) if m.startswith(f"{HOST}:")}
    node_gauges = {prometheus_name_of(row) for row in CENSUS if row.node}
    judged = {"job": 0, "node": 0}
    for name, dashboard in dashboards.items():
        for panel, target in prometheus_targets(dashboard):
            expr, metrics = target["expr"], names.metric_names(target["expr"])
            cgroup_rules = {m for m in metrics if m.startswith(f"{CGROUP_LEVEL}:")}
            if metrics & {EXIT_INFO_METRIC, EXITS_METRIC}:
                # a death is the dead process's job's; the counts are the host's reporters'
                wanted = {EXIT_INFO_METRIC: f'{DEAD_JOB}=~"$job_id"', EXITS_METRIC: ""}
                assert all(wanted[m] in expr for m in metrics), (name, panel["title"], expr)
            elif _roles(expr) or cgroup_rules:
                assert f'{JOB_ID}=~"$job_id"' in expr, (name, panel["title"], expr)
                judged["job"] += 1
            elif metrics and metrics <= node_rules | node_gauges:
                assert "$job_id" not in expr, (name, panel["title"], expr)
                judged["node"] += 1
    assert judged["job"] >= 20 and judged["node"] >= 4, judged


def test_the_job_variable_narrows_hosts_and_ranks(dashboards):
    for name, dashboard in dashboards.items():
        found = variables(dashboard)
        order = [v["name"] for v in dashboard["templating"]["list"]]
        assert order.index("job_id") < order.index("host") < order.index("rank"), name
        assert f'label_values({prometheus_name_of(RSS)}{{{CLUSTER}=~"$cluster"}}, ' \
               f'{JOB_ID})' == found["job_id"]["query"]
        for narrowed in ("host", "rank"):
            assert f'{JOB_ID}=~"$job_id"' in found[narrowed]["query"], (name, narrowed)
