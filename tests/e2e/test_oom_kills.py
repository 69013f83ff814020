"""A rank the kernel OOM-kills, in a real memory cgroup (v1 here), in each phase a trainer
goes through: during a step, during a mapped restart and during a DCP save. Its next launch
reports the death once: cause `oom_kill`, the phase (the innermost yeto span open), the step,
its memory. And a 2-rank torchrun job in which rank 1 is OOM-killed at a known step while
torchrun stops rank 0: after torchrun restarts them, exactly one `oom_kill` exit, rank 1's,
and none claiming one for rank 0.

Needs root and the memory controller on cgroup v1: skipped with a message elsewhere, failed in
CI."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memory_cgroups import child_memory_cgroup, in_cgroup
from zero_code import instrument_bin, otlp_attributes, otlp_lines

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "dying_trainer.py"
MiB = 1 << 20
LIMIT = 768 * MiB  # torch imported (~300 MiB) with room to grow, killed long before the host
TIMEOUT = 300


def _env(tmp_path: Path, rank: str | None = "0") -> dict[str, str]:
    (tmp_path / "lock").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(OTEL_SERVICE_NAME="dying", YETO_OTEL_LOCAL_DIR=str(tmp_path / "telemetry"),
               YETO_OTEL_LOCK_DIR=str(tmp_path / "lock"), YETO_OTEL_HOST_ALLOCATOR="none",
               OMP_NUM_THREADS="1")
    if rank is not None:
        env.update(RANK=rank, WORLD_SIZE="1")
    return env


def exit_spans(tmp_path: Path) -> list[dict]:
    return [otlp_attributes(span["attributes"])
            for batch in otlp_lines(tmp_path / "telemetry", "traces")
            for rs in batch["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
            if span["name"] == "yeto.rank.exit"]


def next_launch(tmp_path: Path, rank: str) -> None:
    subprocess.run([instrument_bin(), sys.executable, "-c", "pass"], env=_env(tmp_path, rank),
                   check=True, timeout=TIMEOUT)


@pytest.fixture
def cgroup(request) -> Path:
    return child_memory_cgroup(request, LIMIT)


def _anchors(tmp_path: Path) -> None:
    import torch

    from yeto_otel.anchors import save_resume_anchors
    save_resume_anchors(tmp_path / "anchors.pt", {f"w{i}": torch.ones(256, 1024) for i in range(8)})


@pytest.mark.parametrize("phase, expected", [("step", "step"),
                                             ("resume", "yeto.resume.anchors"),
                                             ("dcp_save", "dcp.save.write")])
def test_an_oom_killed_rank_is_reported_with_its_phase_and_step(tmp_path, cgroup, phase,
                                                                expected):
    if phase == "resume":
        _anchors(tmp_path)
    command = [instrument_bin(), sys.executable, str(TRAINER), phase, "6", str(tmp_path)]
    trainer = subprocess.run(in_cgroup(cgroup, command), env=_env(tmp_path), timeout=TIMEOUT,
                             capture_output=True, text=True)
    assert trainer.returncode == -signal.SIGKILL, trainer.stderr
    assert "at step 6" in trainer.stdout
    next_launch(tmp_path, "0")
    (span,) = exit_spans(tmp_path)
    assert {k: span.get(k) for k in ("yeto.exit.cause", "yeto.exit.phase", "yeto.exit.step",
                                     "yeto.rank", "yeto.exit.observer")} == {
        "yeto.exit.cause": "oom_kill", "yeto.exit.phase": expected, "yeto.exit.step": 6,
        "yeto.rank": 0, "yeto.exit.observer": "next_launch"}
    assert span["yeto.exit.cgroup.memory.limit"] == LIMIT
    assert 0 < span["yeto.exit.memory.anonymous"] < span["yeto.exit.memory.rss"] < LIMIT
    assert "memory cgroup counted" in span["yeto.exit.evidence"]


def test_one_rank_oom_killed_in_a_torchrun_job_is_the_only_oom(tmp_path, request):
    cgroup = child_memory_cgroup(request, 2 * LIMIT)  # the launcher and two ranks
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    command = [instrument_bin(), torchrun, "--standalone", "--nproc_per_node=2",
               "--max-restarts=1", "--monitor-interval=0.1", str(TRAINER), "job", "9",
               str(tmp_path)]
    job = subprocess.run(in_cgroup(cgroup, command, oom_first=False), env=_env(tmp_path, None),
                         timeout=TIMEOUT, capture_output=True, text=True)
    assert job.returncode == 0, job.stderr[-3000:]  # the restart ran through
    spans = {span["yeto.rank"]: span for span in exit_spans(tmp_path)}
    assert len(exit_spans(tmp_path)) == 2 and set(spans) == {0, 1}
    killed, stopped = spans[1], spans[0]
    assert (killed["yeto.exit.cause"], killed["yeto.exit.phase"], killed["yeto.exit.step"]) == (
        "oom_kill", "step", 9)
    # the instrumented torchrun wrote each worker's exit status into its record
    assert killed["yeto.exit.signal"] == "SIGKILL"
    assert (stopped["yeto.exit.cause"], stopped["yeto.exit.signal"]) == ("signal", "SIGTERM")
    assert stopped["yeto.exit.step"] >= 9
    # seen when torchrun restarted the ranks, not a collection interval later
    assert {s["yeto.exit.observer"] for s in spans.values()} <= {"next_launch", "node"}
