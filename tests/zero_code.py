"""Runs a script under `opentelemetry-instrument` with the console exporter and parses what it printed."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys


def instrument_bin() -> str:
    path = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    assert path, "opentelemetry-instrument is not installed beside this python"
    return path


def run_instrumented(code: str, env: dict[str, str], timeout: float = 120, *,
                     console: bool = True, cwd: str | None = None,
                     command: list[str] | None = None):
    """`console=False`: no exporter settings at all, so the embedded default (local files).
    `command`: run this instead of `python -c code`."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OTEL_", "YETO_")) and k not in ("RANK", "LOCAL_RANK",
                                                                        "WORLD_SIZE")}
    if console:
        full_env.update({"OTEL_METRICS_EXPORTER": "console", "OTEL_TRACES_EXPORTER": "none",
                         "OTEL_LOGS_EXPORTER": "none"})
    full_env.update(env)
    command = command or [sys.executable, "-c", code]
    return subprocess.run([instrument_bin(), *command], env=full_env,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def traced_run(code: str, disabled: str = "yeto_host_memory") -> list[dict]:
    """Run `code` (which prints "trainer ran" at its end) under opentelemetry-instrument with
    its spans printed by the console exporter and no metrics; checks it ran through and
    returns the exported spans. `disabled`: OTEL_PYTHON_DISABLED_INSTRUMENTATIONS."""
    result = run_instrumented(code, {"OTEL_TRACES_EXPORTER": "console",
                                     "OTEL_METRICS_EXPORTER": "none",
                                     "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled})
    assert result.returncode == 0, result.stderr
    assert "trainer ran" in result.stdout
    return console_exports(result.stdout)


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


def otlp_lines(directory, prefix: str) -> list[dict]:
    """Every export batch in the `<prefix>-*.jsonl` files of an embedded-default directory."""
    batches = []
    for path in sorted(pathlib.Path(directory).glob(f"{prefix}-*.jsonl")):
        batches += [json.loads(line) for line in path.read_text().splitlines() if line]
    return batches


def otlp_attributes(items) -> dict:
    out = {}
    for item in items or ():
        value = item["value"]
        (kind, raw), = value.items()
        out[item["key"]] = int(raw) if kind == "intValue" else raw
    return out
