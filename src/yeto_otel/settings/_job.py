"""Which job a process belongs to, from its launcher's own variables.

Rank identities must be unique per job: two jobs on one host (or two hosts that share a
hostname under `hostNetwork`) would otherwise write into the same series, and Prometheus
refuses the second as out of order or duplicate. And they must stay the same across restarts
of the job (a rank is not a process). The job, in this order:

| source | job id | the launcher's facts kept beside it |
|---|---|---|
| YETO_OTEL_JOB_ID | as given (Kubernetes: the job's name through the downward API) | |
| Slurm | `slurm-<SLURM_JOB_ID>`, `slurm-<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>` in an array | SLURM_JOB_ID, SLURM_STEP_ID, SLURM_RESTART_COUNT |
| torchrun | `torchelastic-<TORCHELASTIC_RUN_ID>`, a run id the user chose (`--rdzv-id`) | TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT |

A Slurm job keeps its id across `scontrol requeue` (SLURM_RESTART_COUNT counts them). torchrun's
own run ids say nothing about the job: `--standalone` makes up a new uuid at every launch and
the static rendezvous says `none`; both are ignored, so a relaunch keeps its identities, and
two such jobs on one host are told apart by their service name (OTEL_SERVICE_NAME).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Mapping

from ._values import parse_rank

__all__ = ["JobPlace", "job_place"]


@dataclass(frozen=True)
class JobPlace:
    """The job, and the launcher's facts about this launch of it."""

    job_id: str | None = None
    slurm_job_id: str | None = None
    slurm_step_id: str | None = None
    slurm_restart_count: int | None = None
    torchelastic_run_id: str | None = None
    torchelastic_restart_count: int | None = None


# What may stand in a job id: it becomes part of `service.instance.id` and of file names.
_JOB_TEXT = re.compile(r"[A-Za-z0-9._-]{1,128}")


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value if _JOB_TEXT.fullmatch(value) else None


def _count(env: Mapping[str, str], name: str) -> int | None:
    try:
        return parse_rank(env.get(name, "").strip())
    except ValueError:
        return None  # the launcher's to get right: a fact left out, not a failed start


def _chosen_run_id(run_id: str | None) -> str | None:
    """A torchrun run id that names the job, not one torchrun made up."""
    if run_id is None or run_id == "none":
        return None
    try:
        uuid.UUID(run_id)
        return None  # --standalone: a new uuid4 every launch
    except ValueError:
        return run_id


def job_place(environ: Mapping[str, str], explicit: str | None = None) -> JobPlace:
    """The job this process belongs to (see the module's text); `explicit`: YETO_OTEL_JOB_ID."""
    slurm_job = _text(environ, "SLURM_JOB_ID")
    array_job, array_task = _text(environ, "SLURM_ARRAY_JOB_ID"), _text(environ,
                                                                         "SLURM_ARRAY_TASK_ID")
    run_id = _text(environ, "TORCHELASTIC_RUN_ID")
    if explicit is not None:
        job = explicit
    elif slurm_job is not None:
        job = f"slurm-{array_job}_{array_task}" if array_job and array_task else \
            f"slurm-{slurm_job}"
    elif _chosen_run_id(run_id) is not None:
        job = f"torchelastic-{run_id}"
    else:
        job = None
    return JobPlace(job, slurm_job, _text(environ, "SLURM_STEP_ID"),
                    _count(environ, "SLURM_RESTART_COUNT"), run_id,
                    _count(environ, "TORCHELASTIC_RESTART_COUNT"))
