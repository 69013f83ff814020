"""What the launcher tests share: a job's environment (the embedded default: local files), the
trainer each launcher starts, and what the job's local files say about its identities."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from e2e_ranks import clean_env, job_lock_dir
from torchrun_job import by_identity, read_local
from yeto_otel.census import CENSUS

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "launched_trainer.py"
HOST = socket.gethostname()
INTERVAL_MS = 300
RUN_TIMEOUT = 180.0
NODE_METRICS = {m.name for m in CENSUS if m.node}
# Variables a launcher sets: none may leak in from the shell that runs the tests.
LAUNCHER_VARIABLES = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCALRANKID", "MV2_")


def instrument() -> str:
    return os.path.join(os.path.dirname(sys.executable), "opentelemetry-instrument")


def run(cmd: list[str], env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    """Run a launcher to its end (killed with everything it started after RUN_TIMEOUT); it must
    succeed."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{out[-3000:]}\n{err[-5000:]}"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def wait_until(condition, what: str, timeout: float = RUN_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)


def trainer_command(out: Path, seconds: float = 1.5) -> list[str]:
    return [instrument(), sys.executable, str(TRAINER), str(out), str(seconds)]


@dataclass
class Job:
    """One test job's directories and environment."""

    root: Path
    service: str

    @classmethod
    def make(cls, root: Path, kind: str) -> "Job":
        root.mkdir(parents=True, exist_ok=True)
        (root / "telemetry").mkdir()
        (root / "out").mkdir()
        return cls(root, f"yeto-{kind}-{uuid.uuid4().hex[:8]}")

    @property
    def telemetry(self) -> Path:
        return self.root / "telemetry"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in clean_env().items()
               if not k.startswith(LAUNCHER_VARIABLES) and k != "NODE_RANK"}
        env.update(OTEL_SERVICE_NAME=self.service, YETO_OTEL_LOCAL_DIR=str(self.telemetry),
                   YETO_OTEL_LOCK_DIR=job_lock_dir(self.service),
                   OTEL_METRIC_EXPORT_INTERVAL=str(INTERVAL_MS), OMP_NUM_THREADS="1",
                   YETO_OTEL_HOST_ALLOCATOR="none")
        env.update(extra)
        return env

    def identities(self) -> dict[str, dict]:
        """identity -> what its processes reported (tests/e2e/torchrun_job.py)."""
        return by_identity(read_local(self.telemetry))

    def trainers(self) -> list[dict]:
        """What each trainer process wrote: its pid and the launcher variables it saw."""
        return [json.loads(p.read_text()) for p in sorted(self.out.glob("*.json"))]


def rank_ids(count: int, job: str | None = None) -> set[str]:
    """The identities of ranks 0..count-1: `<job>/rank-<R>` in a job, else `<host>/rank-<R>`."""
    return {f"{job or HOST}/rank-{r}" for r in range(count)}


def slurm_jobs(trainers: list[dict]) -> set[str]:
    """The Slurm jobs the trainers ran in, as their identities name them."""
    return {f"slurm-{t['env']['SLURM_JOB_ID']}" for t in trainers}


def node_holders(job: Job) -> dict[tuple[str, int], tuple[int, int]]:
    """(identity, pid) -> the times of the process's first and last node point."""
    held = {}
    for local in read_local(job.telemetry):
        times = [p.time_ns for p in local.points if p.name in NODE_METRICS]
        if times:
            held[(local.stem, local.pid)] = (min(times), max(times))
    return held


def assert_one_node_reporter_at_a_time(job: Job) -> None:
    """Node metrics from one process at a time: one that takes the duty over (when the holder
    exits, or in the next launch) starts after the holder's last point, less one collection's
    slack (a point is stamped before the duty is asked for)."""
    held = node_holders(job)
    assert held, "nobody reported node metrics"
    ordered = sorted(held.values())
    for (_, last), (taken, _) in zip(ordered, ordered[1:]):
        assert taken >= last - INTERVAL_MS * 1_000_000, held
