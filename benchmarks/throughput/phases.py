"""The phases, each on a fresh stack: idle, N ranks, and the headroom (points, then spans)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from . import checks
from .common import IDLE_SETTLE_S
from .phase import Phase
from .shape import capture_shape
from .telemetry import agent_counts, drop_counters, scrape
from .window import Window


def wait_until(t: float) -> None:
    """Wait out a measurement window (nothing to poll: the window is the measurement)."""
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_idle(make_stack, workdir: Path, seconds: float) -> dict:
    phase = Phase(make_stack, "idle", 0, workdir)
    try:
        phase.start_stack()
        # A started agent settles (Go runtime, queue compaction on start) before the window.
        wait_until(time.monotonic() + IDLE_SETTLE_S)
        window = Window(phase.stack, [])
        window.begin()
        wait_until(time.monotonic() + seconds)
        result = window.end()
        result.update(name="idle", ranks=0, hosts=0, interval_s=None, failures=[])
        return result
    finally:
        phase.close()


def run_ranks(make_stack, workdir: Path, ranks: int, interval_s: float,
              seconds: float) -> dict:
    phase = Phase(make_stack, f"ranks-{ranks}", ranks, workdir)
    try:
        phase.start_stack()
        phase.start_loadgens()
        started = phase.go(interval_s, restart=True)
        # Half an interval in: the window's edges fall between the ranks' exports.
        wait_until(started + interval_s / 2)
        window = Window(phase.stack, phase.gens)
        window.begin()
        wait_until(window.start_cpu["t"] + seconds)
        result = window.end()
        phase.stop()
        counts = phase.drain()
        drops = checks.drops(phase)
        result["prometheus"] = checks.prometheus(phase)
        result["jaeger"] = checks.jaeger(phase, restarts_per_rank=1, query_traces=True)
        per_export = sorted({n for v in phase.points_per_export.values() for n in v})
        result.update(name=f"{ranks} ranks", ranks=ranks, hosts=len(phase.hosts),
                      interval_s=interval_s, exported=phase.exported, agent_final=counts,
                      drop_counters=drops, points_per_export=per_export,
                      failures=phase.failures)
        return result
    finally:
        phase.close()


def run_headroom(make_stack, workdir: Path, ranks: int, intervals: list[float],
                 seconds: float, span_rates: list[float], span_seconds: float) -> dict:
    phase = Phase(make_stack, "headroom", ranks, workdir)
    try:
        shape = capture_shape(phase.workdir, ranks)
        phase.start_stack()
        phase.start_loadgens(shape)
        steps = _points_steps(phase, intervals, seconds)
        span_steps = []
        if span_rates and not phase.failures:
            span_steps = _span_steps(phase, span_rates, span_seconds)
        drops = checks.drops(phase)
        prometheus = checks.prometheus(phase)
        # Tens of thousands of traces: Jaeger's own receiver and storage counters, not the
        # query API, confirm them.
        jaeger = checks.jaeger(phase, restarts_per_rank=0, query_traces=False)
        return {"ranks": ranks, "hosts": len(phase.hosts), "shape": shape, "steps": steps,
                "span_steps": span_steps, "exported": phase.exported, "drop_counters": drops,
                "prometheus": prometheus, "jaeger": jaeger, "failures": phase.failures}
    finally:
        phase.close()


def _points_steps(phase: Phase, intervals: list[float], seconds: float) -> list[dict]:
    """Headroom, points: every rank exports the census every `interval` s, shorter and
    shorter, until the ranks no longer keep their schedule."""
    steps = []
    for interval in intervals:
        started = phase.go(interval, restart=False)
        wait_until(started + max(interval, 1.0))
        window = Window(phase.stack, phase.gens)
        window.begin()
        wait_until(window.start_cpu["t"] + seconds)
        result = window.end()
        phase.stop()
        phase.drain()
        # One export of every rank per interval is the schedule the ranks were given.
        per_export = {r: v[-1] for r, v in phase.points_per_export.items() if v}
        scheduled = sum(per_export.values()) / interval
        result.update(name=f"census every {interval:g} s", interval_s=interval,
                      scheduled_points_per_s=scheduled,
                      kept_schedule=result["points_per_s"] >= 0.8 * scheduled)
        steps.append(result)
        _say(f"  headroom: interval {interval:g} s: {result['points_per_s']:.0f} points/s "
             f"of {scheduled:.0f} scheduled, agent {result['agent_cpu_pct']:.1f}% CPU, "
             f"load generators {result['loadgen_cpu_pct']:.0f}%, machine "
             f"{result['machine_busy_pct']:.0f}%")
        if phase.failures or not result["kept_schedule"]:
            break
    return steps


def _span_steps(phase: Phase, span_rates: list[float], span_seconds: float) -> list[dict]:
    """Headroom, spans: restarts at a steady pace on every rank (census every 10 s
    meanwhile), faster and faster, until a step drops or the load generators fall behind."""
    steps = []
    started = phase.go(10.0, restart=False, span_queue=1 << 16)
    wait_until(started + 1.0)
    for rate in span_rates:
        result = _span_step(phase, rate, span_seconds)
        steps.append(result)
        dropped = result["dropped"]
        _say(f"  headroom: {rate:g} spans/s scheduled: {result['created_spans_per_s']:.0f} "
             f"created/s, {result['received_spans_per_s']:.0f} received/s, all through "
             f"after {result['through_s']:.1f} s, agent {result['agent_cpu_pct']:.1f}% CPU, "
             f"load generators {result['loadgen_cpu_pct']:.0f}%, machine "
             f"{result['machine_busy_pct']:.0f}%" + (f", DROPPED {dropped}" if dropped else ""))
        if dropped or phase.failures or not result["kept_schedule"]:
            break
    phase.stop()
    phase.drain()
    return steps


def _span_step(phase: Phase, rate: float, span_seconds: float) -> dict:
    window = Window(phase.stack, phase.gens)
    window.begin()
    for g in phase.gens:
        g.send({"cmd": "spans", "restarts_per_s": rate / 2 / len(phase.gens),
                "seconds": span_seconds})
    done = [g.expect("spans_done", timeout=span_seconds + 300) for g in phase.gens]
    at_flush = agent_counts(scrape(phase.stack.agent_telemetry_url))
    t_flushed = time.monotonic()
    live_spans = sum(d["spans"] for d in done)
    counts = phase.drain(spans=phase.exported["spans"] + live_spans)
    t_through = time.monotonic()
    result = window.end()
    t0 = min(d["t0"] for d in done)
    created = sum(2 * d["restarts"] for d in done)
    scheduled = sum(2 * d["restarts_scheduled"] for d in done)
    dropped = {k: v for k, v in drop_counters(
        scrape(phase.stack.agent_telemetry_url)).items() if v}
    accepted = at_flush["accepted_spans"] - window.start_counts["accepted_spans"]
    result.update(
        name=f"{rate:g} spans/s", scheduled_spans_per_s=rate,
        created_spans_per_s=created / (max(d["t_created"] for d in done) - t0),
        kept_schedule=created >= 0.95 * scheduled, spans_created=created,
        received_spans_per_s=accepted / (t_flushed - t0),
        through_s=t_through - t0, through_spans_per_s=created / (t_through - t0),
        agent=counts, dropped=dropped,
        agent_cpu_ms_per_1000_spans=(1000 * result["agent_cpu_pct"] * 10
                                     / result["spans_per_s"] if result["spans_per_s"] else None))
    return result
