"""YetoRankAnonymousLeak and the rank anonymous-memory floors: 8 to 16 ranks' sawtooth, one
leaking rank among steps and restarts, and missing data."""

from __future__ import annotations

from promtool_format import Alerts, Case, Expr, Series, silent_at
from scenario_kit import (CLUSTER, JOB, THRESHOLD, GiB, MiB, cut, rank_alert_labels,
                          rank_labels, restart, sawtooth)

RANK_ANON = "yeto_process_memory_anonymous_bytes"
RANK_RULE = "instance:yeto_process_memory_anonymous_bytes"


def rank(host: str, r: int, value) -> Series:
    return Series(RANK_ANON, rank_labels(host, r, r % 8), value)


def rank_saw(r: int, **kw):
    """A rank's anonymous memory: ~40 GiB, 512 MiB a minute between syncs every 10 minutes
    (4.5 GiB of staging), each rank a little different, sampled up to 2 minutes apart."""
    return sawtooth(40 * GiB + (r % 8) * 64 * MiB, 512 * MiB, 10, phase=r % 3, **kw)


def rank_key(host: str, r: int, metric: str = "") -> str:
    return (metric + "{" + f'host_name="{host}",instance="{host}/rank-{r}",job="{JOB}",'
            f'yeto_cluster="{CLUSTER}",yeto_rank="{r}"' + "}")


def rank_leak_alert(host: str, r: int, rise: str, floor: str):
    return (dict(rank_alert_labels(host, r), severity="warning"),
            {"summary": f"Rank {r} on {host} leaks anonymous memory",
             "description": (
                 f"The floor of rank {r}'s anonymous memory (its minimum over 20m; instance "
                 f"{host}/rank-{r}, job {JOB}) rose by {rise} in the last 20m, and by more than "
                 f"{THRESHOLD} in each of the two 20m windows before. Floor now {floor}."),
             "runbook_url": "docs/alerts.md#yetorankanonymousleak"})


def _sawtooth() -> Case:
    jitters = [(0, 2 * MiB, -1 * MiB, 3 * MiB, -2 * MiB, 1 * MiB, -3 * MiB)[i:] +
               (0, 2 * MiB, -1 * MiB, 3 * MiB, -2 * MiB, 1 * MiB, -3 * MiB)[:i] for i in range(8)]
    return Case(
        "8 ranks' sawtooth for 6 hours: silent", 360,
        [rank("node-a", r, rank_saw(r, jitter=jitters[r])) for r in range(8)],
        "YetoRankAnonymousLeak", silent_at(30, 60, 90, 120, 180, 240, 300, 360),
        [Expr(360, f"max_over_time({RANK_RULE}:floor_rise20m[340m]) "
                   "< bool scalar(yeto:floor_rise_threshold:bytes)",
              [(rank_key("node-a", r), 1) for r in range(8)])])


def _one_rank_leaks() -> Case:
    # 16 ranks on two hosts. Rank 5 leaks 1 MiB/min from minute 120; rank 12 steps up 3 GiB
    # once (pinned staging buffers); rank 9 restarts (gone 2 minutes, back at 300 MiB, climbs
    # back); rank 8, local rank 0 of node-b, restarts without a gap in its samples.
    leak_from = 120

    def series(r):
        host = "node-a" if r < 8 else "node-b"
        if r == 5:
            return rank(host, r, rank_saw(r, leak=MiB, leak_from=leak_from))
        if r == 12:
            return rank(host, r, rank_saw(r, step=3 * GiB, step_at=150))
        if r == 9:
            return rank(host, r, restart(rank_saw(r), 160, down=2, low=300 * MiB))
        if r == 8:
            return rank(host, r, restart(rank_saw(r), 100, low=200 * MiB, low_for=3))
        return rank(host, r, rank_saw(r))

    return Case(
        "one of 16 ranks leaks 1 MiB/min (others: sawtooth, a step, restarts): names that rank",
        300, [series(r) for r in range(16)], "YetoRankAnonymousLeak",
        [Alerts(60), Alerts(leak_from + 20), Alerts(leak_from + 60), Alerts(leak_from + 78),
         Alerts(leak_from + 79, [rank_leak_alert("node-a", 5, "20MiB", "40.38GiB")]),
         Alerts(leak_from + 90, [rank_leak_alert("node-a", 5, "20MiB", "40.39GiB")]),
         Alerts(300, [rank_leak_alert("node-a", 5, "20MiB", "40.48GiB")])],
        [Expr(leak_from + 90, f'{RANK_RULE}:floor_rise20m{{yeto_rank=~"5|8|9|12"}}',
              [(rank_key("node-a", 5, f"{RANK_RULE}:floor_rise20m"), 20 * MiB),
               (rank_key("node-b", 8, f"{RANK_RULE}:floor_rise20m"), 0),
               (rank_key("node-b", 9, f"{RANK_RULE}:floor_rise20m"), 0),
               (rank_key("node-b", 12, f"{RANK_RULE}:floor_rise20m"), 0)]),
         # The restart and the step each raise their rank's floor in one window.
         Expr(170, f'{RANK_RULE}:floor_rise20m{{yeto_rank=~"8|12"}}',
              [(rank_key("node-b", 8, f"{RANK_RULE}:floor_rise20m"), 0),
               (rank_key("node-b", 12, f"{RANK_RULE}:floor_rise20m"), 3 * GiB)])])


def _gaps() -> Case:
    # Missing data on one host: rank 2 has a 15-minute gap; ranks 6 and 7 leak from the start
    # and stop at minute 200 (rank 7 with a staleness marker); rank 3 leaks with a 30-minute gap.
    leak = dict(leak=MiB, leak_from=0)
    return Case(
        "gaps, a series that ends, a staleness marker: not judged from missing data", 360,
        [rank("node-a", 2, cut(rank_saw(2), gap=(120, 135))),
         rank("node-a", 3, cut(rank_saw(3, **leak), gap=(150, 180))),
         rank("node-a", 6, cut(rank_saw(6, **leak), end=200)),
         rank("node-a", 7, cut(rank_saw(7, **leak), stale_at=200))],
        "YetoRankAnonymousLeak",
        [Alerts(60),
         Alerts(145, [rank_leak_alert("node-a", 3, "20MiB", "40.31GiB"),
                      rank_leak_alert("node-a", 6, "20MiB", "40.5GiB"),
                      rank_leak_alert("node-a", 7, "20MiB", "40.56GiB")]),
         Alerts(185, [rank_leak_alert("node-a", 6, "20MiB", "40.54GiB"),
                      rank_leak_alert("node-a", 7, "20MiB", "40.6GiB")]),
         Alerts(201, [rank_leak_alert("node-a", 6, "20MiB", "40.56GiB")]),
         Alerts(205), Alerts(220), Alerts(240),
         Alerts(300, [rank_leak_alert("node-a", 3, "20MiB", "40.46GiB")])],
        [Expr(206, f"{RANK_RULE}:min20m",
              [(rank_key("node-a", 2, f"{RANK_RULE}:min20m"), 40 * GiB + 128 * MiB),
               (rank_key("node-a", 3, f"{RANK_RULE}:min20m"), 40 * GiB + 192 * MiB + 190 * MiB)]),
         Expr(160, f'{RANK_RULE}:min20m{{yeto_rank="3"}}', [])])


def rank_cases() -> list[Case]:
    return [case() for case in (_sawtooth, _one_rank_leaks, _gaps)]
