"""The Grafana dashboards in collector/dashboards: generated, and only generated, from names the
product's tables define; valid and importable.

The JSON files are written by collector/dashboards/generate.py; the committed files must be
exactly what it writes. The structural checks read the committed JSON, so they run without the
generator's SDK. What the panels show: test_dashboard_panels.py.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from yeto_otel.census import ANONYMOUS, CENSUS, CENSUS_ERRORS, NODE_AVAILABLE
from yeto_otel.names import RESUME_METRICS, SPANS, prometheus_label, prometheus_name_of
from yeto_otel.otel import ROLE_ATTRIBUTE, WORKER_ID_ATTRIBUTE, Role

from dashboard_testkit import DASHBOARD_DIR, FIX, UIDS, load, names, panels, variables


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



# The labels of the resource attributes ranks and agents set (src/yeto_otel/otel/_resource.py,
# collector/agent.yaml): the generator translates the attribute names, never spells a label.
RESOURCE_LABELS = {"host_name", "yeto_rank", "yeto_local_rank", "yeto_world_size", "yeto_cluster"}
# The process role and the worker id: attribute, label, and the role value the panels compare.
ROLE_NAMES = {ROLE_ATTRIBUTE, WORKER_ID_ATTRIBUTE, prometheus_label(ROLE_ATTRIBUTE),
              prometheus_label(WORKER_ID_ATTRIBUTE), Role.DATALOADER_WORKER.value}


def _table_names() -> set[str]:
    """Every metric (OpenTelemetry and Prometheus), span, attribute and attribute label name the
    tables define; a recording rule's name contains its metric's Prometheus name."""
    found = set(RESOURCE_LABELS) | ROLE_NAMES
    for row in (*CENSUS, CENSUS_ERRORS, *RESUME_METRICS):
        found |= {row.name, prometheus_name_of(row)}
    for span in SPANS:
        if span.name.startswith("yeto"):  # not `torch.load`: prose names the function too
            found.add(span.name)
        found |= {event.name for event in span.events}
        for attribute in (*span.attributes, *(a for e in span.events for a in e.attributes)):
            found |= {attribute.name, prometheus_label(attribute.name)}
    return found


def spelled_names(source: str, table: set[str]) -> list[str]:
    """Table names in the string literals of `source` (docstrings aside)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    pattern = re.compile(r"(?<!\w)(" + "|".join(
        sorted(map(re.escape, table), key=len, reverse=True)) + r")(?![\w])")
    return [f"line {node.lineno}: {match}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings for match in pattern.findall(node.value)]


def test_the_generator_takes_every_name_from_the_tables():
    table = _table_names()
    assert spelled_names('q = "rate(yeto_census_errors_total[5m])"', table) == \
        ["line 1: yeto_census_errors_total"]
    assert spelled_names('r = "host_name:yeto_node_memory_available_bytes:min20m"', table) == \
        ["line 1: host_name", "line 1: yeto_node_memory_available_bytes"]
    assert spelled_names('t = "span.yeto.anchors.load_mode"', table) == \
        ["line 1: yeto.anchors.load_mode"]
    assert spelled_names("""w = 'yeto_process_role!="dataloader_worker"'""", table) == \
        ["line 1: yeto_process_role", "line 1: dataloader_worker"]
    modules = sorted(DASHBOARD_DIR.glob("*.py"))
    assert len(modules) > 1
    for path in modules:
        assert spelled_names(path.read_text(encoding="utf-8"), table) == [], path.name


def test_recording_rule_names_are_derived_and_checked_against_the_rule_files():
    rules = load(DASHBOARD_DIR / "dashboard_names.py", "yeto_dashboard_names")
    assert rules.recording_rule(ANONYMOUS, rules.FLOOR) == \
        "instance:yeto_process_memory_anonymous_bytes:min20m"
    assert rules.recording_rule(NODE_AVAILABLE, rules.SECONDS_TO_EXHAUSTION) == \
        "host_name:yeto_node_memory_available_bytes:seconds_to_exhaustion"
    with pytest.raises(LookupError, match="min30m is no recording rule"):
        rules.recording_rule(ANONYMOUS, "min30m")
    with pytest.raises(LookupError, match="no alert"):
        rules.alert("YetoRankAnonymousLeek")


def test_role_selectors_are_built_from_the_attribute_constants():
    built = load(DASHBOARD_DIR / "dashboard_names.py", "yeto_dashboard_names")
    role, worker = prometheus_label(ROLE_ATTRIBUTE), Role.DATALOADER_WORKER.value
    assert (built.ROLE, built.WORKER_ID) == (role, prometheus_label(WORKER_ID_ATTRIBUTE))
    assert (role, built.WORKER_ID) == ("yeto_process_role", "yeto_dataloader_worker_id")
    # Ranks: everything but workers (so plain processes and series older than the label too).
    assert built.NOT_A_WORKER == f'{role}!="{worker}"'
    assert built.WORKERS_ONLY == f'{role}="{worker}"'
    assert built.RANK_SELECTOR.endswith(built.NOT_A_WORKER)
    assert built.WORKER_SELECTOR.endswith(built.WORKERS_ONLY)
    assert built.RANK_SELECTOR.replace(built.NOT_A_WORKER, "") == \
        built.WORKER_SELECTOR.replace(built.WORKERS_ONLY, "")  # the same $rank filters
    assert built.rank_series(ANONYMOUS).endswith(f"{{{built.RANK_SELECTOR}}}")
    assert built.worker_series(ANONYMOUS).endswith(f"{{{built.WORKER_SELECTOR}}}")


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

