"""YetoCgroupOOMKill: a kill the observing rank sees, a kill of the observing rank itself (the
rank that takes over reports it), a takeover that finds an old count, a new cgroup whose counts
start again at 0, cgroup v1's failcnt (`max`) climbing at the limit, Slurm's per-rank cgroups,
two jobs of one service on one host."""

from __future__ import annotations

from promtool_format import Alerts, Case, Expr
from scenarios_cgroup_kit import (EVENT, EVENTS, JOB, cgroup_labels, const, during, job_path,
                                  observed, pod_path, ranks_info, step_at, task_path)
from scenario_kit import CLUSTER

RULE = "host_name_job:yeto_cgroup_memory_events_total:max"


def oom_alert(host: str, kills: int, ranks: str | dict[str, str], group_kills: int = 0,
              job_id: str | None = None):
    """The alert; `ranks`: the pod's ranks, or {cgroup path: ranks} for per-rank cgroups;
    `job_id`: the launch's job, named beside the service."""
    job = f"{JOB} ({job_id})" if job_id else JOB
    text = (f"The kernel OOM-killed a process in the memory cgroup of job {job} on host {host} "
            f"(cluster {CLUSTER}) in the last 15m: the cgroup reached its limit with nothing "
            f"left to reclaim. OOM kills in this cgroup: {kills}.")
    if group_kills:
        text += (" Group kills (memory.oom.group: every process of the cgroup): "
                 f"{group_kills}.")
    by_path = ranks if isinstance(ranks, dict) else {pod_path(host): ranks}
    text += "".join(f" Ranks in cgroup {path}: {r}." for path, r in sorted(by_path.items()))
    return (dict(cgroup_labels(host, job_id), severity="critical"),
            {"summary": f"OOM kill in the memory cgroup of {job} on {host}",
             "description": text, "runbook_url": "docs/alerts.md#yetocgroupoomkill"})


def kills(host: str, local: int, value, start: int = 0, end: int | None = None):
    return observed(EVENTS, host, local, during(start, end, value), **{EVENT: "oom_kill"})


def v2_events(host: str, local: int, oom_kill, start: int = 0, end: int | None = None,
              group=const(0)):
    """memory.events of a v2 cgroup: `max` climbs (reclaim at the limit), `oom` with oom_kill."""
    def event(name: str, value):
        return observed(EVENTS, host, local, during(start, end, value), **{EVENT: name})
    return [event("oom_kill", oom_kill), event("oom", oom_kill), event("oom_group_kill", group),
            event("max", lambda t: 120 * t), event("high", const(0)), event("low", const(0))]


A_RANKS, B_RANKS = "0, 1, 2, 3, 4, 5, 6, 7", "8, 9, 10, 11, 12, 13, 14, 15"
C_RANKS = "16, 17, 18, 19, 20, 21, 22, 23"
PER_TASK = {task_path("node-c", 0): "16", task_path("node-c", 1): "17"}


def _seen_by_the_observer() -> Case:
    # node-a: rank 0 reports the pod's cgroup; another rank is OOM-killed at minute 60.
    # node-b: two kills long ago; rank 8 reports until minute 90, rank 9 takes over at 92 and
    # finds the same count: no new kill. Its `max` events climb all along.
    # node-c: a group kill (memory.oom.group=1) at 60 takes 8 processes at once.
    firing_60 = [oom_alert("node-a", 1, A_RANKS), oom_alert("node-c", 8, C_RANKS, 1)]
    return Case(
        "pod cgroup: a kill the observing rank sees fires at once, naming the cgroup and its "
        "ranks; a takeover that finds the old count is silent", 180,
        [*ranks_info("node-a"), *v2_events("node-a", 0, step_at(0, 1, 60)),
         *ranks_info("node-b"), *v2_events("node-b", 0, const(2), end=90),
         *v2_events("node-b", 1, const(2), start=92),
         *ranks_info("node-c"),
         *v2_events("node-c", 2, step_at(0, 8, 60), group=step_at(0, 1, 60))],
        "YetoCgroupOOMKill",
        [Alerts(59), Alerts(60, firing_60), Alerts(74, firing_60), Alerts(75), Alerts(92),
         Alerts(100), Alerts(180)],
        [Expr(100, f'{RULE}{{event="oom_kill"}}',
              [(f'{RULE}{{event="oom_kill",host_name="{h}",job="{JOB}",'
                f'yeto_cluster="{CLUSTER}"}}', n)
               for h, n in (("node-a", 1), ("node-b", 2), ("node-c", 8))])])


def _observer_killed() -> Case:
    # node-a: rank 0 observes and is the process killed at minute 60, before it reports the
    # kill; the launcher restarts the ranks, rank 5 takes the duty and reports 1 from 62.
    # node-b: rank 8 (one kill long ago) exits at 60; rank 9 takes over with the same count.
    # node-c: rank 16 is killed and, restarted after 10 minutes, takes the duty again: 1.
    return Case(
        "the observing rank is the one killed: the rank that takes over (or the same rank, "
        "restarted) reports the kill and it fires; one that finds the old count is silent", 180,
        [*ranks_info("node-a", gap=(60, 62)), kills("node-a", 0, const(0), end=60),
         kills("node-a", 5, const(1), start=62),
         *ranks_info("node-b"), kills("node-b", 0, const(1), end=60),
         kills("node-b", 1, const(1), start=62),
         *ranks_info("node-c", gap=(60, 70)),
         kills("node-c", 0, lambda t: 0 if t < 60 else (None if t < 70 else 1))],
        "YetoCgroupOOMKill",
        [Alerts(59), Alerts(61), Alerts(62, [oom_alert("node-a", 1, A_RANKS)]),
         Alerts(70, [oom_alert("node-a", 1, A_RANKS), oom_alert("node-c", 1, C_RANKS)]),
         Alerts(76, [oom_alert("node-a", 1, A_RANKS), oom_alert("node-c", 1, C_RANKS)]),
         Alerts(77, [oom_alert("node-c", 1, C_RANKS)]),
         Alerts(84, [oom_alert("node-c", 1, C_RANKS)]), Alerts(85), Alerts(180)])


def _new_cgroup() -> Case:
    # A container restart makes a new cgroup: its counts start again at 0. node-a: the same
    # rank reports the new cgroup; node-b: another rank does. Later, a kill in the new cgroup.
    return Case(
        "a new cgroup after a container restart starts its counts at 0: silent; a kill in it "
        "fires", 180,
        [*ranks_info("node-a", gap=(60, 62)),
         kills("node-a", 0, lambda t: 3 if t < 60 else (None if t < 62 else int(t >= 120))),
         *ranks_info("node-b", gap=(60, 62)), kills("node-b", 0, const(3), end=60),
         kills("node-b", 3, step_at(0, 1, 130), start=62)],
        "YetoCgroupOOMKill",
        [Alerts(60), Alerts(62), Alerts(70), Alerts(119),
         Alerts(120, [oom_alert("node-a", 1, A_RANKS)]),
         Alerts(130, [oom_alert("node-a", 1, A_RANKS), oom_alert("node-b", 1, B_RANKS)]),
         Alerts(135, [oom_alert("node-b", 1, B_RANKS)]), Alerts(145)])


def _v1_and_per_rank() -> Case:
    # node-a, cgroup v1: page cache is reclaimed at the limit all along, so memory.failcnt
    # (`max`) climbs by thousands a minute; no process is killed. node-b, v1: a kill at 90.
    # node-c, Slurm: ranks 16 and 17 each have their own cgroup; 16's holds a kill from long
    # ago, 17's gets one at 100 (and stays below 16's count).
    def failcnt(host: str, local: int):
        return observed(EVENTS, host, local, lambda t: 4000 * t, **{EVENT: "max"})
    return Case(
        "cgroup v1: failcnt (`max`) climbing at the limit is silent, its oom_kill fires; "
        "per-rank cgroups on one host: each one's kill fires", 180,
        [*ranks_info("node-a"), failcnt("node-a", 0), kills("node-a", 0, const(0)),
         *ranks_info("node-b"), failcnt("node-b", 0), kills("node-b", 0, step_at(0, 1, 90)),
         *ranks_info("node-c", range(2), per_rank_cgroups=True), kills("node-c", 0, const(1)),
         kills("node-c", 1, step_at(0, 1, 100))],
        "YetoCgroupOOMKill",
        [Alerts(60), Alerts(89), Alerts(90, [oom_alert("node-b", 1, B_RANKS)]),
         Alerts(100, [oom_alert("node-b", 1, B_RANKS), oom_alert("node-c", 1, PER_TASK)]),
         Alerts(105, [oom_alert("node-c", 1, PER_TASK)]), Alerts(115), Alerts(180)])


def _two_jobs_on_one_host() -> Case:
    # node-e runs two Slurm jobs of one service (the same `job` label), ranks 0-3 each, each in
    # its own job cgroup: slurm-41's holds two kills from long ago, slurm-42's gets one at 60.
    # Only slurm-42's cgroup fires, naming its own ranks; without the job id the two would be
    # one cgroup (the old kills hiding the new one's count, both jobs' ranks listed).
    old, new = "slurm-41", "slurm-42"

    def job_kills(job_id: str, value):
        return observed(EVENTS, "node-e", 0, value, job_id, **{EVENT: "oom_kill"})
    firing = [oom_alert("node-e", 1, {job_path(new): "0, 1, 2, 3"}, job_id=new)]
    return Case(
        "two jobs of one service on one host: a kill in one job's cgroup fires for that job "
        "alone, naming its ranks", 120,
        [*ranks_info("node-e", range(4), job_id=old), job_kills(old, const(2)),
         *ranks_info("node-e", range(4), job_id=new), job_kills(new, step_at(0, 1, 60))],
        "YetoCgroupOOMKill",
        [Alerts(59), Alerts(60, firing), Alerts(74, firing), Alerts(75), Alerts(120)],
        [Expr(100, f'{RULE}{{event="oom_kill",host_name="node-e"}}',
              [(f'{RULE}{{event="oom_kill",host_name="node-e",job="{JOB}",'
                f'yeto_cluster="{CLUSTER}",yeto_job_id="{j}"}}', n)
               for j, n in ((old, 2), (new, 1))])])


def oom_cases() -> list[Case]:
    return [_seen_by_the_observer(), _observer_killed(), _new_cgroup(), _v1_and_per_rank(),
            _two_jobs_on_one_host()]
