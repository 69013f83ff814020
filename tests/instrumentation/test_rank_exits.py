"""Exit records in real processes under `opentelemetry-instrument` (local files): a rank that
exits leaves nothing to report, one that raises reports itself, one killed with SIGKILL is
reported by its next launch (never as an OOM kill without one), a forked child never writes
its parent's record, and `YETO_OTEL_EXIT_RECORDS=off` keeps no record at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from yeto_otel.exits._record_file import record_names
from zero_code import instrument_bin, otlp_attributes, otlp_lines, run_instrumented

# Logs steps; at `stop` it raises, or says so and waits to be killed, or forks a child that logs
# a step of its own first, or returns.
TRAINER = r"""
import os, sys, time
from yeto_otel.census import add_census_to_step_log
stop, how = int(sys.argv[1]), sys.argv[2]
for step in range(stop + 1):
    add_census_to_step_log({"step": step})
if how == "fork":
    child = os.fork()
    if child == 0:
        add_census_to_step_log({"step": 999})
        os._exit(0)
    os.waitpid(child, 0)
if how == "raise":
    raise ValueError("loss is nan")
if how in ("wait", "fork"):
    print("at step", stop, flush=True)
    sys.stdin.readline()
"""


def _env(tmp_path, **more) -> dict[str, str]:
    (tmp_path / "lock").mkdir(exist_ok=True)
    return {"RANK": "0", "WORLD_SIZE": "1", "OTEL_SERVICE_NAME": "exits",
            "YETO_OTEL_LOCAL_DIR": str(tmp_path / "telemetry"),
            "YETO_OTEL_LOCK_DIR": str(tmp_path / "lock"), "YETO_OTEL_HOST_ALLOCATOR": "none",
            **more}


def _exit_spans(tmp_path) -> list[dict]:
    return [otlp_attributes(span["attributes"])
            for batch in otlp_lines(tmp_path / "telemetry", "traces")
            for rs in batch["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
            if span["name"] == "yeto.rank.exit"]


def _records(tmp_path) -> list[str]:
    return record_names(str(tmp_path / "lock"), os.geteuid())


def _killed_at_step(tmp_path, step: int, how: str = "wait", **env) -> int:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    full.update(_env(tmp_path, **env))
    trainer = subprocess.Popen([instrument_bin(), sys.executable, "-c", TRAINER, str(step), how],
                               env=full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert trainer.stdout.readline() == f"at step {step}\n"
    os.kill(trainer.pid, signal.SIGKILL)
    assert trainer.wait(timeout=60) == -signal.SIGKILL
    return trainer.pid


def _next_launch(tmp_path, **env) -> None:
    result = run_instrumented("print('next launch')", _env(tmp_path, **env), console=False)
    assert result.returncode == 0, result.stderr


def test_a_clean_exit_leaves_nothing_to_report(tmp_path):
    result = run_instrumented(TRAINER, _env(tmp_path), console=False,
                              command=[sys.executable, "-c", TRAINER, "5", "return"])
    assert result.returncode == 0, result.stderr
    assert _records(tmp_path) == []
    _next_launch(tmp_path)
    assert _exit_spans(tmp_path) == []


def test_an_uncaught_exception_is_reported_by_the_rank_itself(tmp_path):
    result = run_instrumented(TRAINER, _env(tmp_path), console=False,
                              command=[sys.executable, "-c", TRAINER, "7", "raise"])
    assert result.returncode == 1 and "loss is nan" in result.stderr
    (span,) = _exit_spans(tmp_path)
    assert {k: span[k] for k in ("yeto.exit.cause", "yeto.exit.code", "yeto.exit.phase",
                                 "yeto.exit.step", "yeto.exit.observer", "yeto.rank")} == {
        "yeto.exit.cause": "exit_code", "yeto.exit.code": 1, "yeto.exit.phase": "step",
        "yeto.exit.step": 7, "yeto.exit.observer": "self", "yeto.rank": 0}
    assert "ValueError: loss is nan" in span["yeto.exit.evidence"]
    assert _records(tmp_path) == []
    _next_launch(tmp_path)
    assert len(_exit_spans(tmp_path)) == 1  # reported once


def test_a_sigkill_without_an_oom_kill_is_not_called_one(tmp_path):
    pid = _killed_at_step(tmp_path, 12)
    assert len(_records(tmp_path)) == 1
    _next_launch(tmp_path)
    (span,) = _exit_spans(tmp_path)
    assert span["yeto.exit.cause"] == "unknown"
    assert (span["yeto.exit.process.pid"], span["yeto.exit.step"], span["yeto.exit.phase"],
            span["yeto.exit.observer"]) == (pid, 12, "step", "next_launch")
    assert span["yeto.exit.service.instance.id"].endswith("/rank-0")
    assert span["yeto.exit.memory.rss"] > 0 and span["yeto.exit.memory.anonymous"] > 0
    assert _records(tmp_path) == []


def test_a_forked_child_never_writes_its_parents_record(tmp_path):
    _killed_at_step(tmp_path, 4, "fork")
    _next_launch(tmp_path)
    (span,) = _exit_spans(tmp_path)  # the parent's death; the child exited through os._exit
    assert span["yeto.exit.step"] == 4


def test_no_record_when_turned_off(tmp_path):
    _killed_at_step(tmp_path, 2, YETO_OTEL_EXIT_RECORDS="off")
    assert _records(tmp_path) == []
    _next_launch(tmp_path, YETO_OTEL_EXIT_RECORDS="off")
    assert _exit_spans(tmp_path) == []
