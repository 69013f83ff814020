"""Every metric a dashboard or an alert rule queries is one the product exports.

Dashboards (collector/dashboards/*.json) and rules (collector/alerts/*.yml) name metrics the way
Prometheus stores them; the product names them in OpenTelemetry terms. A rename on either side
would leave a panel or an alert silently empty, so each name in each PromQL expression must be:

- an exported metric after the OpenTelemetry-to-Prometheus translation
  (`yeto_otel.prometheus_names.exported_metric_names()`), or such a histogram's
  `_bucket` / `_sum` / `_count` series;
- or, when it has a colon, a recording rule defined in collector/alerts/*.yml.

Every label they select, group or print by is one the product or the agent sets (resource
attribute labels come from the attribute constants through `prometheus_label`), and every read
of a per-process census metric says which processes it means (`yeto_process_role`): a
DataLoader worker carries its rank's yeto_rank but must never be read as (or summed with) it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from yeto_otel import census as census_table, names as resume_metric_table
from yeto_otel.names import exported_metric_names, prometheus_name, prometheus_name_of
from yeto_otel.otel import LAUNCH_PREFIX, Role

# Labels, selectors and the process role (names.ROLE, names.matchers... for the other tests).
from promql_labels import (AGENT_ATTRIBUTES, KNOWN_LABELS, NOT_A_WORKER, ROLE,  # noqa: F401
                           WORKER, WORKER_ID, WORKERS_ONLY, label_names, matchers,
                           metric_selectors, printed_labels)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "collector" / "dashboards"
RULE_DIR = ROOT / "collector" / "alerts"
DASHBOARD_FILES = ("island-restart.json", "host-memory-census.json")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# --- PromQL ---------------------------------------------------------------------------------

# Binary operators, set operators and modifiers that look like identifiers.
_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
             "group_right", "offset", "bool", "inf", "nan", "atan2"}
# Label lists: `by (a, b)`, `without (a)`, `on (a)`, `ignoring (a)`, `group_left (a)`.
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)",
                         re.IGNORECASE)
_IDENTIFIER = re.compile(r"(?<![\w:.])[A-Za-z_:][\w:]*")
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_]\w*|\[\[[^\]]*\]\]")


def _strip_strings_and_comments(expr: str) -> str:
    """The expression with string literals blanked out and `#` comments removed."""
    out = []
    i = 0
    while i < len(expr):
        char = expr[i]
        if char in "\"'`":
            end = i + 1
            while end < len(expr) and expr[end] != char:
                end += 2 if expr[end] == "\\" and char != "`" else 1
            out.append('""')
            i = end + 1
        elif char == "#":
            while i < len(expr) and expr[i] != "\n":
                i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def metric_names(expr: str) -> set[str]:
    """Metric and recording-rule names in a PromQL expression (Grafana variables allowed).

    Skipped: function and aggregation names (an identifier before `(`), keywords, label names
    in `{...}` and in by/without/on/ignoring/group_* lists, strings, durations and numbers.
    """
    text = _strip_strings_and_comments(expr)
    text = _GRAFANA_VARIABLE.sub(" ", text)
    text = re.sub(r"\{[^{}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", " ", text)  # ranges, subqueries
    text = _LABEL_LIST.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        rest = text[match.end():].lstrip()
        if rest.startswith("("):  # a function or an aggregation
            continue
        if match.group().lower() in _KEYWORDS:
            continue
        names.add(match.group())
    return names


def grafana_variable_query_names(query: str) -> set[str]:
    """Metric names in a Prometheus template-variable query (label_values and friends)."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_]\w*\s*\)\s*", query, re.DOTALL)
    if match:
        return metric_names(match.group(1))
    if re.fullmatch(r"\s*label_values\(\s*[A-Za-z_]\w*\s*\)\s*", query):
        return set()
    match = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.DOTALL)
    if match:
        return metric_names(match.group(1))
    return metric_names(query)


# --- Rule files (the subset of YAML that Prometheus rule files use) --------------------------

def read_rules(text: str) -> list[tuple[str, str, str]]:
    """(kind, name, expr) of every rule, kind being "record" or "alert"."""
    rules = []
    for group in yaml.safe_load(text)["groups"]:
        for rule in group["rules"]:
            kind = "record" if "record" in rule else "alert"
            rules.append((kind, rule[kind], rule["expr"]))
    return rules


# --- What the product exports and what the collector queries --------------------------------


def per_process_metrics() -> set[str]:
    """Exported metrics a process reports about itself (ranks, processes and workers alike):
    all but the node gauges, which come from one rank per host."""
    node = {prometheus_name_of(row) for row in census_table.CENSUS if row.node}
    return set(exported_metric_names()) - node


def role_problems(where: str, expr: str, per_process: set[str]) -> list[str]:
    """Reads of a per-process metric that do not say which processes they mean: each must hold
    exactly one yeto_process_role matcher, != or = dataloader_worker."""
    problems = []
    for metric in sorted(metric_names(expr) & per_process):
        for selector in metric_selectors(expr, metric):
            roles = [(op, value) for label, op, value in matchers(selector or "")
                     if label == ROLE]
            if roles not in ([NOT_A_WORKER], [WORKERS_ONLY]):
                problems.append(f"{where}: {metric} read with role matchers {roles}; want "
                                f'{ROLE}!="{WORKER}" (ranks) or {ROLE}="{WORKER}" (workers)')
    return problems



def _histogram_names() -> set[str]:
    rows = (*census_table.CENSUS, census_table.CENSUS_ERRORS,
            *resume_metric_table.RESUME_METRICS)
    return {prometheus_name(row.name, row.unit, monotonic_counter=False) for row in rows
            if "histogram" in str(getattr(row.instrument, "value", row.instrument)).lower()}


def rule_files() -> list[Path]:
    return sorted(RULE_DIR.glob("*.yml")) + sorted(RULE_DIR.glob("*.yaml"))


def all_rules() -> list[tuple[str, str, str, str]]:
    """(file, kind, name, expr) of every rule in collector/alerts."""
    return [(path.name, kind, name, expr) for path in rule_files()
            for kind, name, expr in read_rules(path.read_text(encoding="utf-8"))]


def _is_prometheus(ref: object) -> bool:
    return isinstance(ref, dict) and ref.get("type") == "prometheus"


def walk_panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def dashboard_expressions(dashboard: dict) -> Iterator[tuple[str, str, bool]]:
    """(where, PromQL, is a variable query) of every Prometheus query in a dashboard."""
    for panel in walk_panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if _is_prometheus(target.get("datasource") or panel.get("datasource")):
                yield f"panel {panel.get('title')!r} {target.get('refId')}", target["expr"], False
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if _is_prometheus(annotation.get("datasource")) and annotation.get("expr"):
            yield f"annotation {annotation.get('name')!r}", annotation["expr"], False
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query" and _is_prometheus(variable.get("datasource")):
            query = variable["query"]
            query = query.get("query", "") if isinstance(query, dict) else query
            yield f"variable {variable['name']!r}", query, True


def load_dashboards() -> dict[str, dict]:
    return {name: json.loads((DASHBOARD_DIR / name).read_text(encoding="utf-8"))
            for name in DASHBOARD_FILES}


def queried_expressions() -> list[tuple[str, str, bool]]:
    found = [(f"{name}: {where}", expr, variable)
             for name, dashboard in load_dashboards().items()
             for where, expr, variable in dashboard_expressions(dashboard)]
    found += [(f"{file}: {kind} {name}", expr, False) for file, kind, name, expr in all_rules()]
    return found


def unknown_names(expressions: list[tuple[str, str, bool]], exported: set[str],
                  recorded: set[str], histograms: set[str]) -> list[str]:
    problems = []
    for where, expr, variable in expressions:
        names = grafana_variable_query_names(expr) if variable else metric_names(expr)
        for name in sorted(names):
            if ":" in name:
                if name not in recorded:
                    problems.append(f"{where}: {name} is no recording rule in collector/alerts")
            elif name not in exported and not any(
                    name.endswith(suffix) and name[:-len(suffix)] in histograms
                    for suffix in HISTOGRAM_SUFFIXES):
                problems.append(f"{where}: {name} is not a metric yeto-otel exports")
    return problems


# --- Tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("expr, names", [
    ("yeto_process_memory_rss_bytes", {"yeto_process_memory_rss_bytes"}),
    ('max by (yeto_cluster, host_name) (min_over_time(a_bytes{host_name=~"$host"}[20m]) '
     "and a_bytes)", {"a_bytes"}),
    ("rate(c_total{x=\"y\", source!~'a|b'}[$__rate_interval]) - rate(d_total[5m:1m])",
     {"c_total", "d_total"}),
    ("r:x:min20m - r:x:min20m offset 20m > bool scalar(k:t:bytes)", {"r:x:min20m", "k:t:bytes"}),
    ("a / on (instance) group_left (yeto_rank) b", {"a", "b"}),
    ("sum without (instance) (a) unless ignoring (job) b", {"a", "b"}),
    ("vector(1e3) * 0x1F + 2.5 - time() + a @ start()", {"a"}),
    ("-deriv(x[1h]) > 0 # trailing comment with fake_metric", {"x"}),
    ('label_replace(a, "dst", "$1", "src", "(fake_metric)")', {"a"}),
    ("topk(5, a) or on() vector(0)", {"a"}),
    ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))", {"h_bucket"}),
])
def test_metric_names_extracts_only_metric_names(expr, names):
    assert metric_names(expr) == names


def test_variable_queries_skip_the_label_argument():
    assert grafana_variable_query_names(
        'label_values(m_bytes{yeto_cluster=~"$cluster"}, host_name)') == {"m_bytes"}
    assert grafana_variable_query_names("label_values(yeto_cluster)") == set()
    assert grafana_variable_query_names("query_result(max(m_bytes))") == {"m_bytes"}


def test_dashboards_and_rules_were_all_read():
    files = rule_files()
    assert files, "no rule files in collector/alerts: nothing to check the dashboards against"
    rules = all_rules()
    assert {file for file, *_ in rules} == {path.name for path in files}, \
        "a rule file holds no rule"
    assert any(kind == "record" for _, kind, _, _ in rules)
    assert any(kind == "alert" for _, kind, _, _ in rules)
    expressions = queried_expressions()
    for name in DASHBOARD_FILES:
        mine = [expr for where, expr, _ in expressions if where.startswith(f"{name}: ")]
        assert len(mine) >= 5, f"{name}: hardly any Prometheus query found"
        assert all(metric_names(expr) for expr in mine), f"{name}: a query names no metric"


def test_every_queried_metric_is_exported_or_recorded():
    recorded = {name for _, kind, name, _ in all_rules() if kind == "record"}
    problems = unknown_names(queried_expressions(), set(exported_metric_names()), recorded,
                             _histogram_names())
    assert not problems, "\n".join(problems)


def test_the_check_catches_a_misspelt_name():
    recorded = {name for _, kind, name, _ in all_rules() if kind == "record"}
    exported = set(exported_metric_names())
    dashboard_query = next(expr for where, expr, _ in queried_expressions()
                           if "yeto_process_memory_rss_bytes{" in expr)
    misspelt = dashboard_query.replace("yeto_process_memory_rss_bytes{",
                                       "yeto_process_memory_rss{")
    rule_query = "host_name:yeto_node_memory_anon_pages_bytes:min20m > 0"
    problems = unknown_names(
        [("dashboard", dashboard_query, False), ("misspelt", misspelt, False),
         ("rule", rule_query, False),
         ("unknown rule", rule_query.replace(":min20m", ":min30m"), False),
         ("not a histogram", "yeto_process_memory_rss_bytes_count", False)],
        exported, recorded, _histogram_names())
    assert problems == [
        "misspelt: yeto_process_memory_rss is not a metric yeto-otel exports",
        "unknown rule: host_name:yeto_node_memory_anon_pages_bytes:min30m is no recording rule"
        " in collector/alerts",
        "not a histogram: yeto_process_memory_rss_bytes_count is not a metric yeto-otel exports",
    ]


def test_every_exported_metric_has_a_panel():
    shown = set()
    for dashboard in load_dashboards().values():
        for _, expr, variable in dashboard_expressions(dashboard):
            if not variable:
                shown |= metric_names(expr)
    missing = sorted(set(exported_metric_names()) - shown)
    assert not missing, ("exported but on no dashboard (add a panel in "
                         f"collector/dashboards/generate.py): {missing}")


# --- Labels and roles ------------------------------------------------------------------------


def test_role_labels_come_from_the_attribute_constants():
    assert (ROLE, WORKER_ID, WORKER) == ("yeto_process_role", "yeto_dataloader_worker_id",
                                         "dataloader_worker")
    assert {ROLE, WORKER_ID} <= KNOWN_LABELS
    agent = (ROOT / "collector" / "agent.yaml").read_text(encoding="utf-8")
    assert all(attribute in agent for attribute in AGENT_ATTRIBUTES)
    assert '"yeto.*"' in agent  # kept as labels: yeto.process.role, yeto.dataloader.worker_id


@pytest.mark.parametrize("config", ["agent.yaml", "gateway.yaml"])
def test_what_changes_from_launch_to_launch_is_never_a_label(config):
    """A restart count as a label would start new series at every restart."""
    exporter = yaml.safe_load((ROOT / "collector" / config).read_text(encoding="utf-8"))[
        "exporters"]["prometheus_remote_write"]["resource_constant_labels"]
    assert f"{LAUNCH_PREFIX}*" in exporter["excluded"] and "yeto.*" in exporter["included"]


@pytest.mark.parametrize("expr, labels", [
    ('sum by (yeto_cluster, instance) (rate(a_total{yeto_process_role!="x", b=~"$v"}[5m]))',
     {"yeto_cluster", "instance", "yeto_process_role", "b"}),
    ('a / on (instance) group_left (yeto_rank) b{c="d"}', {"instance", "yeto_rank", "c"}),
])
def test_label_names_finds_selected_and_grouped_labels(expr, labels):
    assert label_names(expr) == labels


def _labelled_texts() -> list[tuple[str, set[str]]]:
    """(where, labels used) of every expression, legend, annotation and alert template."""
    found = [(where, label_names(expr)) for where, expr, _ in queried_expressions()]
    for name, dashboard in load_dashboards().items():
        found += [(f"{name}: {panel.get('title')!r} legend",
                   printed_labels(target.get("legendFormat", "")))
                  for panel in walk_panels(dashboard.get("panels", []))
                  for target in panel.get("targets", [])]
        found += [(f"{name}: annotation", printed_labels(a.get("textFormat", ""))
                   | set(filter(None, a.get("tagKeys", "").split(","))))
                  for a in dashboard.get("annotations", {}).get("list", [])]
    for path in rule_files():
        found += [(f"{path.name}: {rule.get('alert') or rule.get('record')}",
                   printed_labels(" ".join((rule.get("annotations") or {}).values())))
                  for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
                  for rule in group["rules"]]
    return found


def test_every_label_used_is_one_the_product_or_the_agent_sets():
    texts = _labelled_texts()
    used = set().union(*(labels for _, labels in texts))
    assert {ROLE, WORKER_ID, "yeto_rank", "source"} <= used
    problems = [f"{where}: unknown label {label}" for where, labels in texts
                for label in sorted(labels - KNOWN_LABELS)]
    assert not problems, "\n".join(problems)


def test_every_read_of_a_per_process_metric_states_a_role():
    # Variable queries only list label values, which workers share with their ranks.
    per_process = per_process_metrics()
    assert {"yeto_process_memory_private_dirty_bytes", "yeto_census_errors_total",
            "yeto_resume_anchors_bytes_mapped"} <= per_process
    assert "yeto_node_memory_available_bytes" not in per_process
    problems = [problem for where, expr, variable in queried_expressions() if not variable
                for problem in role_problems(where, expr, per_process)]
    assert not problems, "\n".join(problems)


def test_the_role_check_catches_a_forgotten_or_wrong_selector():
    per_process = per_process_metrics()
    rank_query = next(expr for where, expr, _ in queried_expressions()
                      if where.startswith("host-memory-census.json: panel 'RSS' "))
    assert role_problems("ok", rank_query, per_process) == []
    forgotten = rank_query.replace(f', {ROLE}!="{WORKER}"', "")
    assert forgotten != rank_query
    ranks_only = rank_query.replace(f'{ROLE}!="{WORKER}"', f'{ROLE}="{Role.RANK.value}"')
    problems = [p for where, expr in (("forgotten", forgotten), ("bare", "rate(yeto_census_"
                                      "errors_total[5m]) > 0"), ("ranks only", ranks_only))
                for p in role_problems(where, expr, per_process)]
    assert [p.split(":")[0] for p in problems] == ["forgotten", "bare", "ranks only"]
    assert "want yeto_process_role!=" in problems[0]
