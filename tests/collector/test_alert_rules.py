"""The Prometheus rules in collector/alerts: promtool accepts them, their unit tests pass, every
alert is documented in docs/alerts.md, the thresholds have one value everywhere, and the rank
rules never judge a DataLoader worker (which carries its rank's yeto_rank)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from yeto_otel.census import CENSUS, Source
from yeto_otel.names import prometheus_label, prometheus_name_of
from yeto_otel.otel import JOB_ATTRIBUTE, ROLE_ATTRIBUTE, WORKER_ID_ATTRIBUTE, Role

from dashboard_testkit import load, names

ROOT = Path(__file__).resolve().parents[2]
ALERTS_DIR = ROOT / "collector" / "alerts"
TESTS_DIR = ALERTS_DIR / "tests"
RUNBOOK = ROOT / "docs" / "alerts.md"
RULE_FILES = sorted(ALERTS_DIR.glob("*.yml"))
TEST_FILES = sorted(TESTS_DIR.glob("*.yml"))

# Read by dashboards: renaming one breaks them.
RECORDING_RULES = {
    "host_name:yeto_node_memory_anon_pages_bytes:min20m",
    "host_name:yeto_node_memory_anon_pages_bytes:floor_rise20m",
    "host_name:yeto_node_memory_available_bytes:min20m",
    "host_name:yeto_node_memory_available_bytes:seconds_to_exhaustion",
    "instance:yeto_process_memory_anonymous_bytes:min20m",
    "instance:yeto_process_memory_anonymous_bytes:floor_rise20m",
    "yeto:floor_rise_threshold:bytes",
    "yeto:exhaustion_horizon:seconds",
    "instance:yeto_cgroup_memory_unreclaimable_bytes:sum",
    "host_name_job:yeto_cgroup_memory_unreclaimable:ratio_max20m",
    "host_name_job:yeto_cgroup_memory_unreclaimable_bytes:peak_rise1h",
    "host_name_job:yeto_cgroup_memory_events_total:max",
    "host_name_job:yeto_cgroup_memory_pressure_seconds:rate10m",
    "yeto:cgroup_headroom_threshold:ratio",
    "yeto:cgroup_pressure_threshold:ratio",
}
ALERTS = {"YetoNodeAnonPagesLeak", "YetoRankAnonymousLeak", "YetoNodeMemoryExhaustion",
          "YetoCgroupOOMKill", "YetoCgroupMemoryHeadroom", "YetoCgroupMemoryPressure"}
# The floor-and-window alerts read the floor-rise threshold; the cgroup alerts read their own.
FLOOR_ALERTS = {"YetoNodeAnonPagesLeak", "YetoRankAnonymousLeak", "YetoNodeMemoryExhaustion"}
CGROUP_CONSTANTS = {"YetoCgroupMemoryHeadroom": "yeto:cgroup_headroom_threshold:ratio",
                    "YetoCgroupMemoryPressure": "yeto:cgroup_pressure_threshold:ratio"}
SEVERITIES = {"critical", "warning", "info"}


def load_yaml(path: Path) -> object:
    return yaml.safe_load(path.read_text())


def rules_of(path: Path) -> list[dict]:
    return [rule for group in load_yaml(path)["groups"] for rule in group["rules"]]


def all_rules() -> list[dict]:
    return [rule for path in RULE_FILES for rule in rules_of(path)]


def _run(argv: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def _show(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


# --- promtool --------------------------------------------------------------------------------
def test_rule_and_test_files_exist():
    assert RULE_FILES, f"no rule files in {ALERTS_DIR}"
    assert TEST_FILES, f"no promtool tests in {TESTS_DIR}"


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(promtool_bin, path):
    result = _run([promtool_bin, "check", "rules", str(path)])
    assert result.returncode == 0, _show(result)
    found = re.search(r"SUCCESS: (\d+) rules found", result.stdout + result.stderr)
    assert found, _show(result)
    # The YAML reader used by the tests below sees the same rules promtool does.
    assert int(found.group(1)) == len(rules_of(path)), _show(result)


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: p.name)
def test_promtool_unit_tests(promtool_bin, path):
    result = _run([promtool_bin, "test", "rules", path.name], cwd=TESTS_DIR)
    assert result.returncode == 0, _show(result)
    assert "SUCCESS" in result.stdout + result.stderr, _show(result)


def test_generated_unit_tests_are_up_to_date():
    result = _run([sys.executable, str(TESTS_DIR / "generate.py"), "--check"])
    assert result.returncode == 0, _show(result)


def test_every_test_file_loads_the_rules():
    for path in TEST_FILES:
        doc = load_yaml(path)
        assert doc["rule_files"] == ["../yeto-memory.yml"], path.name
        assert doc["evaluation_interval"] == "1m", path.name  # the groups' own interval
        for test in doc["tests"]:
            # promtool 2.42: a test group without its own interval silently has no data.
            assert test.get("interval") == "1m", (path.name, test.get("name"))


# --- structure ---------------------------------------------------------------------------------
def test_every_group_has_an_interval():
    for path in RULE_FILES:
        for group in load_yaml(path)["groups"]:
            assert group.get("interval"), f"{path.name}: group {group['name']} has no interval"


def test_recording_rule_names():
    recorded = {r["record"] for r in all_rules() if "record" in r}
    missing = RECORDING_RULES - recorded
    assert not missing, f"recording rules the dashboards read are missing: {sorted(missing)}"


def github_anchors(markdown: str) -> set[str]:
    """Anchors GitHub gives the headings: lowercase, punctuation dropped, spaces to hyphens,
    `-1`, `-2` ... for repeats. Headings inside fenced code blocks do not count."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_github_anchor_rules():
    assert github_anchors("## YetoNodeAnonPagesLeak\n") == {"yetonodeanonpagesleak"}
    assert github_anchors("## How a leak is told: `min_over_time`!\n# x\n# x\n") == {
        "how-a-leak-is-told-min_over_time", "x", "x-1"}
    assert github_anchors("```\n# not a heading\n```\n") == set()


def test_every_alert_is_documented():
    alerts = [r for r in all_rules() if "alert" in r]
    names = {r["alert"] for r in alerts}
    assert ALERTS <= names, sorted(ALERTS - names)
    anchors = github_anchors(RUNBOOK.read_text())
    for rule in alerts:
        name = rule["alert"]
        labels = rule.get("labels") or {}
        annotations = rule.get("annotations") or {}
        assert labels.get("severity") in SEVERITIES, (name, labels)
        for key in ("summary", "description", "runbook_url"):
            assert (annotations.get(key) or "").strip(), f"{name}: no {key}"
        url = annotations["runbook_url"]
        assert url.startswith("docs/alerts.md#"), (name, url)
        anchor = url.split("#", 1)[1]
        assert anchor in anchors, f"{name}: {url} points to no heading of docs/alerts.md"
        assert anchor == name.lower(), (name, url)


def test_runbook_links_within_the_page_resolve():
    text = RUNBOOK.read_text()
    anchors = github_anchors(text)
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links
    assert not [link for link in links if link not in anchors]


# --- thresholds --------------------------------------------------------------------------------
def _constant(name: str) -> float:
    (rule,) = [r for r in all_rules() if r.get("record") == name]
    match = re.fullmatch(r"\s*vector\(\s*([0-9.e+]+)\s*\)\s*", rule["expr"])
    assert match, f"{name} is not a constant: {rule['expr']!r}"
    return float(match.group(1))


def _humanize1024(value: float) -> str:
    """Prometheus' humanize1024 template function."""
    prefix = ""
    for unit in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(value) < 1024:
            break
        prefix, value = unit, value / 1024
    return f"{value:.4g}{prefix}"


def _literal_numbers(expr: str) -> list[str]:
    """Numbers in an expression, windows and offsets aside."""
    without_windows = re.sub(r"\[[^\]]*\]|offset\s+\w+", "", expr)
    return re.findall(r"(?<![\w:.])\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w:])", without_windows)


def test_thresholds_have_one_value_everywhere():
    threshold = _constant("yeto:floor_rise_threshold:bytes")
    horizon = _constant("yeto:exhaustion_horizon:seconds")
    assert threshold == 10 * 1024 * 1024
    assert horizon == 4 * 3600
    # The alerts read the constants' series; they hold no numbers of their own to drift.
    for rule in all_rules():
        if rule.get("alert") not in FLOOR_ALERTS:
            continue
        expr = rule["expr"]
        assert "scalar(yeto:floor_rise_threshold:bytes)" in expr, rule["alert"]
        numbers = _literal_numbers(expr)
        assert not numbers, f"{rule['alert']}: literal numbers {numbers} beside the constants"
    exhaustion = [r for r in all_rules() if r.get("alert") == "YetoNodeMemoryExhaustion"][0]
    assert "scalar(yeto:exhaustion_horizon:seconds)" in exhaustion["expr"]
    # The runbook and the generated tests state the same numbers.
    runbook = RUNBOOK.read_text()
    mib = threshold / (1024 * 1024)
    assert f"| {mib:g} MiB (" in runbook and f"{threshold:.0f} ({mib:g} MiB)" in runbook
    assert f"| {horizon / 3600:g}h |" in runbook and f"{horizon:.0f} ({horizon / 3600:g}h)" in runbook
    generator = "".join(path.read_text() for path in sorted(TESTS_DIR.glob("*.py")))
    assert f'THRESHOLD = "{_humanize1024(threshold)}B"' in generator


def test_cgroup_thresholds_have_one_value_everywhere():
    headroom = _constant("yeto:cgroup_headroom_threshold:ratio")
    pressure = _constant("yeto:cgroup_pressure_threshold:ratio")
    assert (headroom, pressure) == (0.9, 0.1)
    cgroup_alerts = {r["alert"]: r["expr"] for r in all_rules()
                     if r.get("alert", "").startswith("YetoCgroup")}
    assert set(cgroup_alerts) == ALERTS - FLOOR_ALERTS
    for name, expr in cgroup_alerts.items():
        # Only comparisons with 0 (a count or a rise that is above none); thresholds are series.
        assert set(_literal_numbers(expr)) <= {"0"}, (name, _literal_numbers(expr))
        if name in CGROUP_CONSTANTS:
            assert f"scalar({CGROUP_CONSTANTS[name]})" in expr, name
    # Headroom's "rising" is the same least rise as the floors'.
    assert "scalar(yeto:floor_rise_threshold:bytes)" in cgroup_alerts["YetoCgroupMemoryHeadroom"]
    runbook = RUNBOOK.read_text()
    assert f"`yeto:cgroup_headroom_threshold:ratio` | {headroom:g} (" in runbook
    assert f"`yeto:cgroup_pressure_threshold:ratio` | {pressure:g} (" in runbook
    generator = "".join(path.read_text() for path in sorted(TESTS_DIR.glob("*.py")))
    assert f'HEADROOM = "{headroom * 100:g}%"' in generator
    assert f'PRESSURE_THRESHOLD = "{pressure * 100:g}%"' in generator


# --- the memory cgroup -------------------------------------------------------------------------
def test_cgroup_scenarios_use_the_products_names(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS_DIR))
    kit = load(TESTS_DIR / "scenarios_cgroup_kit.py", "yeto_alert_cgroup_kit")
    rows = {row.name.rsplit(".", 1)[1]: row for row in CENSUS if row.source is Source.CGROUP}
    for constant, field in (("USAGE", "usage"), ("LIMIT", "limit"), ("ANON", "anon"),
                            ("SHMEM", "shmem"), ("FILE", "file"), ("EVENTS", "events"),
                            ("PRESSURE", "pressure"), ("INFO", "info")):
        assert getattr(kit, constant) == prometheus_name_of(rows[field]), constant
    assert (kit.EVENT, kit.LEVEL, kit.CGROUP_PATH) == tuple(
        prometheus_label(rows[field].attribute) for field in ("events", "pressure", "info"))


def test_cgroup_rules_read_every_cgroup_metric_they_name():
    # The rule file spells the Prometheus names (YAML); each must be a cgroup row's.
    cgroup_names = {prometheus_name_of(row) for row in CENSUS if row.source is Source.CGROUP}
    text = "".join(path.read_text() for path in RULE_FILES)
    spelled = set(re.findall(r"(?<![\w:])yeto_cgroup_memory_\w+", text))
    assert spelled and spelled <= cgroup_names, sorted(spelled - cgroup_names)
    # The OOM alert names the cgroup's ranks from the series every rank reports.
    (oom,) = [r for r in all_rules() if r.get("alert") == "YetoCgroupOOMKill"]
    info = [row for row in CENSUS if row.source is Source.CGROUP and row.attribute
            and re.search(rf"(?<![\w:]){prometheus_name_of(row)}(?![\w:])",
                          oom["annotations"]["description"])]
    assert [prometheus_label(row.attribute) for row in info] == ["yeto_cgroup_path"]


# --- DataLoader workers ------------------------------------------------------------------------
ROLE = prometheus_label(ROLE_ATTRIBUTE)
WORKER = Role.DATALOADER_WORKER.value


def test_rank_rules_read_every_process_but_workers():
    per_process = names.per_process_metrics()
    reads = 0
    for rule in all_rules():
        name = rule.get("alert") or rule.get("record")
        expr = rule["expr"]
        assert not names.role_problems(name, expr, per_process)
        for metric in names.metric_names(expr) & per_process:
            for selector in names.metric_selectors(expr, metric):
                reads += 1
                # `!=`: ranks, plain processes and series older than the label; no rule
                # selects workers (docs/alerts.md, "DataLoader workers": no worker alert).
                assert (ROLE, "!=", WORKER) in names.matchers(selector), (name, selector)
    assert reads >= 3  # the rank floor (twice) and the census errors
    # The rank rules' outputs carry no role label: one floor per instance.
    for rule in all_rules():
        if rule.get("record", "").startswith("instance:") and "max by" in rule["expr"]:
            assert ROLE not in re.search(r"max by \(([^)]*)\)", rule["expr"]).group(1)


def _input_series() -> list[dict[str, str]]:
    labels = []
    for path in TEST_FILES:
        for test in load_yaml(path)["tests"]:
            for item in test.get("input_series", []):
                labels.append(dict(re.findall(r'(\w+)="([^"]*)"', item["series"])))
    return labels


def test_unit_tests_put_workers_beside_their_ranks_and_keep_older_series():
    series = _input_series()
    worker_rank = {(s["host_name"], s["yeto_rank"]) for s in series if s.get(ROLE) == WORKER}
    rank_of = {(s["host_name"], s["yeto_rank"]) for s in series
               if "yeto_rank" in s and s.get(ROLE, Role.RANK.value) == Role.RANK.value}
    # Workers with the same yeto_rank as a rank in the same test data, with their worker id.
    assert worker_rank and worker_rank <= rank_of
    assert all(prometheus_label(WORKER_ID_ATTRIBUTE) in s for s in series if s.get(ROLE) == WORKER)
    assert all("/worker-" in s["instance"] for s in series if s.get(ROLE) == WORKER)
    # Ranks with the label, ranks without it (older versions) and plain processes.
    assert any(s.get(ROLE) == Role.RANK.value for s in series)
    assert any("yeto_rank" in s and ROLE not in s for s in series)
    assert any(s.get(ROLE) == Role.PROCESS.value and "yeto_rank" not in s for s in series)


def test_scenario_labels_are_the_products(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS_DIR))
    kit = load(TESTS_DIR / "scenario_kit.py", "yeto_alert_scenario_kit")
    assert (kit.ROLE, kit.WORKER_ID, kit.JOB_ID) == (
        ROLE, prometheus_label(WORKER_ID_ATTRIBUTE), prometheus_label(JOB_ATTRIBUTE))
    assert (kit.RANK_ROLE, kit.PROCESS_ROLE, kit.WORKER_ROLE) == (
        Role.RANK.value, Role.PROCESS.value, WORKER)


def test_runbook_explains_workers():
    runbook = RUNBOOK.read_text()
    assert "dataloader-workers" in github_anchors(runbook)
    assert f'{ROLE}!="{WORKER}"' in runbook and f'{ROLE}="{WORKER}"' in runbook
