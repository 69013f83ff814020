"""What the scenarios are made of: the labels a rank's (a worker's, a plain process's) series
carry, memory shapes (a sawtooth, a restart, gaps), node gauges, and the labels the rules give
their alerts.

Magnitudes are those of a large trainer host (see generate.py); one value a minute.
"""

from __future__ import annotations

from typing import Callable

from promtool_format import STALE, Series

MiB = 1 << 20
GiB = 1 << 30

CLUSTER = "island-1"
JOB = "yeto/trainer"
ENV = "prod"
WORLD = 16
THRESHOLD = "10MiB"  # yeto:floor_rise_threshold:bytes, as humanize1024 prints it
# yeto.process.role and yeto.dataloader.worker_id as labels, and the role values
# (yeto_otel.otel: ROLE_ATTRIBUTE, WORKER_ID_ATTRIBUTE, Role; tests/collector checks they agree).
ROLE = "yeto_process_role"
WORKER_ID = "yeto_dataloader_worker_id"
RANK_ROLE, PROCESS_ROLE, WORKER_ROLE = "rank", "process", "dataloader_worker"
# yeto.job.id as a label: the launch's job (Slurm, a chosen torchrun run id, YETO_OTEL_JOB_ID),
# beside `job` (the service). Series of a process whose job is not known have none.
JOB_ID = "yeto_job_id"


# --- series ------------------------------------------------------------------------------------
def rank_labels(host: str, rank: int, local_rank: int, role: str | None = None,
                job_id: str | None = None) -> dict[str, str]:
    """The labels the agent's remote write gives a rank's census series; without `role`, as
    versions before the role label wrote them; with `job_id` (yeto.job.id: a Slurm job, a
    chosen run id), as a rank of a known job: `<job>/rank-<R>`."""
    labels = {"deployment_environment_name": ENV, "host_name": host,
              "instance": f"{job_id or host}/rank-{rank}", "job": JOB, "yeto_cluster": CLUSTER,
              "yeto_local_rank": str(local_rank), "yeto_rank": str(rank),
              "yeto_world_size": str(WORLD)}
    if role is not None:
        labels[ROLE] = role
    if job_id is not None:
        labels[JOB_ID] = job_id
    return labels


def worker_labels(host: str, rank: int, local_rank: int, worker: int,
                  loader: int = 0) -> dict[str, str]:
    """A DataLoader worker of a rank: the rank's labels (the same yeto_rank), its own instance
    (`<rank>/worker-K`, `<rank>/loader-L/worker-K` for the rank's second loader on)."""
    labels = rank_labels(host, rank, local_rank, WORKER_ROLE)
    loader_part = f"/loader-{loader}" if loader else ""
    labels["instance"] += f"{loader_part}/worker-{worker}"
    labels[WORKER_ID] = str(worker)
    return labels


def process_labels(host: str, pid: int) -> dict[str, str]:
    """A plain process (no RANK): `<host>/pid-<pid>`, no rank labels."""
    return {"deployment_environment_name": ENV, "host_name": host,
            "instance": f"{host}/pid-{pid}", "job": JOB, "yeto_cluster": CLUSTER,
            ROLE: PROCESS_ROLE}


def sawtooth(trough: int, climb: int, period: int, *, phase: int = 0, leak: int = 0,
             leak_from: int = 0, jitter: tuple[int, ...] = (), step: int = 0,
             step_at: int | None = None, step_over: int = 1) -> Callable[[int], int]:
    """Memory that climbs `climb` bytes a minute for `period` minutes and drops back at a sync.

    `jitter`: added to whole teeth in turn (troughs are flat only to within it). `leak`: bytes
    a minute added from minute `leak_from` on (the troughs rise with it). `step`: a one-time
    rise from minute `step_at`, reached over `step_over` minutes (warm-up, cache fill)."""

    def value(t: int) -> int:
        tooth, k = divmod(t + phase, period)
        v = trough + climb * k + (jitter[tooth % len(jitter)] if jitter else 0)
        v += leak * max(0, t - leak_from)
        if step_at is not None and t >= step_at:
            v += step * min(t - step_at + 1, step_over) // step_over
        return v

    return value


def restart(base: Callable[[int], int], at: int, *, down: int = 0, low: int = 0,
            low_for: int = 2, ramp: int = 5, after: int = 0) -> Callable[[int], int | None]:
    """`base` with a process restart at minute `at`: `down` minutes without samples (the
    process is gone), then `low` bytes for `low_for` minutes, then a `ramp`-minute climb back
    to the sawtooth, which goes on `after` bytes higher (0: where it was)."""

    def value(t: int) -> int | None:
        if t < at:
            return base(t)
        if t < at + down:
            return None
        if t < at + down + low_for:
            return low
        ramp_start = at + down + low_for
        if t < ramp_start + ramp:
            target = base(ramp_start + ramp) + after
            return low + (target - low) * (t - ramp_start + 1) // (ramp + 1)
        return base(t) + after

    return value


def cut(base: Callable[[int], int | None], *, gap: tuple[int, int] | None = None,
        end: int | None = None, stale_at: int | None = None) -> Callable[[int], object]:
    """`base` with missing samples in [gap), none from `end` on, or a staleness marker at
    `stale_at` and nothing after it."""

    def value(t: int) -> object:
        if gap and gap[0] <= t < gap[1]:
            return None
        if end is not None and t >= end:
            return None
        if stale_at is not None and t >= stale_at:
            return STALE if t == stale_at else None
        return base(t)

    return value


# --- alert labels ------------------------------------------------------------------------------
def node_labels(host: str) -> dict[str, str]:
    return {"host_name": host, "yeto_cluster": CLUSTER}


def rank_alert_labels(host: str, rank: int) -> dict[str, str]:
    return {"host_name": host, "instance": f"{host}/rank-{rank}", "job": JOB,
            "yeto_cluster": CLUSTER, "yeto_rank": str(rank)}


def process_alert_labels(host: str, pid: int) -> dict[str, str]:
    return {"host_name": host, "instance": f"{host}/pid-{pid}", "job": JOB,
            "yeto_cluster": CLUSTER}


# --- node gauges -------------------------------------------------------------------------------
ANON = "yeto_node_memory_anon_pages_bytes"
AVAIL = "yeto_node_memory_available_bytes"
FIRST_RANK = {"node-a": 0, "node-b": 8, "node-c": 16, "node-d": 24, "node-e": 32, "node-f": 40}


def node(metric: str, host: str, value) -> Series:
    """A node gauge: exported by one rank of the host (here local rank 0), so it carries that
    rank's labels."""
    return Series(metric, rank_labels(host, FIRST_RANK[host], 0), value)


def node_takeover(metric: str, host: str, value, at: int, *, overlap: int = 0,
                  gap: int = 0) -> list[Series]:
    """A node gauge whose node duty passes from local rank 0 to local rank 1 of the host at
    minute `at`: the same host's numbers under new `instance` / rank labels. The old series just
    stops (remote write sends no staleness marker), `overlap` minutes after the new one starts,
    or `gap` minutes before it."""
    first = FIRST_RANK[host]
    return [Series(metric, rank_labels(host, first, 0),
                   lambda t: value(t) if t < at + overlap else None),
            Series(metric, rank_labels(host, first + 1, 1),
                   lambda t: value(t) if t >= at + gap else None)]
