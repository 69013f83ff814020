"""The Grafana dashboards in collector/dashboards: generated, importable, and saying what they say.

The JSON files are written by collector/dashboards/generate.py; the committed files must be
exactly what it writes. The structural checks read the committed JSON, so they run without the
generator's SDK.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from required_components import missing

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "collector" / "dashboards"
GENERATOR = DASHBOARD_DIR / "generate.py"
FIX = 'python collector/dashboards/generate.py  (needs: pip install -e ".[dashboards]")'
UIDS = {"island-restart.json": "yeto-island-restart",
        "host-memory-census.json": "yeto-host-memory-census"}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


names = _load(Path(__file__).with_name("test_metric_names.py"), "yeto_dashboard_metric_names")


@pytest.fixture(scope="module")
def generator():
    if importlib.util.find_spec("grafana_foundation_sdk") is None:
        missing("the Grafana foundation SDK", 'pip install -e ".[dashboards]"')
    return _load(GENERATOR, "yeto_dashboard_generator")


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict]:
    return {name: json.loads((DASHBOARD_DIR / name).read_text(encoding="utf-8")) for name in UIDS}


@pytest.fixture(scope="module")
def island(dashboards) -> dict:
    return dashboards["island-restart.json"]


@pytest.fixture(scope="module")
def census(dashboards) -> dict:
    return dashboards["host-memory-census.json"]


def panels(dashboard: dict) -> list[dict]:
    """Every panel but rows, including those inside collapsed rows."""
    return [p for p in names.walk_panels(dashboard["panels"]) if p["type"] != "row"]


def variables(dashboard: dict) -> dict[str, dict]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def prometheus_targets(dashboard: dict) -> list[tuple[dict, dict]]:
    return [(panel, target) for panel in panels(dashboard) for target in panel["targets"]
            if panel["datasource"]["type"] == "prometheus"]


def override_values(panel: dict, matcher_id: str, options: str, prop: str):
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        if override["matcher"] == {"id": matcher_id, "options": options}:
            for item in override["properties"]:
                if item["id"] == prop:
                    return item["value"]
    return None


# --- Generated, and only generated -----------------------------------------------------------


def test_committed_json_is_what_the_generator_writes(generator):
    rendered = generator.render()
    assert sorted(rendered) == sorted(UIDS)
    stale = [name for name, text in rendered.items()
             if (DASHBOARD_DIR / name).read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} differ from the generator's output; regenerate with: {FIX}"


def test_check_flag_names_what_differs(generator, tmp_path, capsys):
    assert generator.main(["--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(UIDS)
    assert generator.main(["--check", "--dir", str(tmp_path)]) == 0
    edited = tmp_path / "host-memory-census.json"
    edited.write_text(edited.read_text().replace('"RSS"', '"Resident"', 1))
    (tmp_path / "island-restart.json").unlink()
    capsys.readouterr()
    assert generator.main(["--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "host-memory-census.json" in err and "island-restart.json" in err
    assert "generate.py" in err


def test_generator_output_is_deterministic(generator):
    assert generator.render() == generator.render()


# --- Valid, importable dashboards --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UIDS))
def test_files_are_canonical_json(name):
    text = (DASHBOARD_DIR / name).read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2,
                              ensure_ascii=False) + "\n"


def test_stable_uids_and_a_recent_schema(dashboards):
    for name, dashboard in dashboards.items():
        assert dashboard["uid"] == UIDS[name]
        assert dashboard["schemaVersion"] >= 41  # Grafana 12
        assert "id" not in dashboard or dashboard["id"] is None  # importable anywhere
        assert "yeto-otel" in dashboard["tags"]


def test_panel_ids_are_unique(dashboards):
    for name, dashboard in dashboards.items():
        ids = [p["id"] for p in names.walk_panels(dashboard["panels"])]
        assert all(isinstance(i, int) and i > 0 for i in ids), name
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"


def test_every_panel_has_queries_with_unique_refids(dashboards):
    for name, dashboard in dashboards.items():
        for panel in panels(dashboard):
            refs = [t.get("refId") for t in panel.get("targets", [])]
            assert refs, f"{name}: {panel['title']!r} has no query"
            assert all(refs), f"{name}: {panel['title']!r} has a query without refId"
            assert len(refs) == len(set(refs)), f"{name}: {panel['title']!r} repeats a refId"


def _variable_name(uid: str) -> str | None:
    match = re.fullmatch(r"\$\{(\w+)\}|\$(\w+)", uid or "")
    return match and (match.group(1) or match.group(2))


def test_every_datasource_is_a_variable_of_its_type(dashboards):
    for name, dashboard in dashboards.items():
        defined = variables(dashboard)
        refs = []
        for panel in panels(dashboard):
            refs.append((panel["title"], panel.get("datasource")))
            refs += [(panel["title"], t["datasource"]) for t in panel["targets"]
                     if "datasource" in t]
            for target in panel["targets"]:
                assert target.get("datasource", panel["datasource"]) == panel["datasource"]
        refs += [(a["name"], a["datasource"]) for a in dashboard["annotations"]["list"]]
        refs += [(v["name"], v["datasource"]) for v in defined.values() if v["type"] == "query"]
        for where, ref in refs:
            assert ref, f"{name}: {where!r} has no datasource"
            variable = _variable_name(ref.get("uid"))
            assert variable in defined, f"{name}: {where!r} datasource {ref} is not a variable"
            assert defined[variable]["type"] == "datasource"
            plugin = defined[variable]["query"]
            assert plugin == ref["type"], \
                f"{name}: {where!r} is a {ref['type']} query on a {plugin} variable"


_USED_VARIABLE = re.compile(r"\$\{([A-Za-z_][\w.]*)(?::[^}]*)?\}|\$([A-Za-z_]\w*)|\[\[(\w+)\]\]")


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_every_variable_used_is_defined_and_every_defined_one_used(dashboards):
    for name, dashboard in dashboards.items():
        used = set()
        for text in _strings(dashboard):
            for match in _USED_VARIABLE.finditer(text):
                variable = next(g for g in match.groups() if g)
                if not variable.startswith("__"):  # Grafana's own: $__rate_interval, ...
                    used.add(variable)
        defined = set(variables(dashboard))
        assert used - defined == set(), f"{name}: undefined variables {used - defined}"
        assert defined - used == set(), f"{name}: unused variables {defined - used}"


def test_label_variables_select_cluster_host_and_rank(dashboards):
    for name, dashboard in dashboards.items():
        defined = variables(dashboard)
        for variable, label in (("cluster", "yeto_cluster"), ("host", "host_name"),
                                ("rank", "yeto_rank")):
            query = defined[variable]["query"]
            assert re.fullmatch(rf"label_values\(.*, {label}\)", query), f"{name}: {query}"
            assert defined[variable]["includeAll"] and defined[variable]["multi"]
        assert defined["rank"]["sort"] == 3  # numerical


# --- What the panels show ------------------------------------------------------------------------


def _kind(expr: str) -> str:
    if "/" in expr:
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


def test_units_follow_what_is_plotted(dashboards):
    for name, dashboard in dashboards.items():
        for panel in panels(dashboard):
            if panel["datasource"]["type"] != "prometheus":
                continue
            exprs = [t["expr"] for t in panel["targets"]]
            metrics = set().union(*(names.metric_names(e) for e in exprs))
            kinds = {_kind(e) for e in exprs}
            unit = panel["fieldConfig"]["defaults"].get("unit")
            where = f"{name}: {panel['title']!r}"
            assert len(kinds) == 1, f"{where} mixes values, rates and ratios"
            if kinds == {"ratio"}:
                assert unit == "percentunit", where
            elif all(_is_bytes(m) for m in metrics):
                assert unit == ("binBps" if kinds == {"rate"} else "bytes"), where
            elif any("seconds" in m for m in metrics):
                assert unit == "s", where
            else:
                assert unit in ("short", "cps"), where


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


def _panel_with(dashboard: dict, metric: str) -> dict:
    found = [p for p in panels(dashboard) for t in p["targets"]
             if metric in names.metric_names(t.get("expr", ""))]
    assert found, f"no panel shows {metric}"
    return found[0]


def _panel_metrics(panel: dict) -> set[str]:
    return set().union(*(names.metric_names(t["expr"]) for t in panel["targets"]))


def test_census_plots_each_floor_with_its_raw_series(census):
    floors = {n for n in names.metric_names(" ".join(
        t["expr"] for _, t in prometheus_targets(census))) if n.endswith(":min20m")}
    assert floors == {"host_name:yeto_node_memory_anon_pages_bytes:min20m",
                      "host_name:yeto_node_memory_available_bytes:min20m",
                      "instance:yeto_process_memory_anonymous_bytes:min20m"}
    for floor in floors:
        raw = floor.split(":")[1]
        panel = _panel_with(census, floor)
        assert raw in _panel_metrics(panel), f"{floor} is not drawn over {raw}"


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
        assert threshold in _panel_metrics(_panel_with(census, rule)), rule


def test_census_shows_errors_and_allocator_net_rates(census):
    errors = _panel_with(census, "yeto_census_errors_total")
    assert "rate(" in errors["targets"][0]["expr"] and "source" in errors["targets"][0]["expr"]
    for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        allocated = f"yeto_host_allocator_{stat}_allocated_total"
        freed = f"yeto_host_allocator_{stat}_freed_total"
        net = [t["expr"] for _, t in prometheus_targets(census)
               if re.search(rf"rate\({allocated}\b.*\)\s*-\s*rate\({freed}\b", t["expr"],
                            re.DOTALL)]
        assert net, f"no allocated-minus-freed rate for {stat}"


def test_census_and_island_mark_restarts(dashboards):
    for name, dashboard in dashboards.items():
        annotations = [a for a in dashboard["annotations"]["list"]
                       if a["datasource"]["type"] == "prometheus"]
        assert len(annotations) == 1, name
        annotation = annotations[0]
        assert annotation["enable"] and not annotation["hide"]
        assert "resets(yeto_process_memory_rss_peak_bytes" in annotation["expr"]
        assert "{{host_name}}" in annotation["textFormat"]


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


def test_island_tempo_search_selects_the_resume_span_bytes(island):
    search = next(p for p in panels(island) if p["datasource"]["type"] == "tempo"
                  and p["type"] == "table")
    target = search["targets"][0]
    assert target["queryType"] == "traceql" and target["tableType"] == "spans"
    assert 'name="yeto.resume.anchors"' in target["query"]
    for attribute in ("bytes_mapped", "bytes_touched", "anonymous_delta"):
        assert f"span.yeto.anchors.{attribute}" in target["query"]
    assert override_values(search, "byName", "spanID", "links")


def test_island_jaeger_search_finds_the_resume_operation(island):
    search = next(p for p in panels(island) if p["datasource"]["type"] == "jaeger"
                  and p["type"] == "table")
    target = search["targets"][0]
    assert target["queryType"] == "search"
    assert target["operation"] == "yeto.resume.anchors" and target["service"] == "$service"
    assert override_values(search, "byName", "traceID", "links")


def test_island_shows_bytes_and_memory_around_the_restart(island):
    mapped = _panel_with(island, "yeto_resume_anchors_bytes_mapped")
    assert "yeto_resume_anchors_bytes_touched" in _panel_metrics(mapped)
    for metric in ("yeto_process_memory_rss_bytes", "yeto_process_memory_anonymous_bytes",
                   "yeto_node_memory_anon_pages_bytes", "yeto_node_memory_available_bytes"):
        panel = _panel_with(island, metric)
        assert panel["type"] == "timeseries"
        # In an open row: the memory panels are there when the dashboard loads.
        assert panel in island["panels"]
