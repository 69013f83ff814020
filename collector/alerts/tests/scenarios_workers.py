"""YetoRankAnonymousLeak and the rank floors beside DataLoader workers: workers carry their
rank's yeto_rank but are never judged as ranks, whatever their memory does (a persistent worker
that grows for hours, workers that are new processes every epoch, a second loader's workers);
the ranks' own leak fires as before, for ranks with the role label and ranks without it (older
versions), and for a plain process."""

from __future__ import annotations

from typing import Callable

from promtool_format import Alerts, Case, Expr, Series
from scenario_kit import (CLUSTER, JOB, THRESHOLD, RANK_ROLE, GiB, MiB, process_alert_labels,
                          process_labels, rank_labels, worker_labels)
from scenarios_rank import RANK_ANON, RANK_RULE, rank_key, rank_leak_alert, rank_saw

PID = 4242  # the plain process: <host>/pid-4242
LEAK_FROM = 120


def epochs(start: int, climb: int, epoch: int, *, down: int = 2) -> Callable[[int], int | None]:
    """A worker of a loader without persistent_workers: a new process every `epoch` minutes
    (the old one gone `down` minutes first), starting at `start` and growing `climb` bytes a
    minute while it iterates (copy-on-read of the dataset's objects)."""

    def value(t: int) -> int | None:
        k = t % epoch
        return None if k < down else start + climb * (k - down)

    return value


def rising(start: int, climb: int) -> Callable[[int], int]:
    return lambda t: start + climb * t


def process_leak_alert(host: str, pid: int, rise: str, floor: str):
    return (dict(process_alert_labels(host, pid), severity="warning"),
            {"summary": f"Process {host}/pid-{pid} on {host} leaks anonymous memory",
             "description": (
                 "The floor of the process's anonymous memory (its minimum over 20m; instance "
                 f"{host}/pid-{pid}, job {JOB}) rose by {rise} in the last 20m, and by more "
                 f"than {THRESHOLD} in each of the two 20m windows before. Floor now {floor}."),
             "runbook_url": "docs/alerts.md#yetorankanonymousleak"})


def _series() -> list[Series]:
    host = "node-a"

    def rank(r: int, value, role: str | None = RANK_ROLE) -> Series:
        return Series(RANK_ANON, rank_labels(host, r, r, role), value)

    def worker(r: int, k: int, value, loader: int = 0) -> Series:
        return Series(RANK_ANON, worker_labels(host, r, r, k, loader), value)

    leak = dict(leak=MiB, leak_from=LEAK_FROM)
    return [
        # Rank 3 (role label) has a flat sawtooth; its workers look like leaks: worker 0
        # (persistent) grows 2 MiB/min for five hours, worker 1 is a new process every 45
        # minutes that grows 4 MiB/min while it lives; both start from the rank's pages.
        rank(3, rank_saw(3)),
        worker(3, 0, rising(40 * GiB, 2 * MiB)),
        worker(3, 1, epochs(40 * GiB, 4 * MiB, 45)),
        # Rank 5 (role label) leaks 1 MiB/min from minute 120; its second loader's worker 0
        # grows 2 MiB/min, and its first loader's worker 0 is far below the rank.
        rank(5, rank_saw(5, **leak)),
        worker(5, 0, rising(2 * GiB, 0)),
        worker(5, 0, rising(40 * GiB, 2 * MiB), loader=1),
        # Rank 2 is an older version (no role label): its leak fires as before.
        rank(2, rank_saw(2, **leak), role=None),
        # A plain process (no RANK) on the same host leaks too.
        Series(RANK_ANON, process_labels(host, PID),
               lambda t: 8 * GiB + MiB * max(0, t - LEAK_FROM)),
    ]


def _workers_beside_ranks() -> Case:
    def floor_of(r: int, metric: str) -> str:
        return rank_key("node-a", r, f"{RANK_RULE}:{metric}")

    def firing(floor5: str, floor2: str, floor_process: str):
        return [rank_leak_alert("node-a", 2, "20MiB", floor2),
                rank_leak_alert("node-a", 5, "20MiB", floor5),
                process_leak_alert("node-a", PID, "20MiB", floor_process)]

    process_key = (f'{{host_name="node-a",instance="node-a/pid-{PID}",job="{JOB}",'
                   f'yeto_cluster="{CLUSTER}"}}')
    return Case(
        "DataLoader workers with their rank's yeto_rank grow for hours: never judged as the "
        "rank; the ranks' (with and without the role label) and a process's leaks fire",
        300, _series(), "YetoRankAnonymousLeak",
        [Alerts(60), Alerts(100), Alerts(LEAK_FROM + 60), Alerts(LEAK_FROM + 78),
         Alerts(LEAK_FROM + 90, firing("40.39GiB", "40.2GiB", "8.068GiB")),
         Alerts(300, firing("40.48GiB", "40.29GiB", "8.156GiB"))],
        [# One floor per rank or process, none for a worker: rank 3's floor is its own trough.
         Expr(200, f'{RANK_RULE}:min20m{{yeto_rank="3"}}',
              [(floor_of(3, "min20m"), 40 * GiB + 192 * MiB)]),
         Expr(200, f'{RANK_RULE}:floor_rise20m{{yeto_rank=~"3|5"}}',
              [(floor_of(3, "floor_rise20m"), 0), (floor_of(5, "floor_rise20m"), 20 * MiB)]),
         Expr(200, f'count({RANK_RULE}:min20m{{instance=~".+/worker-.+"}}) or vector(0)',
              [("{}", 0)]),
         Expr(200, f"count({RANK_RULE}:min20m)", [("{}", 4)]),
         Expr(200, f"{RANK_RULE}:floor_rise20m{{yeto_rank=\"\"}}",
              [(f"{RANK_RULE}:floor_rise20m{process_key}", 20 * MiB)])])


def worker_cases() -> list[Case]:
    return [_workers_beside_ranks()]
