"""A rank that dies, for the tests of what its death leaves: the instrumented trainer (local
files, a lock directory of the test's own) killed at a known step, and its next launch, which
reports the death (docs/faults.md, "When a rank dies")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from yeto_otel.exits._record_file import record_names
from zero_code import instrument_bin, otlp_attributes, otlp_lines, run_instrumented

__all__ = ["TRAINER", "env_of", "exit_spans", "killed_at_step", "next_launch", "records"]

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


def env_of(tmp_path, **more) -> dict[str, str]:
    (tmp_path / "lock").mkdir(exist_ok=True)
    return {"RANK": "0", "WORLD_SIZE": "1", "OTEL_SERVICE_NAME": "exits",
            "YETO_OTEL_LOCAL_DIR": str(tmp_path / "telemetry"),
            "YETO_OTEL_LOCK_DIR": str(tmp_path / "lock"), "YETO_OTEL_HOST_ALLOCATOR": "none",
            **more}


def exit_spans(tmp_path) -> list[dict]:
    return [otlp_attributes(span["attributes"])
            for batch in otlp_lines(tmp_path / "telemetry", "traces")
            for rs in batch["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
            if span["name"] == "yeto.rank.exit"]


def records(tmp_path) -> list[str]:
    return record_names(str(tmp_path / "lock"), os.geteuid())


def killed_at_step(tmp_path, step: int, how: str = "wait", **env) -> int:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    full.update(env_of(tmp_path, **env))
    trainer = subprocess.Popen([instrument_bin(), sys.executable, "-c", TRAINER, str(step), how],
                               env=full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert trainer.stdout.readline() == f"at step {step}\n"
    os.kill(trainer.pid, signal.SIGKILL)
    assert trainer.wait(timeout=60) == -signal.SIGKILL
    return trainer.pid


def next_launch(tmp_path, **env) -> None:
    result = run_instrumented("print('next launch')", env_of(tmp_path, **env), console=False)
    assert result.returncode == 0, result.stderr
