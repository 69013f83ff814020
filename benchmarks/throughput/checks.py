"""After a phase: zero drops, checked, not assumed.

The agent's refused / failed / dropped counters and the ranks' exporters; Prometheus holds one
sample per exported point, a series per rank and the node metrics per host; Jaeger received
every span the agent sent and, for the restarts, one trace per rank with the product's shape.
Every miss is appended to the phase's failures.
"""

from __future__ import annotations

import time

from .common import FRAGMENTS, SERVICE_NAME
from .phase import Phase
from .telemetry import drop_counters, scrape, total


def drops(phase: Phase) -> dict:
    counters = drop_counters(scrape(phase.stack.agent_telemetry_url))
    for name, value in counters.items():
        if value:
            phase.failures.append(f"{phase.name}: agent counter {name} = {value:g}")
    exported = phase.exported
    for key in ("failed_points", "failed_exports", "failed_spans"):
        if exported[key]:
            phase.failures.append(f"{phase.name}: the ranks' exporters report {key} = "
                                  f"{exported[key]}")
    if exported["spans"] != exported["spans_created"]:
        phase.failures.append(f"{phase.name}: the ranks created {exported['spans_created']}"
                              f" spans, their exporters sent {exported['spans']}")
    return counters


def _prometheus_samples(s) -> int:
    # count_over_time drops the metric name, so count name by name.
    names = sorted({series["__name__"]
                    for series in s.prometheus_series('{__name__=~"yeto_.+"}')})
    n = 0
    for name in names:
        result = s.prometheus_query(f"sum(count_over_time({name}[2h]))")
        n += int(float(result[0]["value"][1])) if result else 0
    return n


def prometheus(phase: Phase, timeout: float = 60.0) -> dict:
    """One sample per exported point; a series per rank; node metrics per host."""
    s = phase.stack
    deadline = time.monotonic() + timeout
    while (n := _prometheus_samples(s)) != phase.exported["points"] and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    instances = {r["metric"].get("instance") for r in s.prometheus_query(
        'count by (instance) ({__name__=~"yeto_process_.+"})')}
    node = {r["metric"].get("instance") for r in s.prometheus_query(
        'count by (instance) ({__name__=~"yeto_node_.+"})')}
    want_instances = {f"bench-host-{h:02d}/rank-{r}"
                      for h, ranks in enumerate(phase.hosts) for r in ranks}
    want_node = {f"bench-host-{h:02d}/rank-{ranks[0]}" for h, ranks in enumerate(phase.hosts)}
    if n != phase.exported["points"]:
        phase.failures.append(f"{phase.name}: Prometheus has {n} samples, the ranks exported "
                              f"{phase.exported['points']} points")
    if instances != want_instances:
        phase.failures.append(f"{phase.name}: Prometheus rank series: missing "
                              f"{sorted(want_instances - instances)[:5]}, unexpected "
                              f"{sorted(instances - want_instances)[:5]}")
    if node != want_node:
        phase.failures.append(f"{phase.name}: node metrics from {sorted(node)[:10]}, "
                              f"expected local rank 0 of each host {sorted(want_node)[:10]}")
    return {"samples": n, "rank_series": len(instances), "node_series_instances": len(node)}


def jaeger(phase: Phase, restarts_per_rank: int, query_traces: bool,
           timeout: float = 60.0) -> dict:
    """Jaeger's own receiver and storage counters == the spans the ranks exported; with
    `query_traces`, its query API too (one trace per restart, the product's shape)."""
    sent = phase.exported["spans"]
    deadline = time.monotonic() + timeout
    while True:
        m = scrape(phase.jaeger_telemetry_url())
        received = total(m, "otelcol_receiver_accepted_spans")
        stored = total(m, "otelcol_exporter_sent_spans", "jaeger_storage_exporter")
        if received == stored == sent or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    jaeger_drops = {k: v for k, v in drop_counters(m).items() if v}
    if not received == stored == sent:
        phase.failures.append(f"{phase.name}: Jaeger received {received:g}, stored {stored:g} "
                              f"spans; the ranks exported {sent}")
    if jaeger_drops:
        phase.failures.append(f"{phase.name}: Jaeger drop counters {jaeger_drops}")
    out = {"received": int(received), "stored": int(stored)}
    if query_traces:
        out.update(_jaeger_traces(phase, restarts_per_rank, timeout))
    return out


def _is_restart_trace(t: dict, root: dict | None) -> bool:
    names = sorted(sp["operationName"] for sp in t["spans"])
    return (names == ["yeto.resume.anchors", "yeto.resume.anchors.load"] and root is not None
            and sum(1 for log in root.get("logs", [])
                    if any(f["value"] == "fragment_done" for f in log["fields"])) == FRAGMENTS)


def _jaeger_traces(phase: Phase, restarts_per_rank: int, timeout: float) -> dict:
    """The query API: one trace per restart, each with the product's span shape."""
    want = phase.ranks * restarts_per_rank
    deadline = time.monotonic() + timeout
    while True:
        traces = phase.stack.jaeger_traces(SERVICE_NAME, limit=want + 100)
        if len(traces) >= want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    per_instance: dict[str, int] = {}
    bad = spans = 0
    for t in traces:
        spans += len(t["spans"])
        root = next((sp for sp in t["spans"] if sp["operationName"] == "yeto.resume.anchors"),
                    None)
        if not _is_restart_trace(t, root):
            bad += 1
            continue
        tags = {tag["key"]: tag["value"] for tag in t["processes"][root["processID"]]["tags"]}
        instance = tags.get("service.instance.id")
        per_instance[instance] = per_instance.get(instance, 0) + 1
    if len(traces) != want or bad or len(per_instance) != phase.ranks or \
            set(per_instance.values()) != {restarts_per_rank}:
        phase.failures.append(f"{phase.name}: Jaeger query: {len(traces)} traces (want {want}), "
                              f"{bad} of the wrong shape, {len(per_instance)} ranks")
    return {"traces": len(traces), "trace_spans": spans, "ranks_with_traces": len(per_instance)}
