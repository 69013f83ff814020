"""Outages in the middle of a run: a backend or the agent goes away and comes back.

Each test starts a trainer-like rank (tests/e2e/emitter.py, one `e2e.step` span per step with
its step number, the census exporting in the background) through the agent, breaks one
component while the rank runs, brings it back, and checks that nothing the pipeline accepted
was lost. Each test leaves every component running again for the next one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import required_components
from e2e_ranks import assert_prometheus_rejected_nothing, job_matcher, rank_env

HERE = Path(__file__).resolve().parent
stack_module = required_components.stack_module()
TRACES_QUEUE = {"exporter": "otlp_grpc/traces"}
# Longer than the agent's retry backoff cap (30 s), so a retry that was sleeping when the
# backend came back still fires within the wait.
DELIVERY_TIMEOUT = 120.0


class Rank:
    """One emitter process under `opentelemetry-instrument`, exporting to the stack's agent."""

    def __init__(self, stack, instrument_bin, workdir: Path, *, steps: int, period: float,
                 padding: int = 0, **env: str) -> None:
        self.service = f"yeto-outage-{uuid.uuid4().hex[:8]}"
        self.summary_path = workdir / f"{self.service}.json"
        self.steps = steps
        full_env = rank_env(stack, self.service, OTEL_METRIC_EXPORT_INTERVAL="1000",
                            OTEL_BSP_SCHEDULE_DELAY="200")
        full_env.update(env)
        self.process = subprocess.Popen(
            [instrument_bin, sys.executable, str(HERE / "emitter.py"), str(steps), str(period),
             str(self.summary_path), str(padding)],
            env=full_env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self.ended_at: float | None = None

    def finish(self, timeout: float = 180.0) -> subprocess.CompletedProcess:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        self.ended_at = time.time()
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, out, err)

    def summary(self) -> dict:
        return json.loads(self.summary_path.read_text())

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture
def rank_factory(stack, instrument_bin, tmp_path):
    ranks = []

    def start(**kwargs) -> Rank:
        rank = Rank(stack, instrument_bin, tmp_path, **kwargs)
        ranks.append(rank)
        return rank

    yield start
    for rank in ranks:
        rank.kill()


@pytest.fixture(autouse=True)
def _everything_running_again(stack):
    """Whatever a test broke is started again, so the next test finds a whole stack, and the
    agent's trace queue is empty: what a test sees queued is its own rank's (the queue's
    metrics are the agent's, not any one service's)."""
    stack.wait_for(lambda: _traces_queue_size(stack) == 0, timeout=DELIVERY_TIMEOUT,
                   what="an empty trace queue before the test")
    yield
    stack.start()


def _steps_in_jaeger(stack, service: str) -> set[int]:
    seqs = set()
    for trace in stack.jaeger_traces(service, operation="e2e.step", limit=20000):
        for span in trace["spans"]:
            for tag in span.get("tags") or ():
                if tag["key"] == "e2e.seq":
                    seqs.add(int(tag["value"]))
    return seqs


def _all_steps_arrive(stack, rank: Rank, timeout: float = DELIVERY_TIMEOUT) -> None:
    wanted = set(range(rank.steps))
    last: set[int] = set()

    def complete():
        nonlocal last
        last = _steps_in_jaeger(stack, rank.service)
        return last >= wanted

    try:
        stack.wait_for(complete, timeout=timeout, interval=1.0,
                       what=f"all {rank.steps} step spans of {rank.service} in Jaeger")
    except Exception:
        missing = sorted(wanted - last)
        pytest.fail(f"{len(missing)} of {rank.steps} step spans never arrived "
                    f"(first missing: {missing[:20]})\nagent log:\n{stack.log('agent', 40)}")


def _assert_clean_exit(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-4000:]}"
    assert "steps done" in result.stdout, result.stdout


def _traces_queue_size(stack) -> float:
    return stack.agent_metric("otelcol_exporter_queue_size", **TRACES_QUEUE) or 0.0


def test_jaeger_down_30s_while_spans_flow(stack, rank_factory):
    rank = rank_factory(steps=300, period=0.2)  # a minute of steps
    stack.wait_for(lambda: _steps_in_jaeger(stack, rank.service), timeout=60,
                   what="the first step spans in Jaeger")

    stack.stop("jaeger")
    outage_began = time.monotonic()
    # The agent keeps accepting; what it cannot send waits in its queue.
    stack.wait_for(lambda: _traces_queue_size(stack) > 0, timeout=25,
                   what="spans waiting in the agent's queue while Jaeger is down")
    assert rank.process.poll() is None, "the rank finished before the outage ended"
    time.sleep(max(0.0, 30.0 - (time.monotonic() - outage_began)))  # the outage itself
    stack.start("jaeger")

    _assert_clean_exit(rank.finish())
    _all_steps_arrive(stack, rank)
    stack.wait_for(lambda: _traces_queue_size(stack) == 0, timeout=DELIVERY_TIMEOUT,
                   what="the agent's trace queue to drain")


def test_agent_sigkill_mid_stream_keeps_the_disk_queue(stack, rank_factory):
    # With Jaeger down nothing can leave the agent: every span it acknowledges stays in its
    # disk queue, which is what the SIGKILL must not lose.
    stack.stop("jaeger")
    accepted_before = stack.agent_metric("otelcol_receiver_accepted_spans") or 0.0
    # The rank's own exporter retries for up to its timeout: long enough to ride out the
    # agent's restart, so what it sends during the restart is not dropped at its end either.
    # The kill must come while the rank still runs (20 s of steps): it exports every 50 ms, so
    # the 50 queued requests the kill waits for take a few seconds, not most of its life.
    rank = rank_factory(steps=400, period=0.05, OTEL_EXPORTER_OTLP_TIMEOUT="30",
                        OTEL_BSP_SCHEDULE_DELAY="50")
    stack.wait_for(lambda: _traces_queue_size(stack) >= 50, timeout=60,
                   what="spans queued in the agent")
    assert rank.process.poll() is None, "the rank finished before the kill"
    accepted = (stack.agent_metric("otelcol_receiver_accepted_spans") or 0.0) \
        - accepted_before
    assert accepted > 0
    queue_files = [p for p in stack.queue_dir.rglob("*") if p.is_file()]
    assert queue_files, f"no queue files under {stack.queue_dir}"

    stack.kill("agent")  # mid-stream: the rank is still sending
    stack.start("agent")
    # The restarted agent found the queue on disk (Jaeger is still down, so nothing left).
    stack.wait_for(lambda: _traces_queue_size(stack) > 0, timeout=30,
                   what="the restarted agent's queue, reloaded from disk")

    _assert_clean_exit(rank.finish())
    stack.start("jaeger")
    _all_steps_arrive(stack, rank)


def test_backlog_after_an_outage_is_sent_whole(stack, rank_factory):
    """A long outage leaves thousands of spans queued; when the backend returns they must go
    out in batches the backend accepts (gRPC receivers refuse messages over 4 MiB by default,
    and a refused batch is dropped whole, as a permanent error)."""
    stack.stop("jaeger")
    accepted_before = stack.agent_metric("otelcol_receiver_accepted_spans") or 0.0
    failed_before = stack.agent_metric("otelcol_exporter_send_failed_spans") or 0.0
    # ~3 KiB spans (a restart span with its events is ~0.6 KiB): 6000 of them are ~18 MB.
    rank = rank_factory(steps=6000, period=0.0, padding=3000,
                        OTEL_BSP_MAX_QUEUE_SIZE="20000")
    _assert_clean_exit(rank.finish())
    stack.wait_for(lambda: (stack.agent_metric("otelcol_receiver_accepted_spans") or 0.0)
                   - accepted_before >= rank.steps, timeout=60,
                   what="the agent to have accepted every span")

    stack.start("jaeger")
    _all_steps_arrive(stack, rank)
    failed = (stack.agent_metric("otelcol_exporter_send_failed_spans") or 0.0) - failed_before
    assert failed == 0, stack.log("agent", 40)


def _rss_samples(stack, service: str, minutes: int) -> list[float]:
    result = stack.prometheus_query(
        f'yeto_process_memory_rss_bytes{{{job_matcher(service)}}}[{minutes}m]')
    assert len(result) <= 1, result
    return [float(ts) for ts, _ in result[0]["values"]] if result else []


def test_prometheus_restart_leaves_no_gap_longer_than_the_outage(stack, rank_factory):
    interval = 1.0  # OTEL_METRIC_EXPORT_INTERVAL of the rank
    rank = rank_factory(steps=300, period=0.2)
    stack.wait_for(lambda: len(_rss_samples(stack, rank.service, 5)) >= 3, timeout=60,
                   what="the rank's census in Prometheus")

    down = time.time()
    stack.stop("prometheus")
    time.sleep(20.0)  # the outage itself
    stack.start("prometheus")
    outage = time.time() - down

    samples = _census_until_exit(stack, rank, interval)
    gaps = [b - a for a, b in zip(samples, samples[1:])]
    assert samples[0] < down and samples[-1] > down + outage, (samples, down, outage)
    print(f"outage {outage:.1f}s, largest gap between census samples {max(gaps):.1f}s")
    assert max(gaps) <= outage, (f"largest gap {max(gaps):.1f}s > outage {outage:.1f}s", gaps)


def _census_until_exit(stack, rank, interval: float) -> list[float]:
    """Let the rank finish cleanly, then wait until Prometheus holds its census up to its last
    export, which comes after its steps ended (its exit flush; the rank's own clock, so the time
    its interpreter takes to exit does not count). Returns the sample times."""
    _assert_clean_exit(rank.finish())
    ended = rank.summary()["exit_began"]
    stack.wait_for(lambda: (_rss_samples(stack, rank.service, 10) or [0])[-1]
                   >= ended - 3 * interval - 1, timeout=DELIVERY_TIMEOUT,
                   what="the census up to the rank's exit")
    return _rss_samples(stack, rank.service, 10)


def _census_points_accepted(stack) -> float:
    """Metric points the agent's receiver acknowledged (0 until its first, and again after a
    restart: the count is the running agent's)."""
    return stack.agent_metric("otelcol_receiver_accepted_metric_points") or 0.0


def test_agent_sigkill_keeps_the_census(stack, rank_factory):
    """What the agent acknowledged of the census is on disk before the rank hears back (the
    remote-write exporter's write-ahead log, no batch processor or memory queue in front), so
    a SIGKILL loses none of it. Prometheus is down before the kill, so everything acknowledged
    is still inside the agent when it dies."""
    interval = 1.0  # OTEL_METRIC_EXPORT_INTERVAL of the rank
    # The rank's exporter retries for up to 30 s: long enough to ride out the agent's restart.
    rank = rank_factory(steps=400, period=0.2, OTEL_EXPORTER_OTLP_TIMEOUT="30")
    stack.wait_for(lambda: len(_rss_samples(stack, rank.service, 5)) >= 3, timeout=60,
                   what="the rank's census in Prometheus")

    stack.stop("prometheus")
    prometheus_down = time.time()
    accepted_before = _census_points_accepted(stack)
    time.sleep(10.0)  # ten export intervals that only the agent holds
    assert _census_points_accepted(stack) > accepted_before, stack.log("agent", 40)
    assert rank.process.poll() is None, "the rank finished before the kill"

    killed = time.time()
    stack.kill("agent")  # mid-stream: the rank keeps collecting and sending
    stack.start("agent")
    # The rank's outage ends when the restarted agent acknowledges its first export (its
    # exporter backs off 1, 2, 4 s... between tries, so that can come after the restart).
    stack.wait_for(lambda: _census_points_accepted(stack) > 0, timeout=60, interval=0.1,
                   what="the restarted agent to accept the rank's census")
    outage = time.time() - killed
    stack.start("prometheus")

    samples = _census_until_exit(stack, rank, interval)
    held = [t for t in samples if prometheus_down < t < killed]
    gaps = [b - a for a, b in zip(samples, samples[1:])]
    print(f"agent outage as the rank saw it {outage:.1f}s, {len(held)} census samples held "
          f"through the kill, largest gap {max(gaps):.1f}s")
    # Ten intervals were acknowledged before the kill (three of them spared for a busy
    # machine's scheduling); an in-memory queue in the agent loses them all.
    assert len(held) >= 7, (held, prometheus_down, killed)
    # While its export is retried the rank collects nothing new: the gap is the outage plus the
    # interval before the next collection (and one more interval of scheduling slack).
    assert max(gaps) <= outage + 2 * interval, (
        f"largest gap {max(gaps):.1f}s > outage {outage:.1f}s + 2 intervals", gaps)
    # The write-ahead log sends its backlog in order: Prometheus refused nothing.
    assert_prometheus_rejected_nothing(stack, stack_module, timeout=DELIVERY_TIMEOUT)


def test_agent_unreachable_never_slows_or_crashes_the_rank(stack, rank_factory):
    timeout_s = 2.0
    period = 0.05
    stack.stop("agent")
    rank = rank_factory(steps=100, period=period, OTEL_EXPORTER_OTLP_TIMEOUT=str(timeout_s),
                        OTEL_METRIC_EXPORT_INTERVAL="500")
    result = rank.finish()
    _assert_clean_exit(result)
    durations = rank.summary()["durations"]
    # Exports run on the SDK's own threads: a step waits for none of them. The bound is the
    # exporter's timeout (a step that waited on an export would take at least that long).
    assert max(durations) < period + timeout_s, max(durations)
    # Exiting flushes spans and metrics once each, each bounded by the exporter timeout.
    exit_took = rank.ended_at - rank.summary()["exit_began"]
    print(f"agent down: slowest step {max(durations):.3f}s (period {period}s), "
          f"exit {exit_took:.1f}s (exporter timeout {timeout_s}s)")
    assert exit_took < 2 * timeout_s + 5.0, exit_took
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
