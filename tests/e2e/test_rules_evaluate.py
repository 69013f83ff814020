"""The rules in collector/alerts evaluate cleanly in a real Prometheus on the census that two
trainer-like ranks send through the agent, and the floor and memory-cgroup rules record series
for them."""

from __future__ import annotations

import functools
import time
import uuid
from pathlib import Path

import pytest
import yaml

import required_components
from e2e_ranks import job_matcher, run_ranks

stack_module = required_components.stack_module()

HERE = Path(__file__).resolve().parent
ALERTS_DIR = HERE.parents[1] / "collector" / "alerts"
WORLD = 2
QUERY_TIMEOUT = 60.0
# Every group evaluates once a minute: a full round after the census arrived takes up to that.
EVALUATION_TIMEOUT = 150.0

RANK_FLOOR = "instance:yeto_process_memory_anonymous_bytes:min20m"
NODE_FLOORS = ("host_name:yeto_node_memory_anon_pages_bytes:min20m",
               "host_name:yeto_node_memory_available_bytes:min20m")


def _group_names() -> set[str]:
    """Group names of every rule file, as Prometheus should have loaded them."""
    return {group["name"] for path in ALERTS_DIR.glob("*.yml")
            for group in yaml.safe_load(path.read_text())["groups"]}


@pytest.fixture(scope="module")
def run(stack, instrument_bin, tmp_path_factory):
    """Both ranks run to completion; returns (service, {rank: CompletedProcess}, census time):
    the census time is when Prometheus first answered with both ranks' and the node's census."""
    service = f"yeto-rules-{uuid.uuid4().hex[:8]}"
    workdir = tmp_path_factory.mktemp("ranks")
    results = run_ranks(stack, instrument_bin, workdir, service, world=WORLD, seconds=3)
    for rank, result in results.items():
        assert result.returncode == 0, f"rank {rank}:\n{result.stdout}\n{result.stderr[-3000:]}"

    job = job_matcher(service)

    def census():
        ranks = stack.prometheus_query(f"yeto_process_memory_anonymous_bytes{{{job}}}")
        node = stack.prometheus_query(f"yeto_node_memory_anon_pages_bytes{{{job}}}")
        available = stack.prometheus_query(f"yeto_node_memory_available_bytes{{{job}}}")
        if {s["metric"].get("yeto_rank") for s in ranks} == {"0", "1"} and node and available:
            return ranks
        return None

    stack.wait_for(census, timeout=QUERY_TIMEOUT, what=f"the census of {service} in Prometheus")
    return service, results, time.time()


def _evaluated_since(stack, since: float):
    """The rule groups once every rule has been evaluated after `since`, else None."""
    groups = stack.prometheus_rule_groups()
    rules = [rule for group in groups for rule in group["rules"]]
    if rules and all(stack_module.api_time(rule["lastEvaluation"]) > since for rule in rules):
        return groups
    return None


@pytest.fixture(scope="module")
def evaluated(stack, run):
    _, _, census_time = run
    return stack.wait_for(lambda: _evaluated_since(stack, census_time),
                          timeout=EVALUATION_TIMEOUT, interval=1.0,
                          what="every rule evaluated after the census arrived")


def test_every_rule_file_is_loaded(stack, evaluated):
    expected = _group_names()
    assert expected, f"no rule groups found in {ALERTS_DIR}"
    loaded = {group["name"] for group in evaluated}
    assert expected <= loaded, f"groups not loaded: {sorted(expected - loaded)}"
    files = {Path(group["file"]).name for group in evaluated}
    assert files == {p.name for p in ALERTS_DIR.glob("*.yml")}, files


def test_every_rule_evaluates_without_error(stack, evaluated):
    bad = [(group["name"], rule["name"], rule.get("health"), rule.get("lastError"))
           for group in evaluated for rule in group["rules"]
           if rule.get("health") != "ok" or rule.get("lastError")]
    assert not bad, f"{bad}\n{stack.log('prometheus', lines=40)}"


def test_every_alert_is_documented_and_quiet(stack, evaluated):
    alerts = [rule for group in evaluated for rule in group["rules"] if rule["type"] == "alerting"]
    assert alerts
    for rule in alerts:
        assert rule["labels"].get("severity"), rule["name"]
        for key in ("summary", "description", "runbook_url"):
            assert rule["annotations"].get(key), (rule["name"], key)
        # A few seconds of census cannot show a floor rising across three 20m windows.
        assert rule["state"] != "firing", rule


def _rank_floors(stack, service: str) -> dict[str, dict] | None:
    """{rank: its floor series} once the rank floor has been recorded for every rank."""
    floors = stack.prometheus_query(f"{RANK_FLOOR}{{{job_matcher(service)}}}")
    by_rank = {s["metric"]["yeto_rank"]: s for s in floors}
    return by_rank if set(by_rank) == {str(r) for r in range(WORLD)} else None


def test_floors_are_recorded_for_the_ranks_and_the_host(stack, run, evaluated):
    service, _, _ = run
    # Polled, not read once: `evaluated` says each rule ran after the census arrived, but a
    # group's evaluation timestamp may lag the moment it ran.
    by_rank = stack.wait_for(lambda: _rank_floors(stack, service), timeout=EVALUATION_TIMEOUT,
                             interval=1.0, what=f"{RANK_FLOOR} for every rank of {service}")
    census = stack.prometheus_query(
        f"yeto_process_memory_anonymous_bytes{{{job_matcher(service)}}}")
    hosts = {(s["metric"]["yeto_cluster"], s["metric"]["host_name"]) for s in census}
    assert len(hosts) == 1, census  # both ranks run on this machine
    ((cluster, host),) = hosts
    for rank, series in by_rank.items():
        labels = series["metric"]
        assert labels["instance"].endswith(f"/rank-{rank}"), labels
        assert labels["host_name"] == host and labels.get("yeto_cluster"), labels
        assert "yeto_local_rank" not in labels and "yeto_world_size" not in labels, labels
        assert float(series["value"][1]) > 0, series
    for rule in NODE_FLOORS:
        selector = f'{rule}{{yeto_cluster="{cluster}", host_name="{host}"}}'
        result = stack.wait_for(functools.partial(stack.prometheus_query, selector),
                                timeout=EVALUATION_TIMEOUT, interval=1.0, what=selector)
        assert len(result) == 1, (rule, result)
        assert set(result[0]["metric"]) == {"__name__", "yeto_cluster", "host_name"}, result
        assert float(result[0]["value"][1]) > 0, result
    # The constants the dashboards draw.
    assert stack.prometheus_query("yeto:floor_rise_threshold:bytes")
    assert stack.prometheus_query("yeto:exhaustion_horizon:seconds")


CGROUP_EVENTS_RULE = "host_name_job:yeto_cgroup_memory_events_total:max"
CGROUP_UNRECLAIMABLE = "instance:yeto_cgroup_memory_unreclaimable_bytes:sum"


def test_cgroup_rules_record_the_ranks_cgroup(stack, run, evaluated):
    # Both ranks run in this machine's memory cgroup: one of them reports it, and the rules
    # judge it per cluster, host and job, whichever rank that is.
    service, _, _ = run
    job = job_matcher(service)
    selector = f'{CGROUP_EVENTS_RULE}{{{job}, event="oom_kill"}}'
    events = stack.wait_for(functools.partial(stack.prometheus_query, selector),
                            timeout=EVALUATION_TIMEOUT, interval=1.0, what=selector)
    assert len(events) == 1, events
    assert set(events[0]["metric"]) == {"__name__", "yeto_cluster", "host_name", "job",
                                        "event"}, events
    sums = stack.prometheus_query(f"{CGROUP_UNRECLAIMABLE}{{{job}}}")
    assert len(sums) == 1, sums  # one reporting rank, not one series per rank
    assert sums[0]["metric"]["yeto_rank"] in {str(r) for r in range(WORLD)}, sums
    assert float(sums[0]["value"][1]) > 0, sums
    assert stack.prometheus_query("yeto:cgroup_headroom_threshold:ratio")
    assert stack.prometheus_query("yeto:cgroup_pressure_threshold:ratio")
