"""A real torchrun job for the e2e tests (tests/e2e/torchrun_trainer.py, 2 ranks on this host,
each with a DataLoader of 2 workers), and a reader for the local OTLP JSON files it leaves.

    python tests/e2e/torchrun_job.py [fork spawn forkserver no-python-fork ...]

runs one job per start method with the embedded default (local files), launched as
`opentelemetry-instrument torchrun ...` (`no-python-<method>`: as `torchrun --no-python
opentelemetry-instrument python ...`), and prints what each
identity reported: the processes that wrote it, and for each rank its points per export
interval (the figures quoted when the feature was checked; nothing is asserted here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from e2e_ranks import clean_env, job_lock_dir
from yeto_otel.otel import metric_points, read_json_lines, spans

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "torchrun_trainer.py"
START_METHODS = ("fork", "spawn", "forkserver")
# The two ways a user puts opentelemetry-instrument in front of a torchrun job.
INSTRUMENT_TORCHRUN = "opentelemetry-instrument torchrun"
TORCHRUN_NO_PYTHON = "torchrun --no-python opentelemetry-instrument python"
NPROC = 2  # ranks, all on this host
WORKERS = 2  # DataLoader workers per rank (torchrun_trainer.py)
EPOCHS = 2  # torchrun_trainer.py
INTERVAL_MS = 500  # OTEL_METRIC_EXPORT_INTERVAL
# How long each rank runs at least: several export intervals even with fork, whose epochs
# take a fraction of a second.
MIN_SECONDS = 3.0
LAUNCH_TIMEOUT = 240.0
HOST = socket.gethostname()
FILE_NAME = re.compile(r"^(?P<signal>traces|metrics|logs)-(?P<stem>.+)-(?P<stamp>\d{8}T\d{6})-"
                       r"(?P<pid>\d+)\.jsonl$")


def rank_id(rank: int) -> str:
    return f"{HOST}/rank-{rank}"


def worker_id(rank: int, worker: int) -> str:
    return f"{rank_id(rank)}/worker-{worker}"


RANK_IDS = {rank_id(r) for r in range(NPROC)}
WORKER_IDS = {worker_id(r, k) for r in range(NPROC) for k in range(WORKERS)}


def torchrun_bin() -> str | None:
    """torchrun beside this python (the venv's), if installed."""
    return shutil.which("torchrun", path=os.path.dirname(sys.executable))


def command(form: str, *, instrument: str, torchrun: str, workdir: Path, start_method: str,
            min_seconds: float = MIN_SECONDS) -> list[str]:
    trainer_args = [str(TRAINER), str(workdir), start_method, str(min_seconds)]
    launch = [torchrun, "--standalone", f"--nproc_per_node={NPROC}"]
    if form == INSTRUMENT_TORCHRUN:
        return [instrument, *launch, *trainer_args]
    if form == TORCHRUN_NO_PYTHON:
        return [*launch, "--no-python", instrument, sys.executable, *trainer_args]
    raise ValueError(f"unknown launch form {form!r}")


def local_env(service: str, local_dir: Path, **env: str) -> dict[str, str]:
    """A launcher's environment with no exporter or endpoint set: the embedded default, files
    in `local_dir`."""
    full = dict(clean_env(), OTEL_SERVICE_NAME=service, YETO_OTEL_LOCAL_DIR=str(local_dir),
                YETO_OTEL_LOCK_DIR=job_lock_dir(service),
                OTEL_METRIC_EXPORT_INTERVAL=str(INTERVAL_MS), OTEL_BSP_SCHEDULE_DELAY="500",
                OMP_NUM_THREADS="1",
                # allocator metrics from a stand-in: something a worker must not report
                YETO_OTEL_HOST_ALLOCATOR="yeto_otel.testing:moving",
                # the workers' per-sample loads traced (off by default), to see whose they are
                YETO_OTEL_WORKER_LOAD_SPANS="on")
    full.update(env)
    return full


@dataclass
class Launch:
    """One torchrun job run to completion."""

    form: str
    start_method: str
    workdir: Path
    result: subprocess.CompletedProcess
    started: float  # unix seconds, around the whole launch
    ended: float
    ranks: dict[int, dict] = field(default_factory=dict)  # rank -> torchrun_trainer summary

    def describe(self) -> str:
        return (f"{self.form} ({self.start_method}): exit {self.result.returncode}\n"
                f"--- stdout\n{self.result.stdout[-3000:]}\n--- stderr\n"
                f"{self.result.stderr[-6000:]}")

    def worker_pids(self, rank: int, worker: int) -> set[int]:
        """The processes that were worker `worker` of `rank`, one per epoch, as the samples
        they made said."""
        summary = self.ranks[rank]["workers"]
        return {pid for key, pids in summary.items() if key.endswith(f"/{worker}")
                for pid in pids}


def launch(cmd: list[str], env: dict[str, str], workdir: Path, *, form: str,
           start_method: str, timeout: float = LAUNCH_TIMEOUT) -> Launch:
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher, its ranks and their workers: a new session
        out, err = proc.communicate()
    ended = time.time()
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    ranks = {}
    for rank in range(NPROC):
        path = workdir / f"rank-{rank}.json"
        if path.exists():
            ranks[rank] = json.loads(path.read_text())
    return Launch(form, start_method, workdir, result, started, ended, ranks)


# --- the local files ---------------------------------------------------------------------


@dataclass
class LocalFile:
    """One local OTLP JSON file: one signal of one process."""

    path: Path
    signal: str
    stem: str  # the identity, made safe for a file name
    stamp: str  # the process's start, UTC, to the second
    pid: int
    points: list = field(default_factory=list)
    spans: list = field(default_factory=list)
    bad: list = field(default_factory=list)

    @property
    def identities(self) -> set[str]:
        return {str(r.resource.get("service.instance.id")) for r in (*self.points, *self.spans)}


def file_stem(identity: str) -> str:
    """The file-name form of an identity (as yeto_otel.otel.local_file_stem makes it)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", identity).strip("_")


def read_local(directory: Path) -> list[LocalFile]:
    """Every telemetry file in `directory`, parsed with the package's own reader. A file whose
    name is not `<signal>-<identity>-<stamp>-<pid>.jsonl` raises: nothing else belongs there."""
    files = []
    for path in sorted(Path(directory).iterdir()):
        match = FILE_NAME.match(path.name)
        if match is None:
            raise AssertionError(f"unexpected file in the telemetry directory: {path.name}")
        local = LocalFile(path, match["signal"], match["stem"], match["stamp"], int(match["pid"]))
        good, local.bad = read_json_lines(path)
        for _, batch in good:
            if local.signal == "metrics":
                local.points += metric_points(batch)[0]
            elif local.signal == "traces":
                local.spans += spans(batch)
        files.append(local)
    return files


def by_identity(files: list[LocalFile]) -> dict[str, dict]:
    """identity -> {"points": [...], "spans": [...], "pids": {pid: [files]}}, from what the
    files hold (the resource's service.instance.id), not from their names."""
    out: dict[str, dict] = defaultdict(lambda: {"points": [], "spans": [], "pids": {}})
    for local in files:
        for point in local.points:
            out[str(point.resource.get("service.instance.id"))]["points"].append(point)
        for span in local.spans:
            out[str(span.resource.get("service.instance.id"))]["spans"].append(span)
        for identity in local.identities:
            out[identity]["pids"].setdefault(local.pid, []).append(local.path.name)
    return dict(out)


def points_of(points: list, name: str) -> list:
    return sorted((p for p in points if p.name == name), key=lambda p: p.time_ns)


def expected_points(lifetime_s: float) -> float:
    """Export intervals in `lifetime_s`: about one point per interval of a metric."""
    return lifetime_s * 1000.0 / INTERVAL_MS


def rank_lifetime(summary: dict) -> float:
    """Seconds from the rank's process start to the end of its script (its last points follow
    at exit)."""
    return summary["ended"] - summary["process_started"]


# --- figures -----------------------------------------------------------------------------


def figures(job: Launch, files: list[LocalFile]) -> str:
    identities = by_identity(files)
    lines = [f"{job.form}, {job.start_method}: launch {job.ended - job.started:.1f} s, "
             f"exit {job.result.returncode}, {len(files)} files, "
             f"{len(identities)} identities"]
    for identity in sorted(identities):
        data = identities[identity]
        roles = {str(p.resource.get("yeto.process.role")) for p in data["points"]}
        rss = points_of(data["points"], "yeto.process.memory.rss")
        line = (f"  {identity:<28} role={','.join(sorted(roles)) or '-':<17} "
                f"processes={len(data['pids'])} rss points={len(rss)}")
        rank = next((r for r in range(NPROC) if identity == rank_id(r)), None)
        if rank is not None and rank in job.ranks:
            lifetime = rank_lifetime(job.ranks[rank])
            line += (f" over {lifetime:.1f} s = {len(rss) / expected_points(lifetime):.2f} "
                     f"per {INTERVAL_MS} ms interval")
        else:
            per_process = defaultdict(int)
            for local in files:
                if local.signal == "metrics" and identity in local.identities:
                    per_process[local.pid] = len(points_of(local.points,
                                                           "yeto.process.memory.rss"))
            line += f" (per process: {sorted(per_process.values())})"
        names = {p.name for p in data["points"]}
        line += f", {len(names)} metrics, {len(data['spans'])} spans"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import tempfile

    instrument = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    torchrun = torchrun_bin()
    if not (instrument and torchrun):
        print("needs opentelemetry-instrument and torchrun beside this python", file=sys.stderr)
        return 1
    for name in argv or START_METHODS:
        form = TORCHRUN_NO_PYTHON if name.startswith("no-python-") else INSTRUMENT_TORCHRUN
        start_method = name.removeprefix("no-python-")
        with tempfile.TemporaryDirectory(prefix="yeto-torchrun-") as tmp:
            workdir = Path(tmp)
            job = launch(command(form, instrument=instrument, torchrun=torchrun,
                                 workdir=workdir, start_method=start_method),
                         local_env(f"yeto-figures-{start_method}", workdir / "telemetry"),
                         workdir, form=form, start_method=start_method)
            print(figures(job, read_local(workdir / "telemetry")))
            if job.result.returncode != 0:
                print(job.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
