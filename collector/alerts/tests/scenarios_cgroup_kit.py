"""What the memory-cgroup scenarios share: the cgroup series as Prometheus stores them, who
reports them (one rank per cgroup at a time, with that rank's labels), and the labels the cgroup
alerts carry.

A pod's 8 ranks share one cgroup: one of them (any, not always local rank 0) reports it, and
another takes over when it exits, under its own `instance`. A Slurm job may give each rank its
own cgroup instead: then each rank reports its own. Magnitudes: a cgroup limit of 480 GiB for
the 8 ranks of a host, one value a minute.
"""

from __future__ import annotations

from typing import Callable

from promtool_format import Series
from scenario_kit import CLUSTER, JOB, JOB_ID, RANK_ROLE, GiB, rank_labels

# The Prometheus names of the cgroup census (yeto.cgroup.memory.*) and their point attributes;
# tests/collector checks they are the product's.
USAGE = "yeto_cgroup_memory_usage_bytes"
LIMIT = "yeto_cgroup_memory_limit_bytes"
ANON = "yeto_cgroup_memory_anon_bytes"
SHMEM = "yeto_cgroup_memory_shmem_bytes"
FILE = "yeto_cgroup_memory_file_bytes"
EVENTS = "yeto_cgroup_memory_events_total"
PRESSURE = "yeto_cgroup_memory_pressure_seconds_total"
EVENT = "event"
LEVEL = "level"
INFO = "yeto_cgroup_memory_info"
CGROUP_PATH = "yeto_cgroup_path"

CGROUP_LIMIT = 480 * GiB
HEADROOM = "90%"  # yeto:cgroup_headroom_threshold:ratio, as humanizePercentage prints it
PRESSURE_THRESHOLD = "10%"  # yeto:cgroup_pressure_threshold:ratio, the same way
HOST_FIRST_RANK = {"node-a": 0, "node-b": 8, "node-c": 16, "node-d": 24, "node-e": 32}


def rank_of(host: str, local: int) -> int:
    return HOST_FIRST_RANK[host] + local


def observed(metric: str, host: str, local: int, value: Callable[[int], object],
             job_id: str | None = None, **attributes: str) -> Series:
    """A cgroup series as the rank `local` of `host` reports it (while it holds the duty)."""
    return Series(metric, dict(_rank(host, local, job_id), **attributes), value)


def _rank(host: str, local: int, job_id: str | None) -> dict[str, str]:
    """A rank's labels; in a named job (one of two on a one-host node) its ranks count from 0."""
    rank = local if job_id else rank_of(host, local)
    return rank_labels(host, rank, local, RANK_ROLE, job_id)


def during(start: int, end: int | None, value: Callable[[int], object]) -> Callable[[int], object]:
    """`value` from minute `start` until before `end` (None: to the end), nothing outside."""
    return lambda t: value(t) if t >= start and (end is None or t < end) else None


def const(v: int) -> Callable[[int], int]:
    return lambda t: v


def step_at(before: int, after: int, at: int) -> Callable[[int], int]:
    """A count that is `before` until minute `at`, then `after`."""
    return lambda t: before if t < at else after


def pod_path(host: str) -> str:
    return f"/kubepods/burstable/pod-{host}/trainer"


def task_path(host: str, local: int) -> str:
    return f"/slurm/uid_1000/job_7/step_0/task_{local}"


def job_path(job_id: str) -> str:
    """The cgroup of a whole Slurm job (`slurm-41`: job 41) on a host."""
    return f"/slurm/uid_1000/job_{job_id.rsplit('-', 1)[-1]}"


def ranks_info(host: str, ranks: range = range(8), gap: tuple[int, int] | None = None,
               per_rank_cgroups: bool = False, job_id: str | None = None) -> list[Series]:
    """Every rank of the host reports which cgroup it is in (the OOM alert lists them): one
    pod cgroup, with `per_rank_cgroups` one Slurm task cgroup each, with `job_id` the cgroup
    of that Slurm job; `gap`: all ranks gone in [gap) (killed, restarted by the launcher)."""
    def one(t: int) -> int | None:
        return None if gap and gap[0] <= t < gap[1] else 1

    def labels(r: int) -> dict[str, str]:
        path = (job_path(job_id) if job_id else
                task_path(host, r) if per_rank_cgroups else pod_path(host))
        return dict(_rank(host, r, job_id), **{CGROUP_PATH: path})
    return [Series(INFO, labels(r), one) for r in ranks]


def cgroup_labels(host: str, job_id: str | None = None) -> dict[str, str]:
    """The labels of every cgroup alert: the cgroup as Prometheus can name it (with the job
    of the launch where it is known)."""
    labels = {"host_name": host, "job": JOB, "yeto_cluster": CLUSTER}
    if job_id is not None:
        labels[JOB_ID] = job_id
    return labels
