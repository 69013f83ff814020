"""YetoCgroupMemoryHeadroom and YetoCgroupMemoryPressure: page cache filling a cgroup to its
limit, an unlimited cgroup, a steady sawtooth close to the limit, a leak and a step towards it,
a restart, a takeover by another rank; stalls and the pressure counter's restarts."""

from __future__ import annotations

from promtool_format import Alerts, Case, Expr
from scenarios_cgroup_kit import (ANON, CGROUP_LIMIT, FILE, HEADROOM, JOB, LEVEL, LIMIT,
                                  PRESSURE, PRESSURE_THRESHOLD, SHMEM, USAGE, cgroup_labels,
                                  const, during, observed)
from scenario_kit import CLUSTER, GiB, MiB, restart, sawtooth

RATIO_RULE = "host_name_job:yeto_cgroup_memory_unreclaimable:ratio_max20m"
RISE_RULE = "host_name_job:yeto_cgroup_memory_unreclaimable_bytes:peak_rise1h"
STALL_RULE = "host_name_job:yeto_cgroup_memory_pressure_seconds:rate10m"


def headroom_alert(host: str, peak: str, rise: str):
    return (dict(cgroup_labels(host), severity="warning"),
            {"summary": f"The memory cgroup of {JOB} on {host} nears its limit: {peak} of it "
                        "cannot be reclaimed",
             "description": (
                 f"The non-reclaimable memory (anon + shmem) of the memory cgroup of job {JOB} "
                 f"on host {host} (cluster {CLUSTER}) peaked at {peak} of the cgroup's limit in "
                 f"the last 20m, above the threshold of {HEADROOM}, and its peaks keep rising "
                 f"({rise} higher than an hour ago). At the limit the kernel OOM-kills a rank "
                 "of the cgroup."),
             "runbook_url": "docs/alerts.md#yetocgroupmemoryheadroom"})


def cgroup(host: str, local: int, anon, shmem: int | None = 16 * GiB, file=const(40 * GiB),
           limit: int | None = CGROUP_LIMIT, start: int = 0, end: int | None = None):
    """The series one rank reports for its cgroup from `start` until before `end`: anon (a
    function of the minute, None while nobody reports), shmem, file, usage (their sum, capped
    at the limit: the kernel reclaims page cache there) and the limit (None: unlimited; no
    shmem series for shmem=None, as where memory.stat lacks it)."""
    def usage(t: int) -> int:
        total = anon(t) + (shmem or 0) + file(t)
        return min(total, limit) if limit else total

    def series(metric: str, value):
        # No anonymous value: no process reports (a restart), so no series has a sample.
        reported = during(start, end, value)
        return observed(metric, host, local,
                        lambda t: None if anon(t) is None else reported(t))
    found = [series(ANON, anon), series(FILE, file), series(USAGE, usage)]
    found += [series(SHMEM, const(shmem))] if shmem is not None else []
    return found + ([series(LIMIT, const(limit))] if limit else [])


def _silent() -> Case:
    # node-a: anonymous memory far below the limit; page cache (a dataset read through the
    # cache, mapped anchors) grows 2 GiB a minute until usage reaches the limit at minute ~140,
    # then sits there, reclaimed as the job reads on. node-b: no limit, anonymous memory
    # leaking. node-c: a steady sawtooth whose peaks are at 95 % of the limit, reported by rank
    # 16 and, from minute 122 on, by rank 17 (rank 16 exited at 120).
    def page_cache(t: int) -> int:
        return min(20 * GiB + 2 * GiB * t, 400 * GiB)
    near = sawtooth(420 * GiB, GiB, 10)
    return Case(
        "page cache at the limit, an unlimited cgroup, a steady sawtooth at 95 % of the limit "
        "(and a takeover): silent", 300,
        [*cgroup("node-a", 0, sawtooth(160 * GiB, 2 * GiB, 10), file=page_cache),
         *cgroup("node-b", 0, sawtooth(300 * GiB, GiB, 10, leak=64 * MiB), limit=None),
         *cgroup("node-c", 0, near, shmem=27 * GiB, end=120),
         *cgroup("node-c", 1, near, shmem=27 * GiB, start=122),
         *cgroup("node-d", 0, const(100 * GiB), shmem=None)],
        "YetoCgroupMemoryHeadroom", [Alerts(t) for t in (60, 120, 125, 130, 180, 240, 300)],
        [Expr(300, RATIO_RULE,
              [(f'{RATIO_RULE}{{host_name="{h}",job="{JOB}",yeto_cluster="{CLUSTER}"}}', v)
               for h, v in (("node-a", (178 + 16) / 480), ("node-c", 0.95),
                            ("node-d", 100 / 480))]),
         # The unlimited cgroup's peaks rise, but it has no ratio to judge.
         Expr(300, f'{RISE_RULE}{{host_name=~"node-a|node-c"}} '
                   "> scalar(yeto:floor_rise_threshold:bytes)", []),
         Expr(300, 'instance:yeto_cgroup_memory_unreclaimable:ratio{host_name="node-b"}', []),
         # No shmem series: anon alone; the rank that took over reports node-c's cgroup.
         Expr(300, 'instance:yeto_cgroup_memory_unreclaimable_bytes:sum{host_name=~"node-c|node-d"}',
              [('instance:yeto_cgroup_memory_unreclaimable_bytes:sum{host_name="node-c",'
                'instance="node-c/rank-17",job="yeto/trainer",yeto_cluster="island-1",'
                'yeto_rank="17"}', 420 * GiB + 27 * GiB),
               ('instance:yeto_cgroup_memory_unreclaimable_bytes:sum{host_name="node-d",'
                'instance="node-d/rank-24",job="yeto/trainer",yeto_cluster="island-1",'
                'yeto_rank="24"}', 100 * GiB)])])


def _rising() -> Case:
    # node-a: a sawtooth peaking at 88.5 % of the limit; from minute 60 its troughs and peaks
    # rise 128 MiB a minute (a leak). node-b: a step of 60 GiB at minute 100, from 80 % to 93 %.
    leak = sawtooth(400 * GiB, GiB, 10, leak=128 * MiB, leak_from=60)
    step = sawtooth(360 * GiB, GiB, 10, step=60 * GiB, step_at=100)
    b = headroom_alert("node-b", "92.71%", "60GiB")
    return Case(
        "a leak and a step into the last 10 % of the limit: fires, naming the cgroup", 240,
        [*cgroup("node-a", 0, leak), *cgroup("node-b", 3, step)],
        "YetoCgroupMemoryHeadroom",
        # The step: pending from minute 100, firing from 110 for an hour (its peaks are higher
        # than an hour ago until 160). The leak: its peaks pass 90 % at the tooth of minute 119
        # (59 minutes of 128 MiB), firing from 129 on, 7.5 GiB higher every hour.
        [Alerts(60), Alerts(100), Alerts(109), Alerts(110, [b]), Alerts(128, [b]),
         Alerts(129, [headroom_alert("node-a", "90.34%", "7.5GiB"), b]),
         Alerts(159, [headroom_alert("node-a", "91.12%", "7.5GiB"), b]),
         Alerts(160, [headroom_alert("node-a", "91.12%", "7.5GiB"),
                      headroom_alert("node-b", "92.71%", "9GiB")]),
         Alerts(170, [headroom_alert("node-a", "91.38%", "7.5GiB")]),
         Alerts(240, [headroom_alert("node-a", "93.2%", "7.5GiB")])],
        [Expr(129, RATIO_RULE, [(f'{RATIO_RULE}{{host_name="{h}",job="{JOB}",'
                                 f'yeto_cluster="{CLUSTER}"}}', v)
                                for h, v in (("node-a", (425 + 69 / 8) / 480),
                                             ("node-b", 445 / 480))])])


def _restart() -> Case:
    # node-a: a steady sawtooth peaking at 93 % of the limit; all ranks restart at minute 120
    # (3 minutes without a report, then 2 GiB, then back). node-b: a step far below the limit.
    near = sawtooth(421 * GiB, GiB, 10)
    return Case(
        "a restart of a cgroup close to its limit, a step far below it: silent", 300,
        [*cgroup("node-a", 0, restart(near, 120, down=3, low=2 * GiB), shmem=10 * GiB),
         *cgroup("node-b", 0, sawtooth(200 * GiB, GiB, 10, step=40 * GiB, step_at=100))],
        "YetoCgroupMemoryHeadroom",
        [Alerts(t) for t in (110, 121, 125, 130, 140, 150, 160, 180, 200, 240, 300)])


def headroom_cases() -> list[Case]:
    return [_silent(), _rising(), _restart()]


# --- pressure ----------------------------------------------------------------------------------
def pressure_alert(host: str, share: str):
    return (dict(cgroup_labels(host), level="full", severity="warning"),
            {"summary": f"The memory cgroup of {JOB} on {host} stalls on memory {share} of the "
                        "time",
             "description": (
                 f"Every task of the memory cgroup of job {JOB} on host {host} (cluster "
                 f"{CLUSTER}) was stalled waiting for memory {share} of the time over the last "
                 f"10m (pressure `full`), above the threshold of {PRESSURE_THRESHOLD}, for 10m: "
                 "the ranks lose that share of their step time to reclaim."),
             "runbook_url": "docs/alerts.md#yetocgroupmemorypressure"})


def stalls(host: str, local: int, some, full, start: int = 0, end: int | None = None):
    """memory.pressure's `total` of both levels, in seconds, as one rank reports them."""
    return [observed(PRESSURE, host, local, during(start, end, some), **{LEVEL: "some"}),
            observed(PRESSURE, host, local, during(start, end, full), **{LEVEL: "full"})]


def _pressure() -> Case:
    # node-a: from minute 30 every task stalls 18 s a minute (30 %). node-b: some task stalls
    # half the time, all of them 3 s a minute (5 %). node-c: the counters start again at 0 in a
    # new cgroup at minute 62. node-d: rank 24 exits at 60 and rank 25 takes over, the
    # cgroup's counters going on from where they were.
    def ramp(rate: float, since: int = 0, base: int = 0):
        return lambda t: base + int(rate * max(0, t - since))
    return Case(
        "full stalls 30 % of the time fire; `some` stalls, 5 %, the counters' restarts and a "
        "takeover do not", 120,
        [*stalls("node-a", 0, ramp(30, 30), ramp(18, 30)),
         *stalls("node-b", 0, ramp(30), ramp(3)),
         *stalls("node-c", 0, ramp(2, 0, 90000), ramp(1, 0, 50000), end=60),
         *stalls("node-c", 0, ramp(2), ramp(1), start=62),
         *stalls("node-d", 0, ramp(2, 0, 90000), ramp(1, 0, 50000), end=60),
         *stalls("node-d", 1, ramp(2, 0, 90000), ramp(1, 0, 50000), start=61)],
        "YetoCgroupMemoryPressure",
        [Alerts(30), Alerts(40), Alerts(50, [pressure_alert("node-a", "30%")]),
         Alerts(61, [pressure_alert("node-a", "30%")]),
         Alerts(65, [pressure_alert("node-a", "30%")]),
         Alerts(120, [pressure_alert("node-a", "30%")])],
        # The alert's input per cgroup and level: the takeover and the new cgroup read as 1 s
        # (some: 2 s) a minute, not as the old counters' totals.
        [Expr(90, f'round({STALL_RULE}{{{LEVEL}="full"}} * 60)',  # seconds a minute
              [(f'{{host_name="{h}",job="{JOB}",{LEVEL}="full",yeto_cluster="{CLUSTER}"}}', v)
               for h, v in (("node-a", 18), ("node-b", 3), ("node-c", 1), ("node-d", 1))])])


def pressure_cases() -> list[Case]:
    return [_pressure()]
