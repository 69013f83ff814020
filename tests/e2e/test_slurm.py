"""Real Slurm: one identity per rank, whatever the way Slurm starts the job.

A one-node cluster (Debian's munged, slurmctld and slurmd on 127.0.0.1, tests/e2e/
slurm_cluster.py) runs the instrumented trainer (tests/e2e/launched_trainer.py) with `srun`
(its tasks, and with `--mpi=pmi2` and `--mpi=pmix`), from an `sbatch` script (the batch step
itself, and a step inside it), and as `srun torchrun`. What arrives in the local files must be
exactly one identity per rank: `<host>/rank-<R>` for each task, nothing from a launcher, the
batch step a plain process; node metrics from one process at a time; the same identities for
a second step of the job and after `scontrol requeue`, and other identities for another job on
the same host. A rank of a Slurm job is `slurm-<job id>/rank-<R>`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from launcher_jobs import (HOST, RUN_TIMEOUT, TRAINER, Job, assert_one_node_reporter_at_a_time,
                           instrument, rank_ids, run, slurm_jobs, trainer_command, wait_until)
from required_components import missing
from slurm_cluster import SlurmCluster, missing_programs


@pytest.fixture(scope="module")
def slurm():
    gone = missing_programs()
    if gone:
        missing(f"Slurm ({', '.join(gone)})", "apt-get install slurmd slurmctld munge libpmix-dev")
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm cluster runs its daemons as root")
    cluster = SlurmCluster().start()
    yield cluster
    cluster.stop()


def _pids_by_identity(identities: dict[str, dict]) -> dict[str, set[int]]:
    return {identity: set(data["pids"]) for identity, data in identities.items()}


def test_srun_tasks_are_the_ranks(slurm, tmp_path):
    job = Job.make(tmp_path, "srun")
    run(["srun", "-n", "4", "-O", *trainer_command(job.out)], job.env(**slurm.env), tmp_path)
    trainers = job.trainers()
    (slurm_job,) = slurm_jobs(trainers)
    identities = job.identities()
    assert set(identities) == rank_ids(4, slurm_job)
    assert _pids_by_identity(identities) == {
        f"{slurm_job}/rank-{t['env']['SLURM_PROCID']}": {t["pid"]} for t in trainers}
    assert_one_node_reporter_at_a_time(job)


@pytest.mark.parametrize("mpi, variable", [("pmi2", "PMI_RANK"), ("pmix", "PMIX_RANK")])
def test_srun_with_a_process_management_interface(slurm, tmp_path, mpi, variable):
    job = Job.make(tmp_path, f"srun-{mpi}")
    run(["srun", f"--mpi={mpi}", "-n", "2", "-O", *trainer_command(job.out)],
        job.env(**slurm.env), tmp_path)
    trainers = job.trainers()
    assert sorted(t["env"][variable] for t in trainers) == ["0", "1"]
    (slurm_job,) = slurm_jobs(trainers)
    assert set(job.identities()) == rank_ids(2, slurm_job)


def test_the_batch_step_is_a_plain_process_and_its_steps_are_ranks(slurm, tmp_path):
    job = Job.make(tmp_path, "sbatch")
    script = tmp_path / "job.sh"
    trainer = " ".join(trainer_command(job.out, 1.0))
    # the batch step itself, then two steps: a second launch of the same job's ranks
    script.write_text(f"#!/bin/bash\n{trainer}\nsrun -n 2 -O {trainer}\n"
                      f"srun -n 2 -O {trainer}\n")
    run(["sbatch", "--wait", "-n", "2", "-O", "-o", str(tmp_path / "job.log"), str(script)],
        job.env(**slurm.env), tmp_path)
    trainers = job.trainers()
    batch = [t for t in trainers if "SLURM_STEP_ID" not in t["env"]]
    assert len(batch) == 1 and batch[0]["env"]["SLURM_PROCID"] == "0", trainers
    (slurm_job,) = slurm_jobs(trainers)
    pids = _pids_by_identity(job.identities())
    assert set(pids) == rank_ids(2, slurm_job) | {f"{HOST}/pid-{batch[0]['pid']}"}
    assert all(len(pids[i]) == 2 for i in rank_ids(2, slurm_job)), pids


def test_srun_torchrun_reports_its_workers_not_the_launcher(slurm, tmp_path):
    job = Job.make(tmp_path, "srun-torchrun")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    run(["srun", "-n", "1", instrument(), torchrun, "--standalone", "--nproc_per_node=2",
         str(TRAINER), str(job.out), "1.5"], job.env(**slurm.env), tmp_path)
    trainers = job.trainers()
    # the workers inherit the node's task id and take torchrun's RANK
    assert sorted((t["env"]["RANK"], t["env"]["SLURM_PROCID"]) for t in trainers) \
        == [("0", "0"), ("1", "0")]
    (slurm_job,) = slurm_jobs(trainers)
    assert {i: set(d["pids"]) for i, d in job.identities().items()} \
        == {f"{slurm_job}/rank-{t['env']['RANK']}": {t["pid"]} for t in trainers}


def test_two_jobs_on_one_host_never_share_an_identity(slurm, tmp_path):
    job = Job.make(tmp_path, "two-jobs")  # one service name, one directory: only the job differs
    env = job.env(**slurm.env)
    both = [subprocess.Popen(["srun", "-n", "2", "-O", *trainer_command(job.out, 2.0)], env=env,
                             cwd=tmp_path, start_new_session=True) for _ in range(2)]
    assert [p.wait(timeout=RUN_TIMEOUT) for p in both] == [0, 0]
    jobs = slurm_jobs(job.trainers())
    assert len(jobs) == 2
    pids = _pids_by_identity(job.identities())
    assert set(pids) == set().union(*(rank_ids(2, j) for j in jobs))
    assert all(len(p) == 1 for p in pids.values()), pids
    # The report of the shared directory: four ranks, each named with its job.
    page = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "yeto_otel.cli", "report", str(job.telemetry), "-o",
                    str(page)], check=True, capture_output=True, timeout=RUN_TIMEOUT)
    text = page.read_text()
    for identity in pids:
        slurm_job = identity.split("/")[0]
        assert f"<code>{identity}</code> <span class=dim>job {slurm_job}, host {HOST}" in text


def _job_state(job_id: str, env: dict[str, str]) -> str:
    shown = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True,
                           text=True).stdout
    return next((w.split("=", 1)[1] for w in shown.split() if w.startswith("JobState=")), "")


def test_a_requeued_job_keeps_its_identities(slurm, tmp_path):
    job = Job.make(tmp_path, "requeue")
    env = job.env(**slurm.env)
    script = tmp_path / "job.sh"
    # the ranks, then the batch step stays in the job until it is requeued (and cancelled)
    script.write_text(f"#!/bin/bash\nsrun -n 2 -O {' '.join(trainer_command(job.out, 1.0))}\n"
                      "sleep 600\n")
    job_id = run(["sbatch", "--parsable", "--requeue", "-n", "2", "-O", "-o",
                  str(tmp_path / "job.log"), str(script)], env, tmp_path).stdout.split(";")[0]
    job_id = job_id.strip()
    try:
        wait_until(lambda: len(job.trainers()) == 2, "the first launch's ranks")
        run(["scontrol", "requeue", job_id], env, tmp_path)
        wait_until(lambda: _job_state(job_id, env) == "PENDING", "the job pending again")
        # a requeued job is eligible again only ~2 minutes later: now
        run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env, tmp_path)
        wait_until(lambda: len(job.trainers()) == 4, "the requeued launch's ranks")
    finally:
        subprocess.run(["scancel", job_id], env=env, capture_output=True)
    trainers = job.trainers()
    assert sorted(t["env"].get("SLURM_RESTART_COUNT", "-") for t in trainers) \
        == ["-", "-", "1", "1"]
    identities = job.identities()
    assert set(identities) == rank_ids(2, f"slurm-{job_id}")
    assert all(len(data["pids"]) == 2 for data in identities.values())
    # each launch says which it is, beside the identity
    restarts = {p.resource.get("yeto.launch.slurm.restart_count")
                for data in identities.values() for p in data["points"]}
    assert restarts == {None, 1}
