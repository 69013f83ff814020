"""Real MPI launchers: OpenMPI's `mpirun` and MPICH's `mpiexec` (Debian's packages) start the
instrumented trainer (tests/e2e/launched_trainer.py) as 2 ranks on this host. Neither sets RANK:
each rank must still report as `<host>/rank-<R>`, exactly once, and a second launch under the
same identities. And a Kubeflow PyTorchJob-shaped pod (RANK and WORLD_SIZE in torchrun's own
environment, the job's name from the downward API): torchrun stays silent, its workers are the
ranks of that job."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from launcher_jobs import (TRAINER, Job, assert_one_node_reporter_at_a_time, instrument,
                           rank_ids, run, trainer_command)
from required_components import missing

# (launcher, its arguments for 2 ranks on this host, the variable that carries the rank)
LAUNCHERS = {
    "openmpi": ("mpirun.openmpi", ["-np", "2", "--allow-run-as-root", "--oversubscribe",
                                   "--bind-to", "none"], "OMPI_COMM_WORLD_RANK"),
    "mpich": ("mpiexec.mpich", ["-n", "2"], "PMI_RANK"),
}
PACKAGES = {"openmpi": "openmpi-bin", "mpich": "mpich"}


def launcher(name: str) -> tuple[str, list[str], str]:
    program, args, variable = LAUNCHERS[name]
    path = shutil.which(program)
    if path is None:
        missing(f"{program}", f"apt-get install {PACKAGES[name]}")
    return path, args, variable


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_each_mpi_rank_reports_as_its_rank(tmp_path, name):
    program, args, variable = launcher(name)
    job = Job.make(tmp_path, name)
    for _ in range(2):  # a second launch: the same identities, new processes
        run([program, *args, *trainer_command(job.out, 1.0)], job.env(), tmp_path)
    assert sorted(t["env"][variable] for t in job.trainers()) == ["0", "0", "1", "1"]
    identities = job.identities()
    assert set(identities) == rank_ids(2)
    assert all(len(data["pids"]) == 2 for data in identities.values())
    assert_one_node_reporter_at_a_time(job)


def test_torchrun_in_a_pytorchjob_pod_is_silent_though_it_inherits_a_rank(tmp_path):
    job = Job.make(tmp_path, "pytorchjob")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    # the operator's pod environment: the pod's index as RANK, the pod count as WORLD_SIZE;
    # and the job's name from its pod label (training.kubeflow.org/job-name), which the pod
    # spec hands to YETO_OTEL_JOB_ID through the downward API (docs/processes.md, "Jobs")
    env = job.env(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", PET_NPROC_PER_NODE="2",
                  YETO_OTEL_JOB_ID="pretrain-7b")
    run([instrument(), torchrun, "--standalone", "--nproc_per_node=2", str(TRAINER),
         str(job.out), "1.5"], env, tmp_path)
    workers = {f"pretrain-7b/rank-{t['env']['RANK']}": {t["pid"]} for t in job.trainers()}
    assert set(workers) == rank_ids(2, "pretrain-7b")
    # each identity's reports come from its worker: none from torchrun
    assert {i: set(d["pids"]) for i, d in job.identities().items()} == workers
