"""The job a process belongs to, from YETO_OTEL_JOB_ID or the launcher's variables."""

from __future__ import annotations

import uuid

import pytest

from yeto_otel.settings import load_settings
from yeto_otel.settings._job import JobPlace, job_place

SLURM = {"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}


@pytest.mark.parametrize("env, explicit, place", [
    ({}, None, JobPlace()),
    (SLURM, None, JobPlace("slurm-41", "41", "0")),
    # a requeued job keeps its id and counts the requeues
    ({**SLURM, "SLURM_RESTART_COUNT": "2"}, None, JobPlace("slurm-41", "41", "0", 2)),
    # the batch step: no step id, the same job
    ({"SLURM_JOB_ID": "41", "SLURM_PROCID": "0"}, None, JobPlace("slurm-41", "41")),
    # a task of a job array is a job of its own
    ({**SLURM, "SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID": "2"},
     None, JobPlace("slurm-41_2", "43", "0")),
    # a torchrun run id the user chose names the job; torchrun's own never do
    ({"TORCHELASTIC_RUN_ID": "llama-pretrain", "TORCHELASTIC_RESTART_COUNT": "1"}, None,
     JobPlace("torchelastic-llama-pretrain", torchelastic_run_id="llama-pretrain",
              torchelastic_restart_count=1)),
    ({"TORCHELASTIC_RUN_ID": "none"}, None, JobPlace(torchelastic_run_id="none")),
    ({"TORCHELASTIC_RUN_ID": str(uuid.UUID(int=7))}, None,
     JobPlace(torchelastic_run_id=str(uuid.UUID(int=7)))),
    # srun torchrun: the Slurm job is the job
    ({**SLURM, "TORCHELASTIC_RUN_ID": "run-1"}, None,
     JobPlace("slurm-41", "41", "0", torchelastic_run_id="run-1")),
    # YETO_OTEL_JOB_ID wins over every launcher
    (SLURM, "pytorchjob-7b", JobPlace("pytorchjob-7b", "41", "0")),
    # what cannot stand in an id is left out
    ({"SLURM_JOB_ID": "41/x", "SLURM_RESTART_COUNT": "many"}, None, JobPlace()),
])
def test_the_job(env, explicit, place):
    assert job_place(env, explicit) == place


def test_the_settings_carry_the_job():
    assert load_settings({**SLURM}).job.job_id == "slurm-41"
    settings = load_settings({**SLURM, "YETO_OTEL_JOB_ID": "mine"})
    assert (settings.job_id, settings.job.job_id) == ("mine", "mine")
