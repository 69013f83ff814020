"""Two trainer-like ranks on one host export through the agent to Jaeger and Prometheus."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

import required_components
from e2e_ranks import assert_prometheus_rejected_nothing, job_matcher, run_ranks
from yeto_otel.census import (CENSUS, CGROUP_EVENTS, CGROUP_INFO, CGROUP_USAGE,
                              PROCESS_MEMORY_USAGE, PROCESS_MEMORY_VIRTUAL, RSS, CensusReader,
                              CgroupCensus, Source)
from yeto_otel.names import (exit_metric_names, exported_metric_names, prometheus_label,
                             prometheus_name_of)

stack_module = required_components.stack_module()

HERE = Path(__file__).resolve().parent
ALERTS_DIR = HERE.parents[1] / "collector" / "alerts"
WORLD = 2
QUERY_TIMEOUT = 60.0
# What Prometheus' own rules write (the stack loads collector/alerts): recording rules are named
# level:metric:operations (colons are theirs; an exporter never writes one), alerting rules
# write ALERTS and ALERTS_FOR_STATE. Both can carry a rank's job label, and whether they exist
# yet depends on whether a rule group has evaluated: they are never "what the agent wrote".
NOT_RULE_OUTPUT = '__name__!~".*:.*|ALERTS|ALERTS_FOR_STATE"'


def _written(service: str) -> str:
    """A selector for exactly the series the agent wrote for `service`'s ranks."""
    return f"{{{job_matcher(service)}, {NOT_RULE_OUTPUT}}}"


def _recorded_names() -> set[str]:
    return {rule["record"] for path in ALERTS_DIR.glob("*.yml")
            for group in yaml.safe_load(path.read_text())["groups"]
            for rule in group["rules"] if "record" in rule}


@pytest.fixture(scope="module")
def run(stack, instrument_bin, tmp_path_factory):
    """Runs both ranks to completion; returns (service name, {rank: CompletedProcess})."""
    service = f"yeto-e2e-{uuid.uuid4().hex[:8]}"
    workdir = tmp_path_factory.mktemp("ranks")
    # every allocator metric too, from a stand-in allocator beside this file
    results = run_ranks(stack, instrument_bin, workdir, service, world=WORLD, seconds=2.5,
                        YETO_OTEL_HOST_ALLOCATOR="yeto_otel.testing:moving",
                        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE),
                                                                 os.environ.get("PYTHONPATH")])))
    return service, results


def test_ranks_exit_cleanly(run):
    _, results = run
    for rank, result in results.items():
        assert result.returncode == 0, f"rank {rank}:\n{result.stdout}\n{result.stderr[-3000:]}"
        assert "mode mmap" in result.stdout, result.stdout


def _tags(items) -> dict:
    return {t["key"]: t["value"] for t in items or ()}


def _anchor_traces(stack, service):
    """{rank: (trace, anchors span, load span)} once both ranks' anchor traces are complete."""
    found = {}
    for trace in stack.jaeger_traces(service, operation="yeto.resume.anchors"):
        spans = trace["spans"]
        top = [s for s in spans if s["operationName"] == "yeto.resume.anchors"]
        if not top:
            continue
        span = top[0]
        loads = [s for s in spans if s["operationName"] == "yeto.resume.anchors.load"
                 and any(r["refType"] == "CHILD_OF" and r["spanID"] == span["spanID"]
                         for r in s.get("references") or ())]
        if not loads:
            continue
        process = _tags(trace["processes"][span["processID"]]["tags"])
        rank = process.get("yeto.rank")
        if rank is not None:
            found[int(rank)] = (trace, span, loads[0], process)
    return found if len(found) == WORLD else None


def test_jaeger_has_anchor_spans_per_rank(stack, run):
    service, _ = run
    found = stack.wait_for(lambda: _anchor_traces(stack, service), timeout=QUERY_TIMEOUT,
                           what=f"both ranks' yeto.resume.anchors traces of {service}")
    instance_ids = set()
    for rank, (trace, span, load, process) in found.items():
        tags = _tags(span["tags"])
        assert tags["yeto.anchors.bytes_mapped"] > 0, tags
        assert "yeto.anchors.bytes_touched" in tags, tags
        assert tags["yeto.anchors.bytes_touched"] >= 0, tags
        logs = [_tags(log["fields"]) for log in span.get("logs") or ()]
        fragments = [log for log in logs if log.get("event") == "fragment_done"]
        assert len(fragments) == 2, logs
        assert all("yeto.anchors.bytes_touched" in log for log in fragments), fragments
        assert process.get("service.instance.id"), process
        assert int(process["yeto.rank"]) == rank
        instance_ids.add(process["service.instance.id"])
    assert len(instance_ids) == WORLD, instance_ids


def _rank_of(series: dict) -> str | None:
    return series["metric"].get("yeto_rank")


def test_prometheus_has_the_census_per_rank(stack, run):
    service, _ = run
    job = job_matcher(service)

    def both(metric):
        result = stack.prometheus_query(f'{metric}{{{job}}}')
        ranks = {_rank_of(s) for s in result}
        return result if ranks == {"0", "1"} else None

    rss = stack.wait_for(lambda: both("yeto_process_memory_rss_bytes"), timeout=QUERY_TIMEOUT,
                         what="yeto_process_memory_rss_bytes from both ranks")
    assert len({s["metric"]["instance"] for s in rss}) == WORLD, rss
    assert all(float(s["value"][1]) > 0 for s in rss), rss
    stack.wait_for(lambda: both("yeto_process_memory_rss_peak_bytes"), timeout=QUERY_TIMEOUT,
                   what="yeto_process_memory_rss_peak_bytes from both ranks")
    stack.wait_for(lambda: both("yeto_census_errors_total"), timeout=QUERY_TIMEOUT,
                   what="yeto_census_errors_total from both ranks")

    # Types. Prometheus 2.42 keeps no metadata for remote-written series (/api/v1/metadata
    # only covers scrape targets), so the type shows in the names the exporter chose: gauges
    # keep their name, monotonic sums become `_total` counters; no gauge turned counter.
    names = stack.prometheus_names(_written(service))
    for gauge in ("yeto_process_memory_rss_bytes", "yeto_process_memory_rss_peak_bytes",
                  "yeto_node_memory_anon_pages_bytes"):
        assert gauge + "_total" not in names, sorted(n for n in names if n.startswith("yeto"))
    assert "yeto_census_errors_total" in names
    assert "yeto_census_errors" not in names
    meta = stack.prometheus_metadata()
    for metric, kind in (("yeto_process_memory_rss_bytes", "gauge"),
                         ("yeto_census_errors_total", "counter")):
        if metric in meta:  # newer Prometheus keeps remote-write metadata: check it too
            assert meta[metric][0]["type"] == kind, meta[metric]

    # Node metrics: from the rank that holds the node's duty, one at a time (another takes
    # over when it exits, so a rank that outlived the holder may have a series too).
    node = stack.wait_for(
        lambda: stack.prometheus_query(f'yeto_node_memory_anon_pages_bytes{{{job}}}'),
        timeout=QUERY_TIMEOUT, what="yeto_node_memory_anon_pages_bytes")
    assert node and {_rank_of(s) for s in node} <= {str(r) for r in range(WORLD)}, node
    assert len(node) == len({_rank_of(s) for s in node}), node


def test_prometheus_has_the_semantic_conventions_names_per_rank(stack, run):
    """process.memory.usage and process.memory.virtual arrive from both ranks as gauges, under
    the names the collector's process scraper's series get; usage is the RSS of the same
    collection and virtual is at least that."""
    service, _ = run
    job = job_matcher(service)
    usage, virtual, rss = (prometheus_name_of(m)
                           for m in (PROCESS_MEMORY_USAGE, PROCESS_MEMORY_VIRTUAL, RSS))
    assert (usage, virtual) == ("process_memory_usage_bytes", "process_memory_virtual_bytes")

    def per_rank(expr: str) -> dict | None:
        # one query, so both operands are the samples of one instant; vector matching pairs
        # each rank's series by every label but the metric name
        values = {_rank_of(s): float(s["value"][1]) for s in stack.prometheus_query(expr)}
        return values if set(values) == {"0", "1"} else None

    def settled(expr: str, holds) -> dict | None:
        values = per_rank(expr)
        return values if values is not None and all(map(holds, values.values())) else None

    difference = stack.wait_for(
        lambda: settled(f"{usage}{{{job}}} - {rss}{{{job}}}", lambda v: v == 0),
        timeout=QUERY_TIMEOUT, what=f"{usage} equal to {rss} for both ranks")
    assert set(difference) == {"0", "1"}
    above = stack.wait_for(
        lambda: settled(f"{virtual}{{{job}}} - {usage}{{{job}}}", lambda v: v >= 0),
        timeout=QUERY_TIMEOUT, what=f"{virtual} at least {usage} for both ranks")
    assert set(above) == {"0", "1"}
    names = stack.prometheus_names(_written(service))
    assert {usage, virtual} <= names
    assert not {usage + "_total", virtual + "_total"} & names  # gauges, never counters


def test_no_sample_rejected(stack, run):
    service, _ = run
    # Let everything both ranks sent reach Prometheus first.
    stack.wait_for(lambda: stack.prometheus_query(
        f'yeto_process_memory_rss_bytes{{{job_matcher(service)}}}'), timeout=QUERY_TIMEOUT,
        what="census in Prometheus")
    assert_prometheus_rejected_nothing(stack, stack_module, QUERY_TIMEOUT)


def _this_hosts_cgroup() -> tuple[str | None, set[str]]:
    """The memory cgroup path the ranks (children of this process) run in, and the Prometheus
    names of the cgroup metrics it cannot have (v1 has no high and no pressure; a cgroup
    without a limit exports none), read here the way the ranks read it."""
    cgroup = CgroupCensus(elected=False)
    reader = CensusReader(allocator=None, node_metrics=False, cgroup=cgroup)
    try:
        snapshot = reader.take()
    finally:
        reader.close()
    present = set(snapshot.values) | set(snapshot.labelled)
    lacking = {prometheus_name_of(m) for m in CENSUS
               if m.source is Source.CGROUP and m.name not in present}
    return (cgroup.cgroup.path if cgroup.files else None), lacking


def test_prometheus_has_the_cgroup_from_one_rank(stack, run):
    """The two ranks share this host's memory cgroup: its numbers arrive from exactly one of
    them (the elected), its path from both, in one series each."""
    service, _ = run
    job = job_matcher(service)
    path, _ = _this_hosts_cgroup()
    if path is None:
        required_components.missing("a memory cgroup on this host",
                                    "run on a host with the memory controller (v1 or v2)")
    usage, events, info = (prometheus_name_of(m) for m in (CGROUP_USAGE, CGROUP_EVENTS,
                                                           CGROUP_INFO))
    both = stack.wait_for(
        lambda: (lambda r: r if {_rank_of(s) for s in r} == {"0", "1"} else None)(
            stack.prometheus_query(f'{info}{{{job}}}')),
        timeout=QUERY_TIMEOUT, what=f"{info} from both ranks")
    label = prometheus_label(CGROUP_INFO.attribute)
    assert {s["metric"][label] for s in both} == {path}, both
    assert all(float(s["value"][1]) == 1 for s in both), both
    observed = stack.wait_for(lambda: stack.prometheus_query(f'{usage}{{{job}}}'),
                              timeout=QUERY_TIMEOUT, what=usage)
    assert len(observed) == 1 and float(observed[0]["value"][1]) > 0, observed
    assert label not in observed[0]["metric"]  # the path is on the info series only
    oom = stack.wait_for(lambda: stack.prometheus_query(f'{events}{{{job}, event="oom_kill"}}'),
                         timeout=QUERY_TIMEOUT, what=f"{events} oom_kill")
    assert len(oom) == 1, oom


def test_prometheus_names_are_the_documented_ones(stack, run):
    """Every metric the product exports arrives under the name yeto_otel.names gives it (and
    docs/metrics.md, the alert rules and the dashboards) use, and nothing else does; of the
    cgroup's, those this host's cgroup has."""
    service, _ = run
    # less the exits' series, exported once a death is reported (test_exits_into_backends.py)
    expected = set(exported_metric_names()) - _this_hosts_cgroup()[1] - set(exit_metric_names())
    # Nothing exported could be mistaken for a rule's output (and so go unchecked below).
    assert not [n for n in expected if ":" in n or n.startswith("ALERTS")], sorted(expected)

    def written() -> set[str]:
        return stack.prometheus_names(_written(service)) - {"target_info"}

    def all_arrived() -> set[str] | None:
        names = written()
        return names if names >= expected else None

    try:
        names = stack.wait_for(all_arrived, timeout=QUERY_TIMEOUT, what="every exported metric")
    except stack_module.StackError:
        names = written()
        pytest.fail(f"missing in Prometheus: {sorted(expected - names)}; "
                    f"unexpected: {sorted(names - expected)}")
    assert names == expected, sorted(names ^ expected)
    # What the selector leaves out under this job is only ever the rules' own output.
    rule_output = stack.prometheus_names(f"{{{job_matcher(service)}}}") - \
        stack.prometheus_names(_written(service))
    assert rule_output <= _recorded_names() | {"ALERTS", "ALERTS_FOR_STATE"}, sorted(rule_output)

    def mapped_by_both():
        mapped = stack.prometheus_query(
            f'yeto_resume_anchors_bytes_mapped{{{job_matcher(service)}}}')
        return mapped if {s["metric"]["yeto_rank"] for s in mapped} == {"0", "1"} else None

    mapped = stack.wait_for(mapped_by_both, timeout=QUERY_TIMEOUT,
                            what="yeto_resume_anchors_bytes_mapped from both ranks")
    assert all(float(s["value"][1]) > 0 and s["metric"]["yeto_anchors_load_mode"] == "mmap"
               for s in mapped), mapped
