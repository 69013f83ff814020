"""YetoNodeAnonPagesLeak and the node AnonPages floors: a sawtooth, a leak under it, one-time
steps, restarts and missing data, on up to four hosts."""

from __future__ import annotations

from promtool_format import Alerts, Case, Expr, silent_at
from scenario_kit import (ANON, AVAIL, CLUSTER, THRESHOLD, GiB, MiB, cut, node, node_labels,
                          node_takeover, restart, sawtooth)

NODE_RULE = "host_name:yeto_node_memory_anon_pages_bytes"


def node_leak_alert(host: str, rise: str, floor: str, available: str | None = None):
    text = (f"The floor of AnonPages (its minimum over 20m) on host {host} (cluster {CLUSTER}) "
            f"rose by {rise} in the last 20m, and by more than {THRESHOLD} in each of the two "
            "20m windows before: the troughs between steps keep rising. "
            f"Floor now {floor}.")
    if available is not None:
        text += f" MemAvailable floor {available}."
    return (dict(node_labels(host), severity="warning"),
            {"summary": f"Anonymous memory on {host} keeps growing (leak, not a sawtooth)",
             "description": text,
             "runbook_url": "docs/alerts.md#yetonodeanonpagesleak"})


# A sync every 10 minutes: ~1 GiB a minute of anonymous memory (activations, staging buffers)
# on top of a 400 GiB trough, released at the sync.
def node_a_saw(**kw):
    return sawtooth(400 * GiB, GiB, 10, **kw)


def node_b_saw(**kw):  # 6-minute period, other phase and amplitude
    return sawtooth(380 * GiB, 768 * MiB, 6, phase=2, **kw)


def _sawtooth() -> Case:
    # 6 hours of a sawtooth whose troughs wander by a few MiB: never a leak.
    jitter = (0, 3 * MiB, -2 * MiB, 1 * MiB, -3 * MiB, 2 * MiB, 0, -1 * MiB)
    return Case(
        "sawtooth for 6 hours: silent", 360,
        [node(ANON, "node-a", node_a_saw(jitter=jitter)),
         node(ANON, "node-b", node_b_saw(jitter=tuple(reversed(jitter))))],
        "YetoNodeAnonPagesLeak", silent_at(30, 60, 90, 120, 180, 240, 300, 360),
        [Expr(360, f"max_over_time({NODE_RULE}:floor_rise20m[340m]) "
                   "< bool scalar(yeto:floor_rise_threshold:bytes)",
              [('{host_name="node-a",yeto_cluster="island-1"}', 1),
               ('{host_name="node-b",yeto_cluster="island-1"}', 1)]),
         Expr(360, f"{NODE_RULE}:min20m",
              [(f'{NODE_RULE}:min20m{{host_name="node-a",yeto_cluster="island-1"}}',
                400 * GiB - 3 * MiB),
               (f'{NODE_RULE}:min20m{{host_name="node-b",yeto_cluster="island-1"}}',
                380 * GiB - 3 * MiB)])])


def _leak() -> Case:
    # A leak of 1 MiB/min on the troughs of node-a from minute 120 on; node-b goes on with its
    # sawtooth and node-c steps up once: only node-a may fire, and it names node-a.
    leak_from = 120

    def a_available(t: int) -> int:  # what node-a's anonymous memory takes from 600 GiB
        return 600 * GiB - (node_a_saw(leak=MiB, leak_from=leak_from)(t) - 400 * GiB)
    return Case(
        "leak of 1 MiB/min under a sawtooth, beside a sawtooth and a step: "
        "fires for that host only",
        300,
        [node(ANON, "node-a", node_a_saw(leak=MiB, leak_from=leak_from)),
         node(AVAIL, "node-a", a_available),
         node(ANON, "node-b", node_b_saw()),
         node(ANON, "node-c", sawtooth(410 * GiB, GiB, 8, step=6 * GiB, step_at=150))],
        "YetoNodeAnonPagesLeak",
        # Nothing before the leak, nothing while one or two windows show it (the floor lags
        # the troughs by a window; three rising windows and `for` take 60m more), then firing
        # within 90 minutes of the leak's start.
        [Alerts(60), Alerts(leak_from + 20), Alerts(leak_from + 60), Alerts(leak_from + 80),
         Alerts(leak_from + 81, [node_leak_alert("node-a", "20MiB", "400.1GiB", "590.9GiB")]),
         Alerts(leak_from + 90, [node_leak_alert("node-a", "20MiB", "400.1GiB", "590.9GiB")]),
         Alerts(300, [node_leak_alert("node-a", "20MiB", "400.2GiB", "590.8GiB")])],
        [Expr(leak_from + 90, f"{NODE_RULE}:floor_rise20m",
              [(f'{NODE_RULE}:floor_rise20m{{host_name="node-a",yeto_cluster="island-1"}}',
                20 * MiB),
               (f'{NODE_RULE}:floor_rise20m{{host_name="node-b",yeto_cluster="island-1"}}', 0),
               (f'{NODE_RULE}:floor_rise20m{{host_name="node-c",yeto_cluster="island-1"}}', 0)])])


def _steps() -> Case:
    # One-time steps: node-a jumps 6 GiB at once (cache fill), node-b climbs 8 GiB over 10
    # minutes, node-c 12 GiB over 25 minutes (warm-ups). The floor rises by the step in one
    # window, or two for the slow warm-up: never three in a row.
    return Case(
        "one-time step up (at once, over 10 or 25 minutes): silent", 360,
        [node(ANON, "node-a", node_a_saw(step=6 * GiB, step_at=120)),
         node(ANON, "node-b", node_b_saw(step=8 * GiB, step_at=120, step_over=10)),
         node(ANON, "node-c", sawtooth(410 * GiB, GiB, 8, step=12 * GiB, step_at=100,
                                       step_over=25))],
        "YetoNodeAnonPagesLeak", silent_at(125, 140, 150, 160, 170, 180, 200, 240, 300, 360),
        # What a single-window rule (or a deriv of the floor) would have fired on, and the
        # slow warm-up's floor rising in two windows in a row:
        [Expr(150, f'{NODE_RULE}:floor_rise20m{{host_name=~"node-a|node-b"}}',
              [(f'{NODE_RULE}:floor_rise20m{{host_name="node-a",yeto_cluster="island-1"}}',
                6 * GiB),
               (f'{NODE_RULE}:floor_rise20m{{host_name="node-b",yeto_cluster="island-1"}}',
                8 * GiB)]),
         Expr(150, f'count({NODE_RULE}:floor_rise20m{{host_name="node-c"}} '
                   "> scalar(yeto:floor_rise_threshold:bytes) "
                   f'and {NODE_RULE}:floor_rise20m{{host_name="node-c"}} offset 20m '
                   "> scalar(yeto:floor_rise_threshold:bytes))",
              [("{}", 1)])])


def _restarts() -> Case:
    # Restarts: node-a's ranks are gone for 3 minutes (no samples, rank 0 included), node-b's
    # drop to 2 GiB at once; both climb back. node-c comes back 2 GiB higher (a new layout).
    return Case(
        "restart (drop, then the sawtooth again): silent", 300,
        [node(ANON, "node-a", restart(node_a_saw(), 120, down=3, low=2 * GiB)),
         node(ANON, "node-b", restart(node_b_saw(), 120, low=2 * GiB, low_for=3)),
         node(ANON, "node-c", restart(sawtooth(410 * GiB, GiB, 8), 150, down=2, low=3 * GiB,
                                      after=2 * GiB))],
        "YetoNodeAnonPagesLeak", silent_at(121, 125, 130, 140, 150, 160, 170, 180, 190, 200,
                                             210, 220, 240, 300))


def _gaps() -> Case:
    # Missing data. node-a: a 15-minute gap in a sawtooth. node-b: a leaking host that stops
    # reporting at minute 200; node-c: the same, ended by a staleness marker; node-d: a leaking
    # host with a 30-minute gap. A series that stops must stop the alert, and the windows
    # around a gap must not be judged as if it were data.
    leak = dict(leak=MiB, leak_from=0)
    return Case(
        "gaps, a series that ends, a staleness marker: not judged from missing data", 360,
        [node(ANON, "node-a", cut(node_a_saw(), gap=(120, 135))),
         node(ANON, "node-b", cut(node_a_saw(**leak), end=200)),
         node(ANON, "node-c", cut(node_b_saw(**leak), stale_at=200)),
         node(ANON, "node-d", cut(node_a_saw(**leak), gap=(150, 180)))],
        "YetoNodeAnonPagesLeak",
        [Alerts(60),
         Alerts(145, [node_leak_alert(h, r, f, None) for h, r, f in
                      (("node-b", "20MiB", "400.1GiB"), ("node-c", "24MiB", "380.1GiB"),
                       ("node-d", "20MiB", "400.1GiB"))]),
         # node-d is in its gap: silent; the gap is not judged after it either.
         Alerts(185, [node_leak_alert("node-b", "20MiB", "400.2GiB", None),
                      node_leak_alert("node-c", "18MiB", "380.2GiB", None)]),
         Alerts(199, [node_leak_alert("node-b", "20MiB", "400.2GiB", None),
                      node_leak_alert("node-c", "24MiB", "380.2GiB", None)]),
         # node-c's staleness marker ends it at once, node-b's last sample counts for 5m.
         Alerts(201, [node_leak_alert("node-b", "20MiB", "400.2GiB", None)]),
         Alerts(205), Alerts(220), Alerts(240),
         Alerts(300, [node_leak_alert("node-d", "20MiB", "400.3GiB", None)])],
        [Expr(206, f"{NODE_RULE}:min20m",
              [(f'{NODE_RULE}:min20m{{host_name="node-a",yeto_cluster="island-1"}}', 400 * GiB),
               (f'{NODE_RULE}:min20m{{host_name="node-d",yeto_cluster="island-1"}}',
                400 * GiB + 190 * MiB)]),
         Expr(160, f"{NODE_RULE}:min20m{{host_name=\"node-d\"}}", [])])


def _takeover_floors(at: int) -> list[Expr]:
    """The floors stay within the threshold of flat from minute 40 (the first floors start
    mid-tooth) through every takeover up to `at`: the floor is the host's, not the new
    reporting rank's short history."""
    hosts = ("node-a", "node-b", "node-c")
    return [Expr(at, f"max_over_time({NODE_RULE}:floor_rise20m[{at - 40}m]) "
                     "< bool scalar(yeto:floor_rise_threshold:bytes)",
                 [(f'{{host_name="{h}",yeto_cluster="island-1"}}', 1) for h in hosts]),
            Expr(at, f"min_over_time({NODE_RULE}:floor_rise20m[{at - 40}m]) "
                     "> bool -scalar(yeto:floor_rise_threshold:bytes)",
                 [(f'{{host_name="{h}",yeto_cluster="island-1"}}', 1) for h in hosts])]


def _takeovers() -> Case:
    # The node duty passes to another rank of the host (the holder exited): the series' rank
    # labels change, the old series lingers 5 minutes (no staleness marker). node-a: at once,
    # a minute after a trough (the new rank's own history holds no trough for 9 minutes);
    # node-b: 3 minutes of overlap; node-c: 3 minutes without a sample in between.
    return Case(
        "sawtooth whose node duty passes to another rank (at once, overlap, gap): silent", 300,
        [*node_takeover(ANON, "node-a", node_a_saw(), 121),
         *node_takeover(ANON, "node-b", node_b_saw(), 151, overlap=3),
         *node_takeover(ANON, "node-c", sawtooth(410 * GiB, GiB, 8), 177, gap=3)],
        "YetoNodeAnonPagesLeak", silent_at(60, 121, 125, 130, 140, 150, 155, 160, 170, 180,
                                             185, 190, 200, 220, 240, 300),
        [*_takeover_floors(300),
         Expr(125, f'{NODE_RULE}:min20m{{host_name="node-a"}}',
              [(f'{NODE_RULE}:min20m{{host_name="node-a",yeto_cluster="island-1"}}',
                400 * GiB)]),
         Expr(183, f'{NODE_RULE}:min20m{{host_name="node-c"}}',
              [(f'{NODE_RULE}:min20m{{host_name="node-c",yeto_cluster="island-1"}}',
                410 * GiB)])])


def _leak_takeover() -> Case:
    # A leak of 1 MiB/min from minute 60 on three hosts; at minute 201, while the alert fires,
    # the node duty passes to another rank (node-a at once, node-b with 3 minutes of overlap,
    # node-d with a 3-minute gap): the alert goes on firing through it.
    leak = dict(leak=MiB, leak_from=60)
    leaking = ("node-a", "node-b", "node-d")
    return Case(
        "leak under a sawtooth, node duty passing to another rank mid-run: keeps firing", 300,
        [*node_takeover(ANON, "node-a", node_a_saw(**leak), 201),
         *node_takeover(ANON, "node-b", node_b_saw(**leak), 201, overlap=3),
         *node_takeover(ANON, "node-d", node_a_saw(**leak), 201, gap=3)],
        "YetoNodeAnonPagesLeak",
        # node-b's 6-minute teeth make its window's rise 18 or 24 MiB by turns.
        [Alerts(t, [node_leak_alert(h, rise_b if h == "node-b" else "20MiB", floor(h), None)
                    for h in leaking])
         for t, rise_b, floor in (
             (150, "18MiB", lambda h: "400.1GiB" if h != "node-b" else "380.1GiB"),
             (200, "24MiB", lambda h: "400.1GiB" if h != "node-b" else "380.1GiB"),
             (205, "24MiB", lambda h: "400.1GiB" if h != "node-b" else "380.1GiB"),
             (225, "18MiB", lambda h: "400.1GiB" if h != "node-b" else "380.1GiB"),
             (240, "18MiB", lambda h: "400.2GiB" if h != "node-b" else "380.2GiB"),
             (250, "18MiB", lambda h: "400.2GiB" if h != "node-b" else "380.2GiB"),
             (300, "18MiB", lambda h: "400.2GiB" if h != "node-b" else "380.2GiB"))])


def node_cases() -> list[Case]:
    return [case() for case in (_sawtooth, _leak, _steps, _restarts, _gaps, _takeovers,
                                _leak_takeover)]
