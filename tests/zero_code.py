"""Runs a script under `opentelemetry-instrument` with the console exporter and parses what it printed."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

TESTS = pathlib.Path(__file__).parent


def instrument_bin() -> str:
    path = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    assert path, "opentelemetry-instrument is not installed beside this python"
    return path


def run_instrumented(code: str, env: dict[str, str], timeout: float = 120):
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OTEL_", "YETO_")) and k not in ("RANK", "LOCAL_RANK",
                                                                        "WORLD_SIZE")}
    full_env.update({"OTEL_METRICS_EXPORTER": "console", "OTEL_TRACES_EXPORTER": "none",
                     "OTEL_LOGS_EXPORTER": "none", "PYTHONPATH": str(TESTS)})
    full_env.update(env)
    return subprocess.run([instrument_bin(), sys.executable, "-c", code], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def console_exports(stdout: str) -> list[dict]:
    """The console metric exporter prints one indented JSON document per export."""
    decoder = json.JSONDecoder()
    docs, i = [], 0
    while True:
        i = stdout.find("{", i)
        if i < 0:
            return docs
        doc, i = decoder.raw_decode(stdout, i)
        docs.append(doc)


def metrics_by_name(docs: list[dict]) -> tuple[dict, dict]:
    """(name -> last exported metric, resource attributes)."""
    metrics, resource = {}, {}
    for doc in docs:
        for rm in doc.get("resource_metrics", []):
            resource = rm["resource"]["attributes"]
            for sm in rm["scope_metrics"]:
                for m in sm["metrics"]:
                    metrics[m["name"]] = m
    return metrics, resource
