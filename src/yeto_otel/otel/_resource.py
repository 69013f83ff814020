"""Rank identity as resource attributes.

Every rank needs its own `service.instance.id`: Prometheus derives `instance` from it, and
two ranks sharing one would send clashing samples that are rejected. The id is stable across
restarts of the same rank, so a restart shows as a drop in one series, not as a new series:
`<job>/rank-<R>` where the job is known (settings/_job.py: two jobs on one host never share
it, and a requeued job that lands on another host keeps it), else `<host>/rank-<R>`.

What the launcher says about this launch (its restart count, its step, its own ids) is kept
beside the identity under `yeto.launch.*`: those change from launch to launch, so the
collector's Prometheus exporters leave them out of the series' labels (target_info has them).
"""

from __future__ import annotations

import os
import socket

from opentelemetry.sdk.resources import (HOST_NAME, SERVICE_INSTANCE_ID, OTELResourceDetector,
                                         Resource, ResourceDetector)

from ..settings import Settings, current_settings
from ._process import Role

__all__ = ["JOB_ATTRIBUTE", "LAUNCH_PREFIX", "LOCAL_RANK_ATTRIBUTE", "RANK_ATTRIBUTE",
           "ROLE_ATTRIBUTE", "WORKER_ID_ATTRIBUTE", "WORLD_SIZE_ATTRIBUTE",
           "YetoResourceDetector", "rank_resource_attributes", "reported_attributes",
           "user_resource_attributes", "worker_resource_attributes"]

# The rank's place in the job, next to the standard `host.name` and `service.instance.id`.
RANK_ATTRIBUTE = "yeto.rank"
LOCAL_RANK_ATTRIBUTE = "yeto.local_rank"
WORLD_SIZE_ATTRIBUTE = "yeto.world_size"
# What kind of process reports: `rank`, `process` (no RANK) or `dataloader_worker`.
ROLE_ATTRIBUTE = "yeto.process.role"
# A DataLoader worker's id (`torch.utils.data.get_worker_info().id`), reused across epochs.
WORKER_ID_ATTRIBUTE = "yeto.dataloader.worker_id"
# The job (settings/_job.py), part of the instance id where known.
JOB_ATTRIBUTE = "yeto.job.id"
# This launch, as its launcher says (never labels: see the module's text).
LAUNCH_PREFIX = "yeto.launch."
RANK_SOURCE_ATTRIBUTE = "yeto.launch.rank_source"
SLURM_JOB_ATTRIBUTE = "yeto.launch.slurm.job_id"
SLURM_STEP_ATTRIBUTE = "yeto.launch.slurm.step_id"
SLURM_RESTARTS_ATTRIBUTE = "yeto.launch.slurm.restart_count"
TORCHELASTIC_RUN_ATTRIBUTE = "yeto.launch.torchelastic.run_id"
TORCHELASTIC_RESTARTS_ATTRIBUTE = "yeto.launch.torchelastic.restart_count"


def rank_resource_attributes(settings: Settings, *, hostname: str | None = None,
                             pid: int | None = None) -> dict[str, str | int]:
    """The identity of a rank (`<job>/rank-<R>`, `<host>/rank-<R>` where no job is known) or,
    without a rank, of a plain process (`<host>/pid-<pid>`), and the launch's facts."""
    host = hostname or socket.gethostname()
    job = settings.job
    if settings.rank is not None:
        instance = f"{job.job_id or host}/rank-{settings.rank}"
        role = Role.RANK
    else:
        instance, role = f"{host}/pid-{pid or os.getpid()}", Role.PROCESS
    attributes: dict[str, str | int] = {HOST_NAME: host, SERVICE_INSTANCE_ID: instance,
                                        ROLE_ATTRIBUTE: role.value}
    for key, value in ((RANK_ATTRIBUTE, settings.rank),
                       (LOCAL_RANK_ATTRIBUTE, settings.local_rank),
                       (WORLD_SIZE_ATTRIBUTE, settings.world_size),
                       (JOB_ATTRIBUTE, job.job_id),
                       (RANK_SOURCE_ATTRIBUTE, settings.rank_source),
                       (SLURM_JOB_ATTRIBUTE, job.slurm_job_id),
                       (SLURM_STEP_ATTRIBUTE, job.slurm_step_id),
                       (SLURM_RESTARTS_ATTRIBUTE, job.slurm_restart_count),
                       (TORCHELASTIC_RUN_ATTRIBUTE, job.torchelastic_run_id),
                       (TORCHELASTIC_RESTARTS_ATTRIBUTE, job.torchelastic_restart_count)):
        if value is not None:
            attributes[key] = value
    return attributes


def worker_resource_attributes(rank_attributes: dict, worker_id: int,
                               loader_slot: int = 0) -> dict[str, str | int]:
    """A DataLoader worker's identity under its rank's: `<rank id>/worker-<K>`, or
    `<rank id>/loader-<L>/worker-<K>` for the rank's second and later DataLoaders (two loaders
    iterating at once would otherwise share worker ids)."""
    rank_instance = rank_attributes[SERVICE_INSTANCE_ID]
    loader = f"/loader-{loader_slot}" if loader_slot else ""
    return {**rank_attributes, SERVICE_INSTANCE_ID: f"{rank_instance}{loader}/worker-{worker_id}",
            ROLE_ATTRIBUTE: Role.DATALOADER_WORKER.value, WORKER_ID_ATTRIBUTE: worker_id}


def user_resource_attributes() -> dict:
    """What the user set through OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME; theirs win."""
    return dict(OTELResourceDetector().detect().attributes)


def reported_attributes(settings: Settings) -> dict:
    """The resource a process reports under: its identity, with the user's attributes over it."""
    return {**rank_resource_attributes(settings), **user_resource_attributes()}


class YetoResourceDetector(ResourceDetector):
    """For SDK set-ups other than ours: `OTEL_EXPERIMENTAL_RESOURCE_DETECTORS=yeto,otel`
    (listed first, so the user's own attributes override ours)."""

    def detect(self) -> Resource:
        return Resource(rank_resource_attributes(current_settings()))
