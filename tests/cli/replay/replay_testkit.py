"""Shared by the replay tests: local telemetry files whose every line carries a marker the
stand-in collector can count, and running `yeto-otel replay` as a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

STEM = "host_rank-0-20260101T000000-4242"
RESOURCE = {"attributes": [{"key": "service.name", "value": {"stringValue": "replay-test"}},
                           {"key": "service.instance.id", "value": {"stringValue": "host/rank-0"}}]}
T0 = 1_767_225_600_000_000_000


def span_line(n: int) -> str:
    span = {"traceId": f"{n:032x}", "spanId": f"{n:016x}", "name": f"line-{n}", "kind": 1,
            "startTimeUnixNano": str(T0 + n), "endTimeUnixNano": str(T0 + n + 1)}
    return json.dumps({"resourceSpans": [{"resource": RESOURCE, "scopeSpans": [
        {"scope": {"name": "test"}, "spans": [span]}]}]})


def metric_line(n: int) -> str:
    point = {"timeUnixNano": str(T0 + n * 10**9), "asInt": str(n),
             "attributes": [{"key": "line", "value": {"stringValue": f"point-{n}"}}]}
    return json.dumps({"resourceMetrics": [{"resource": RESOURCE, "scopeMetrics": [
        {"scope": {"name": "test"}, "metrics": [{"name": "m", "unit": "By",
                                                 "gauge": {"dataPoints": [point]}}]}]}]})


def step_line(n: int) -> str:
    return json.dumps({"step": n, "time_unix_nano": T0 + n, "loss": 1.0 / n,
                       "host_mem.vm_rss_bytes": 1000 + n, "note": "x", "ok": True,
                       "nested": {"a": 1}, "huge": 1 << 70})


def write_lines(path: Path, lines: list[str], *, last_complete: bool = True) -> Path:
    text = "\n".join(lines) + ("\n" if last_complete else "")
    path.write_text(text)
    return path


def telemetry_dir(root: Path, spans: int = 10, points: int = 0, steps: int = 0) -> Path:
    directory = root / "telemetry"
    directory.mkdir(exist_ok=True)
    if spans:
        write_lines(directory / f"traces-{STEM}.jsonl", [span_line(n) for n in range(1, spans + 1)])
    if points:
        write_lines(directory / f"metrics-{STEM}.jsonl",
                    [metric_line(n) for n in range(1, points + 1)])
    if steps:
        write_lines(directory / f"steplog-{STEM}.jsonl", [step_line(n) for n in range(1, steps + 1)])
    return directory


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    env.update(extra)
    return env


def replay_command(directory: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "yeto_otel.cli", "replay", str(directory), *args]


def replay(directory: Path, *args: str, env: dict | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(replay_command(directory, *args), capture_output=True, text=True,
                          env=env or clean_env(), timeout=timeout)


def summary(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout)
