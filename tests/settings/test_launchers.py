"""The rank from each launcher's own variables, in the documented precedence."""

from __future__ import annotations

import pytest

from yeto_otel.settings import SettingsError, load_settings
from yeto_otel.settings._launchers import LaunchPlace, launch_place

STEP = {"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0"}


@pytest.mark.parametrize("env, place", [
    # torchrun (and Kubeflow, JobSet, DeepSpeed, accelerate with several processes)
    ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}, LaunchPlace(3, 1, 4, "torch")),
    # srun -n 4: a task of a job step
    ({**STEP, "SLURM_PROCID": "2", "SLURM_LOCALID": "2", "SLURM_NTASKS": "4"},
     LaunchPlace(2, 2, 4, "slurm")),
    # the batch step of sbatch: task 0, but of no step
    ({"SLURM_JOB_ID": "41", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "1"},
     LaunchPlace()),
    # srun torchrun: the worker's RANK wins over the node's task id
    ({**STEP, "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2", "RANK": "3",
      "LOCAL_RANK": "1", "WORLD_SIZE": "4"}, LaunchPlace(3, 1, 4, "torch")),
    # mpirun (OpenMPI also sets PMIX_RANK: its own variables win)
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "OMPI_COMM_WORLD_SIZE": "2", "PMIX_RANK": "1"}, LaunchPlace(1, 1, 2, "openmpi")),
    # srun --mpi=pmix: PMIX_RANK alone, the rest from the step
    ({**STEP, "PMIX_RANK": "3", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
      "SLURM_NTASKS": "4"}, LaunchPlace(3, 1, 4, "pmix")),
    # mpiexec (MPICH's hydra, Intel MPI)
    ({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
     LaunchPlace(1, 1, 2, "pmi")),
    # srun --mpi=pmi2: PMI_RANK and PMI_SIZE, the local rank from the step
    ({**STEP, "PMI_RANK": "1", "PMI_SIZE": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "1",
      "SLURM_NTASKS": "2"}, LaunchPlace(1, 1, 2, "pmi")),
    # a step whose task id is another rank fills no gap
    ({**STEP, "PMIX_RANK": "3", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
      "SLURM_NTASKS": "1"}, LaunchPlace(3, None, None, "pmix")),
    ({"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_LOCAL_RANK": "1",
      "MV2_COMM_WORLD_SIZE": "8"}, LaunchPlace(5, 1, 8, "mvapich2")),
    # Lightning's own launcher: its rank 1 on node 0; beyond node 0 the rank is pending
    ({"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2"}, LaunchPlace(1, 1, 2, "lightning")),
    ({"LOCAL_RANK": "1", "NODE_RANK": "1", "WORLD_SIZE": "4"},
     LaunchPlace(None, 1, 4, "lightning", rank_pending=True)),
    # its local rank 0 is the process the user started: a process that inherits it is a helper
    ({"LOCAL_RANK": "0", "NODE_RANK": "0", "WORLD_SIZE": "2"}, LaunchPlace(None, 0, 2)),
    ({"LOCAL_RANK": "1"}, LaunchPlace()),
    ({}, LaunchPlace()),
])
def test_each_launcher_names_the_rank(env, place):
    assert launch_place(env) == place


def test_the_first_source_that_names_a_rank_wins():
    every = {**STEP, "SLURM_PROCID": "5", "SLURM_NTASKS": "8", "MV2_COMM_WORLD_RANK": "4",
             "PMI_RANK": "3", "PMIX_RANK": "2", "OMPI_COMM_WORLD_RANK": "1", "RANK": "0"}
    order = ["RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"]
    for expected, name in enumerate(order):
        assert launch_place(every).rank == expected
        del every[name]
    assert launch_place(every) == LaunchPlace(5, None, 8, "slurm")


@pytest.mark.parametrize("env, named", [
    ({"OMPI_COMM_WORLD_RANK": "one"}, "OMPI_COMM_WORLD_RANK"),
    ({"PMI_RANK": "1", "PMI_SIZE": "x"}, "PMI_SIZE"),
    ({**STEP, "SLURM_PROCID": "-1"}, "SLURM_PROCID"),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_RANK"),
    ({"LOCAL_RANK": "2", "NODE_RANK": "0", "WORLD_SIZE": "2"}, "LOCAL_RANK"),
])
def test_a_malformed_value_of_the_winner_names_its_variable(env, named):
    with pytest.raises(SettingsError) as raised:
        launch_place(env)
    assert raised.value.name == named


def test_a_bad_slurm_variable_only_filling_gaps_is_left_alone():
    env = {**STEP, "PMIX_RANK": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "lots"}
    assert launch_place(env) == LaunchPlace(1, None, None, "pmix")


def test_the_settings_carry_the_launchers_rank():
    settings = load_settings({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                              "OMPI_COMM_WORLD_SIZE": "2"})
    assert (settings.rank, settings.local_rank, settings.world_size, settings.rank_source) \
        == (1, 0, 2, "openmpi")
    plain = load_settings({"LOCAL_RANK": "0"})
    assert (plain.rank, plain.local_rank, plain.rank_source) == (None, 0, None)
