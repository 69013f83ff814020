"""Real Slurm: one identity per rank, whatever the way Slurm starts the job.

A one-node cluster (Debian's munged, slurmctld and slurmd on 127.0.0.1, tests/e2e/
slurm_cluster.py) runs the instrumented trainer (tests/e2e/launched_trainer.py) with `srun`
(its tasks, and with `--mpi=pmi2` and `--mpi=pmix`), from an `sbatch` script (the batch step
itself, and a step inside it), and as `srun torchrun`. What arrives in the local files must be
exactly one identity per rank: `<host>/rank-<R>` for each task, nothing from a launcher, the
batch step a plain process; node metrics from one process at a time; the same identities when
the job is launched again.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from launcher_jobs import (HOST, TRAINER, Job, assert_one_node_reporter_at_a_time, instrument,
                           rank_ids, run, trainer_command)
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
    identities = job.identities()
    assert set(identities) == rank_ids(4)
    trainers = {t["env"]["SLURM_PROCID"]: t["pid"] for t in job.trainers()}
    assert _pids_by_identity(identities) == {f"{HOST}/rank-{r}": {pid}
                                             for r, pid in trainers.items()}
    assert_one_node_reporter_at_a_time(job)


@pytest.mark.parametrize("mpi, variable", [("pmi2", "PMI_RANK"), ("pmix", "PMIX_RANK")])
def test_srun_with_a_process_management_interface(slurm, tmp_path, mpi, variable):
    job = Job.make(tmp_path, f"srun-{mpi}")
    run(["srun", f"--mpi={mpi}", "-n", "2", "-O", *trainer_command(job.out)],
        job.env(**slurm.env), tmp_path)
    assert sorted(t["env"][variable] for t in job.trainers()) == ["0", "1"]
    assert set(job.identities()) == rank_ids(2)


def test_the_batch_step_is_a_plain_process_and_its_srun_tasks_are_ranks(slurm, tmp_path):
    job = Job.make(tmp_path, "sbatch")
    script = tmp_path / "job.sh"
    trainer = " ".join(trainer_command(job.out))
    script.write_text(f"#!/bin/bash\n{trainer}\nsrun -n 2 -O {trainer}\n")
    run(["sbatch", "--wait", "-n", "2", "-O", "-o", str(tmp_path / "job.log"), str(script)],
        job.env(**slurm.env), tmp_path)
    batch = [t for t in job.trainers() if "SLURM_STEP_ID" not in t["env"]]
    assert len(batch) == 1 and batch[0]["env"]["SLURM_PROCID"] == "0", job.trainers()
    assert set(job.identities()) == rank_ids(2) | {f"{HOST}/pid-{batch[0]['pid']}"}


def test_srun_torchrun_reports_its_workers_not_the_launcher(slurm, tmp_path):
    job = Job.make(tmp_path, "srun-torchrun")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    run(["srun", "-n", "1", instrument(), torchrun, "--standalone", "--nproc_per_node=2",
         str(TRAINER), str(job.out), "1.5"], job.env(**slurm.env), tmp_path)
    trainers = job.trainers()
    # the workers inherit the node's task id and take torchrun's RANK
    assert sorted((t["env"]["RANK"], t["env"]["SLURM_PROCID"]) for t in trainers) \
        == [("0", "0"), ("1", "0")]
    assert set(job.identities()) == rank_ids(2)


def test_a_second_launch_reports_under_the_same_identities(slurm, tmp_path):
    job = Job.make(tmp_path, "srun-twice")
    for _ in range(2):
        run(["srun", "-n", "2", "-O", *trainer_command(job.out, 1.0)], job.env(**slurm.env),
            tmp_path)
    pids = _pids_by_identity(job.identities())
    assert set(pids) == rank_ids(2)
    assert all(len(p) == 2 for p in pids.values()), pids
