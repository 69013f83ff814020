"""`yeto-otel demo` writes local files (no collector configured); `yeto-otel replay` sends them
to the real agent; the restart spans arrive in Jaeger and the census in Prometheus, and a
second replay adds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from e2e_ranks import job_matcher
from yeto_otel.census import RSS
from yeto_otel.names import prometheus_name_of

QUERY_TIMEOUT = 90.0
RESUME_SPAN = "yeto.resume.anchors"


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "YETO_")) and k not in ("RANK", "LOCAL_RANK",
                                                                   "WORLD_SIZE")}
    env.update(extra)
    return env


def _lines(directory: Path, pattern: str) -> list[dict]:
    return [json.loads(line) for path in sorted(directory.glob(pattern))
            for line in path.read_text().splitlines() if line.strip()]


def _spans_in_files(directory: Path) -> list[dict]:
    return [span for batch in _lines(directory, "traces-*.jsonl")
            for rs in batch["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def _rss_points_in_files(directory: Path) -> int:
    return sum(len((m.get("gauge") or m.get("sum") or {}).get("dataPoints", []))
               for batch in _lines(directory, "metrics-*.jsonl")
               for rm in batch["resourceMetrics"] for sm in rm["scopeMetrics"]
               for m in sm["metrics"] if m["name"] == RSS.name)


def _replay(stack, directory: Path) -> dict:
    result = subprocess.run([sys.executable, "-m", "yeto_otel.cli", "replay", str(directory),
                             "--endpoint", stack.agent_otlp_http, "--json"],
                            capture_output=True, text=True, env=_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory):
    """A demo run's local telemetry files (its own service name), as a user would have them."""
    service = f"yeto-replay-{uuid.uuid4().hex[:8]}"
    workdir = tmp_path_factory.mktemp("replay-demo")
    local = workdir / "yeto-telemetry"
    result = subprocess.run(
        [sys.executable, "-m", "yeto_otel.cli", "demo", "--size", "32MiB", "--steps", "5",
         "--step-size", "8MiB", "--step-seconds", "0.2"],
        cwd=workdir, capture_output=True, text=True, timeout=300,
        env=_env(OTEL_SERVICE_NAME=service, YETO_OTEL_LOCAL_DIR=str(local)))
    assert result.returncode == 0, result.stderr
    assert list(local.glob("traces-*.jsonl")) and list(local.glob("metrics-*.jsonl"))
    return service, local


def _jaeger_spans(stack, service: str) -> list[dict]:
    return [span for trace in stack.jaeger_traces(service) for span in trace["spans"]]


def _prometheus_samples(stack, service: str) -> int:
    query = f"count_over_time({prometheus_name_of(RSS)}{{{job_matcher(service)}}}[1d])"
    return int(sum(float(r["value"][1]) for r in stack.prometheus_query(query)))


def test_replay_into_the_agent_then_again_adds_nothing(stack, demo_files):
    service, local = demo_files
    spans, points = _spans_in_files(local), _rss_points_in_files(local)
    assert any(s["name"] == RESUME_SPAN for s in spans) and points > 0

    first = _replay(stack, local)
    assert first["signals"]["traces"]["sent_items"] == len(spans)
    assert first["stopped"] is None and first["problems"] == []

    in_jaeger = stack.wait_for(
        lambda: (found := _jaeger_spans(stack, service)) and len(found) >= len(spans) and found,
        timeout=QUERY_TIMEOUT, what="every replayed span in Jaeger")
    assert len(in_jaeger) == len(spans)
    assert sorted(s["spanID"] for s in in_jaeger) == sorted(s["spanId"] for s in spans)
    restart = [s for s in in_jaeger if s["operationName"] == RESUME_SPAN]
    assert restart and all(s["startTime"] > 0 for s in restart)
    samples = stack.wait_for(lambda: _prometheus_samples(stack, service) >= points
                             and _prometheus_samples(stack, service),
                             timeout=QUERY_TIMEOUT, what="the replayed census in Prometheus")
    assert samples == points
    steps = first["signals"]["logs"]["sent_items"]
    assert steps >= 5  # the step log, as log records

    accepted = {name: stack.agent_metric(name) for name in (
        "otelcol_receiver_accepted_spans", "otelcol_receiver_accepted_metric_points",
        "otelcol_receiver_accepted_log_records")}
    second = _replay(stack, local)
    for signal, counts in second["signals"].items():
        assert counts["sent_lines"] == 0 and counts["already_lines"] > 0, signal
    for name, before in accepted.items():
        assert before, name  # the agent counted the first replay: the check below can fail
        assert stack.agent_metric(name) == before, name
    assert len(_jaeger_spans(stack, service)) == len(spans)
    assert _prometheus_samples(stack, service) == points
