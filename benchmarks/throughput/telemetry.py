"""The agent's (and Jaeger's) own metrics: scrape, totals, what counts as a drop."""

from __future__ import annotations

import urllib.request

from .common import stack_module

DROP_WORDS = ("refused", "failed", "dropped")


def scrape(url: str) -> dict[str, dict[str, float]]:
    """A component's own metrics, name (without a `_total` suffix) -> {label set: value}."""
    with urllib.request.urlopen(url, timeout=5) as response:
        metrics = stack_module.parse_metrics_text(response.read().decode())
    out: dict[str, dict[str, float]] = {}
    for name, series in metrics.items():
        out.setdefault(name.removesuffix("_total"), {}).update(series)
    return out


def total(metrics: dict, name: str, contains: str = "") -> float:
    return sum(v for labels, v in metrics.get(name, {}).items() if contains in labels)


def drop_counters(metrics: dict) -> dict[str, float]:
    """Every counter of the agent that counts lost or rejected data, with its total."""
    return {name: sum(series.values()) for name, series in metrics.items()
            if name.startswith("otelcol_") and any(w in name for w in DROP_WORDS)}


def agent_counts(metrics: dict) -> dict[str, float]:
    return {
        "accepted_points": total(metrics, "otelcol_receiver_accepted_metric_points"),
        "accepted_spans": total(metrics, "otelcol_receiver_accepted_spans"),
        "sent_points": total(metrics, "otelcol_exporter_sent_metric_points",
                             'exporter="prometheus_remote_write"'),
        "sent_spans": total(metrics, "otelcol_exporter_sent_spans", 'exporter="otlp_grpc/traces"'),
        "queue_size": total(metrics, "otelcol_exporter_queue_size"),
        "in_flight": total(metrics, "otelcol_exporter_in_flight_requests"),
        "heap_alloc": total(metrics, "otelcol_process_runtime_heap_alloc_bytes"),
    }
