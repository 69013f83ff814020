"""A process's own pipeline (a DataLoader worker's): its identity, the exporters the
environment names, flushed by shutdown, one per process."""

from __future__ import annotations

import json
import socket
import time

import pytest

from forked import in_fork
from yeto_otel.otel import _pipeline, process_pipeline, start_process_pipeline
from yeto_otel.settings import Settings

ATTRIBUTES = {"service.instance.id": "h/rank-3/worker-1", "yeto.process.role": "dataloader_worker",
              "yeto.rank": 3, "yeto.dataloader.worker_id": 1}


@pytest.fixture
def local_files(monkeypatch, tmp_path):
    monkeypatch.setattr(_pipeline, "_pipeline", None)
    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "otlp_json_file")
    return Settings(local_dir=str(tmp_path))


def resources_in(path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        batch = json.loads(line)
        for entry in batch.get("resourceSpans", []) + batch.get("resourceMetrics", []):
            out.append({a["key"]: list(a["value"].values())[0]
                        for a in entry["resource"]["attributes"]})
    return out


def test_the_pipeline_writes_the_workers_own_files_under_its_identity(local_files, tmp_path):
    pipeline = start_process_pipeline(ATTRIBUTES, local_files)
    assert process_pipeline() is pipeline
    pipeline.tracer_provider.get_tracer("t").start_span("torch.load").end()
    pipeline.meter_provider.get_meter("m").create_counter("c").add(1)
    pipeline.shutdown()
    traces = list(tmp_path.glob("traces-h_rank-3_worker-1-*.jsonl"))
    metrics = list(tmp_path.glob("metrics-h_rank-3_worker-1-*.jsonl"))
    assert len(traces) == 1 and len(metrics) == 1
    for path in traces + metrics:
        resources = resources_in(path)
        assert resources and all(r["service.instance.id"] == "h/rank-3/worker-1"
                                 and r["yeto.process.role"] == "dataloader_worker"
                                 for r in resources)


def test_one_pipeline_per_process(local_files):
    first = start_process_pipeline(ATTRIBUTES, local_files)
    assert start_process_pipeline({**ATTRIBUTES, "service.instance.id": "other"},
                                  local_files) is first
    try:
        # a forked copy is not the child's own pipeline
        assert in_fork(lambda: process_pipeline() is None)
    finally:
        first.shutdown()


def test_no_exporter_configured_means_no_export(monkeypatch, tmp_path):
    monkeypatch.setattr(_pipeline, "_pipeline", None)
    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "none")
    pipeline = start_process_pipeline(ATTRIBUTES, Settings(local_dir=str(tmp_path)))
    pipeline.tracer_provider.get_tracer("t").start_span("s").end()
    pipeline.shutdown()
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_collector_holds_the_exit_no_longer_than_the_bound(monkeypatch, tmp_path):
    """A DataLoader waits 5 s for a worker to exit: the worker's last export must not take the
    SDK's 10 s export timeout when the collector hangs."""
    monkeypatch.setattr(_pipeline, "_pipeline", None)
    with socket.socket() as hung:  # accepts connections (the kernel does), never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)
        endpoint = f"http://127.0.0.1:{hung.getsockname()[1]}"
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        for signal, exporter in (("TRACES", "otlp"), ("METRICS", "otlp"), ("LOGS", "none")):
            monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", exporter)
        pipeline = start_process_pipeline(
            ATTRIBUTES, Settings(local_dir=str(tmp_path), exit_flush_timeout_ms=500))
        pipeline.tracer_provider.get_tracer("t").start_span("torch.load").end()
        pipeline.meter_provider.get_meter("m").create_counter("c").add(1)
        started = time.monotonic()
        assert pipeline.shutdown() is False  # not everything went out, and it said so
        assert time.monotonic() - started < 0.5 + 6.0  # the bound, with a generous margin
