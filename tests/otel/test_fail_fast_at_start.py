"""Under `opentelemetry-instrument`, a setting that cannot be used stops the process at start
with one line naming it and exit 2: an allocator that cannot be resolved, a rank out of range,
an SDK interval or exporter the SDK could not use. Before, each gave tracebacks, ran the
trainer without telemetry, and exited 0."""

from __future__ import annotations

import importlib.util

import pytest
from zero_code import otlp_lines, run_instrumented

TRAINER = "print('trainer ran')"

BAD = {
    "module that does not exist": {"YETO_OTEL_HOST_ALLOCATOR": "no_such_mod:f"},
    "attribute that does not exist": {"YETO_OTEL_HOST_ALLOCATOR": "os:nonexistent"},
    "not a callable": {"YETO_OTEL_HOST_ALLOCATOR": "os:sep"},
    "module that raises on import": {"YETO_OTEL_HOST_ALLOCATOR": "broken_alloc_mod:stats"},
    "allocator timeout of 0": {"YETO_OTEL_ALLOCATOR_TIMEOUT": "0"},
    "RANK beyond int64": {"RANK": "99999999999999999999"},
    "RANK beyond torch's int": {"RANK": "2147483648"},
    "RANK not below WORLD_SIZE": {"WORLD_SIZE": "4", "RANK": "4"},
    "metric interval 0": {"OTEL_METRIC_EXPORT_INTERVAL": "0"},
    "metric interval nan": {"OTEL_METRIC_EXPORT_INTERVAL": "nan"},
    "span schedule delay -1": {"OTEL_BSP_SCHEDULE_DELAY": "-1"},
    "span queue of 0": {"OTEL_BSP_MAX_QUEUE_SIZE": "0"},
    "traces exporter not installed": {"OTEL_TRACES_EXPORTER": "bogus"},
    "metrics exporter not installed": {"OTEL_METRICS_EXPORTER": "console,bogus"},
    "logs exporter not installed": {"OTEL_LOGS_EXPORTER": "bogus"},
    "OTLP protocol not supported": {"OTEL_TRACES_EXPORTER": "otlp",
                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
}


@pytest.fixture
def broken_module(tmp_path):
    (tmp_path / "broken_alloc_mod.py").write_text("raise RuntimeError('no device here')\n")
    return {"PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_fails_fast_with_one_line_and_exit_2(tmp_path, broken_module, case):
    env = {**BAD[case], **broken_module, "YETO_OTEL_LOCAL_DIR": str(tmp_path / "t")}
    result = run_instrumented(TRAINER, env, console=False, cwd=str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "trainer ran" not in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    name = list(BAD[case])[-1]  # the variable the line is about is the last one set
    assert lines[0].startswith(f"yeto-otel: {name}="), lines[0]
    assert "is not valid" in lines[0] and "accepted:" in lines[0]


@pytest.mark.skipif(importlib.util.find_spec("torch_npu") is not None,
                    reason="torch_npu is installed here")
def test_npu_without_torch_npu_fails_fast(tmp_path):
    result = run_instrumented(TRAINER, {"YETO_OTEL_HOST_ALLOCATOR": "npu",
                                        "YETO_OTEL_LOCAL_DIR": str(tmp_path / "t")},
                              console=False, cwd=str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("yeto-otel: YETO_OTEL_HOST_ALLOCATOR='npu' is not valid "
                                    "(cannot import torch_npu")
    assert len(result.stderr.splitlines()) == 1


def test_good_values_still_start(tmp_path):
    env = {"OTEL_METRIC_EXPORT_INTERVAL": "250.5", "OTEL_BSP_SCHEDULE_DELAY": "100",
           "OTEL_METRICS_EXPORTER": "console, otlp_json_file", "OTEL_TRACES_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "RANK": "3", "WORLD_SIZE": "4", "YETO_OTEL_HOST_ALLOCATOR": "os:getpid",
           "YETO_OTEL_ALLOCATOR_TIMEOUT": "20", "YETO_OTEL_LOCAL_DIR": str(tmp_path / "t")}
    result = run_instrumented(TRAINER, env, console=False, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "trainer ran" in result.stdout and "Traceback" not in result.stderr


SLOW_TRAINER = """
import time
from yeto_otel import add_census_to_step_log
started = time.monotonic()
for step in range(6):
    add_census_to_step_log({"step": step})
print(f"steps took {time.monotonic() - started:.2f} s")
"""

SLOW_ALLOCATOR = "import time\ndef stats():\n    time.sleep(600)\n    return {}\n"


def test_a_stuck_allocator_delays_neither_steps_nor_exit(tmp_path):
    (tmp_path / "slow_alloc_mod.py").write_text(SLOW_ALLOCATOR)
    env = {"YETO_OTEL_HOST_ALLOCATOR": "slow_alloc_mod:stats", "PYTHONPATH": str(tmp_path),
           "YETO_DILOCO_HOST_MEM_CENSUS": "1", "YETO_OTEL_LOCAL_DIR": str(tmp_path / "t")}
    # The allocator never answers within the run: waiting for it once would hit this timeout.
    result = run_instrumented(SLOW_TRAINER, env, console=False, cwd=str(tmp_path), timeout=90)
    assert result.returncode == 0, result.stderr
    assert "steps took" in result.stdout and "Traceback" not in result.stderr
    assert errors_of(tmp_path / "t", "allocator") >= 1  # the final collection counted it


HOSTILE_TRAINER = """
import pathlib, sys, time
deadline = time.monotonic() + 60
directory = pathlib.Path(sys.argv[1])
def batches():
    return sum(p.read_text().count("\\n") for p in directory.glob("metrics-*.jsonl"))
while batches() < 3:  # exports keep coming after the allocator raised in the export thread
    assert time.monotonic() < deadline, "the export thread stopped"
    time.sleep(0.05)
print("trainer ran")
"""


@pytest.mark.parametrize("exc", ["SystemExit(3)", "KeyboardInterrupt()"])
def test_an_allocator_raising_base_exceptions_ends_neither_exports_nor_trainer(tmp_path, exc):
    (tmp_path / "hostile_alloc_mod.py").write_text(f"def stats():\n    raise {exc}\n")
    directory = tmp_path / "t"
    env = {"YETO_OTEL_HOST_ALLOCATOR": "hostile_alloc_mod:stats", "PYTHONPATH": str(tmp_path),
           "OTEL_METRIC_EXPORT_INTERVAL": "200", "YETO_OTEL_LOCAL_DIR": str(directory)}
    code = HOSTILE_TRAINER.replace("sys.argv[1]", repr(str(directory)))
    result = run_instrumented(code, env, console=False, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "trainer ran" in result.stdout
    assert errors_of(directory, "allocator") >= 3


def errors_of(directory, source: str) -> int:
    """The largest `yeto.census.errors` count of `source` in the metric files."""
    counts = [0]
    for batch in otlp_lines(directory, "metrics"):
        for rm in batch["resourceMetrics"]:
            for sm in rm["scopeMetrics"]:
                for metric in sm["metrics"]:
                    if metric["name"] != "yeto.census.errors":
                        continue
                    for point in metric["sum"]["dataPoints"]:
                        attributes = {a["key"]: a["value"]["stringValue"]
                                      for a in point["attributes"]}
                        if attributes["source"] == source:
                            counts.append(int(point["asInt"]))
    return max(counts)
