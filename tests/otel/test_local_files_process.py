"""A real trainer process under `opentelemetry-instrument`, writing its local telemetry to a
real small disk that fills up, frees up, fills again, and whose directory is moved away."""

import json
import os

from zero_code import run_instrumented

# The trainer drives every export itself (force_flush), so nothing depends on timing. It fills
# the disk with a file of its own, exactly as another process on the host would.
TRAINER = """
import errno, os
from opentelemetry import metrics, trace

disk, local = os.environ["TRAINER_DISK"], os.environ["YETO_OTEL_LOCAL_DIR"]
tracer = trace.get_tracer("trainer")
providers = (trace.get_tracer_provider(), metrics.get_meter_provider())

def export(name):
    with tracer.start_as_current_span(name, attributes={"pad": "x" * 12288}):
        pass
    for provider in providers:
        provider.force_flush()

def fill():
    fd = os.open(os.path.join(disk, "filler"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"\\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    os.close(fd)

export("before")
fill()
for i in range(8):
    export(f"full-{i}")
os.unlink(os.path.join(disk, "filler"))
export("after")
os.rename(local, local + "-moved")  # the directory goes away under the running exporters
export("in-new-dir")
fill()
export("lost-at-exit")  # the disk is full when the process ends
print("trainer ran")
"""


def batches(path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), f"{path.name} ends in a half line"
    return [json.loads(line) for line in text.splitlines()]


def span_names(directory) -> list[str]:
    (path,) = directory.glob("traces-*.jsonl")
    return [s["name"] for b in batches(path) for rs in b["resourceSpans"]
            for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_a_trainer_on_a_full_then_moved_directory_runs_on_and_loses_nothing_silently(
        small_tmpfs, tmp_path):
    local = small_tmpfs / "telemetry"
    result = run_instrumented(TRAINER, {"RANK": "0", "YETO_OTEL_LOCAL_DIR": str(local),
                                        "TRAINER_DISK": str(small_tmpfs),
                                        "OTEL_METRIC_EXPORT_INTERVAL": "3600000"},
                              console=False, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "trainer ran" in result.stdout
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr
    lines = result.stderr.splitlines()
    assert len([line for line in lines if "cannot write local telemetry" in line]) == 1
    assert len([line for line in lines if "was deleted or replaced" in line]) == 1
    (exit_line,) = [line for line in lines if "never written" in line]
    assert "traces-" in exit_line and "still in memory" in exit_line

    moved = small_tmpfs / "telemetry-moved"
    assert span_names(moved) == ["before", *(f"full-{i}" for i in range(8)), "after"]
    assert span_names(local) == ["in-new-dir"]
    for directory in (moved, local):
        for path in directory.glob("*.jsonl"):
            batches(path)  # every line of every file parses
        assert list(directory.glob("metrics-*.jsonl"))
