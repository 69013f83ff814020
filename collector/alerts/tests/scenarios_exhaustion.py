"""YetoNodeMemoryExhaustion and MemAvailable's floor trend: a fast fall fires; a slow fall, a
one-time drop, a sawtooth and a restart do not; a host that stops reporting ends the alert."""

from __future__ import annotations

from promtool_format import Alerts, Case, Expr
from scenario_kit import (AVAIL, CLUSTER, GiB, MiB, cut, node, node_labels, node_takeover,
                          restart, sawtooth)

AVAIL_RULE = "host_name:yeto_node_memory_available_bytes"


def available(start: int, **kw):
    """MemAvailable mirrors the trainer's sawtooth: it falls 1 GiB a minute between syncs
    (every 10 minutes) from `start`; `leak` < 0 makes it fall for good, `step` < 0 once."""
    return sawtooth(start, -GiB, 10, **kw)


def exhaustion_alert(host: str, eta: str, floor: str):
    return (dict(node_labels(host), severity="critical"),
            {"summary": f"{host} runs out of host memory in {eta} at the current trend",
             "description": (
                 f"The floor of MemAvailable (its minimum over 20m) on host {host} (cluster "
                 f"{CLUSTER}) has fallen in each of the last three 20m windows; it is {floor} "
                 f"now and at its trend over the last hour it reaches zero in {eta}, within the "
                 "horizon of 4h 0m 0s."),
             "runbook_url": "docs/alerts.md#yetonodememoryexhaustion"})


def _falls() -> Case:
    # node-a loses 128 MiB/min of MemAvailable from minute 60 (39 GiB floor: zero at ~6h);
    # node-b 16 MiB/min (zero in days); node-c drops 40 GiB once at minute 100 (a big warm-up);
    # node-d is a plain sawtooth; node-e restarts (memory comes back for 5 minutes).
    return Case(
        "fast fall fires, slow fall, one-time drop, sawtooth and restart do not", 300,
        [node(AVAIL, "node-a", available(48 * GiB, leak=-128 * MiB, leak_from=60)),
         node(AVAIL, "node-b", available(200 * GiB, leak=-16 * MiB, leak_from=60)),
         node(AVAIL, "node-c", available(69 * GiB, step=-40 * GiB, step_at=100)),
         node(AVAIL, "node-d", available(120 * GiB)),
         node(AVAIL, "node-e", restart(available(90 * GiB), 150, low=400 * GiB, low_for=5))],
        "YetoNodeMemoryExhaustion",
        # node-a's floor falls in three windows from ~minute 130, but zero is still more than
        # 4h away then; it fires once it is nearer.
        [Alerts(60), Alerts(100), Alerts(140), Alerts(148),
         Alerts(149, [exhaustion_alert("node-a", "3h 47m 2s", "27.88GiB")]),
         Alerts(200, [exhaustion_alert("node-a", "2h 53m 56s", "21.62GiB")]),
         Alerts(300, [exhaustion_alert("node-a", "1h 13m 23s", "9.125GiB")])],
        [Expr(200, f"round({AVAIL_RULE}:seconds_to_exhaustion)",
              [('{host_name="node-a",yeto_cluster="island-1"}', 10436),
               ('{host_name="node-b",yeto_cluster="island-1"}', 729731)]),
         # A deriv of the floor alone would have called the one-time drop an exhaustion:
         Expr(130, f'{AVAIL_RULE}:seconds_to_exhaustion{{host_name="node-c"}} '
                   "< bool scalar(yeto:exhaustion_horizon:seconds)",
              [('{host_name="node-c",yeto_cluster="island-1"}', 1)]),
         Expr(200, f'{AVAIL_RULE}:seconds_to_exhaustion{{host_name="node-d"}}', [])])


def _stops_reporting() -> Case:
    # node-f falls fast and stops reporting at minute 120: the alert stops with it.
    return Case(
        "a falling host that stops reporting: the alert ends", 240,
        [node(AVAIL, "node-f", cut(available(40 * GiB, leak=-192 * MiB), end=120))],
        "YetoNodeMemoryExhaustion",
        [Alerts(69), Alerts(70, [exhaustion_alert("node-f", "1h 36m 36s", "18.06GiB")]),
         Alerts(110, [exhaustion_alert("node-f", "56m 29s", "10.56GiB")]),
         Alerts(125), Alerts(180)])


def _takeover() -> Case:
    # The node duty passes to another rank of the host at minute 201 (node-a: a 3-minute gap,
    # node-d: 3 minutes of overlap): node-a's fast fall keeps firing, with the same numbers as
    # without a takeover; node-d's sawtooth stays silent.
    return Case(
        "node duty passing to another rank: a fast fall keeps firing, a sawtooth stays silent",
        300,
        [*node_takeover(AVAIL, "node-a", available(48 * GiB, leak=-128 * MiB, leak_from=60),
                        201, gap=3),
         *node_takeover(AVAIL, "node-d", available(120 * GiB), 201, overlap=3)],
        "YetoNodeMemoryExhaustion",
        [Alerts(148), Alerts(149, [exhaustion_alert("node-a", "3h 47m 2s", "27.88GiB")]),
         Alerts(200, [exhaustion_alert("node-a", "2h 53m 56s", "21.62GiB")]),
         *(Alerts(t, [exhaustion_alert("node-a", eta, floor)]) for t, eta, floor in (
             (205, "2h 51m 28s", "21.62GiB"), (215, "2h 41m 33s", "20.38GiB"),
             (225, "2h 31m 39s", "19.12GiB"), (240, "2h 13m 43s", "16.62GiB"))),
         Alerts(300, [exhaustion_alert("node-a", "1h 13m 23s", "9.125GiB")])],
        [Expr(300, f'max_over_time({AVAIL_RULE}:floor_rise20m{{host_name="node-d"}}[260m]) '
                   f'- min_over_time({AVAIL_RULE}:floor_rise20m{{host_name="node-d"}}[260m])',
              [('{host_name="node-d",yeto_cluster="island-1"}', 0)])])


def exhaustion_cases() -> list[Case]:
    return [case() for case in (_falls, _stops_reporting, _takeover)]
