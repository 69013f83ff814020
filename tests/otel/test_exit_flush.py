"""A rank's last export when it exits, and what no exit code can save: real trainer processes.

A normal exit (the end of the script, `sys.exit`, a trainer's own SIGTERM handler that ends
the process) exports the last metric collection and the ended spans; an unreachable collector
holds the exit no longer than the bound; SIGKILL and `os._exit` lose at most one interval.
The signal handlers (opt-in) are tested in test_signal_flush.py."""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest

from stopping import (BOUND_MS, CENSUS_NAMES, MARGIN_S, STEP_SPAN, Trainer,
                      assert_last_export_written)
from yeto_otel.otel import ExitFlush, ProviderFlusher, flush_providers
from yeto_otel.settings import apply_otel_defaults
from zero_code import otlp_lines, run_instrumented


def test_a_normal_exit_exports_the_last_collection(tmp_path):
    trainer = Trainer(tmp_path, "instrumented", "stdin")
    trainer.wait_for("ready")
    status, _ = trainer.exit_normally()
    assert status == 0
    assert_last_export_written(trainer)


def test_a_trainer_handler_that_ends_the_process_normally_still_exports(tmp_path):
    """No handler of ours is needed: the trainer's own SIGTERM handler exits, atexit runs."""
    trainer = Trainer(tmp_path, "instrumented+own-handler")
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == 7
    assert f"trainer handler {int(signal.SIGTERM)}" in trainer.seen()
    assert_last_export_written(trainer)


# --- what nothing can save: SIGKILL and os._exit -----------------------------------------------


def last_census_point_s(trainer: Trainer) -> float:
    return max(int(point["timeUnixNano"]) / 1e9
               for batch in otlp_lines(trainer.local_dir, "metrics")
               for rm in batch["resourceMetrics"] for sm in rm["scopeMetrics"]
               for m in sm["metrics"] if m["name"] in CENSUS_NAMES
               for kind in m.values() if isinstance(kind, dict)
               for point in kind.get("dataPoints", ()))


@pytest.mark.parametrize("stop", ["SIGKILL", "os._exit"])
def test_what_runs_no_exit_code_loses_at_most_one_interval(tmp_path, stop):
    interval_s = 1.0
    trainer = Trainer(tmp_path, "instrumented", "stdin" if stop == "os._exit" else "signal",
                      OTEL_METRIC_EXPORT_INTERVAL=str(int(interval_s * 1000)))
    trainer.wait_for("ready")
    deadline = time.monotonic() + 60
    while len(otlp_lines(trainer.local_dir, "metrics")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # polling: the periodic exports are on
    stopped_at = time.time()
    if stop == "SIGKILL":
        status, _ = trainer.stop(signal.SIGKILL)
        assert status == -signal.SIGKILL
    else:
        status, _ = trainer.exit_normally("os._exit")
        assert status == 3
    # The last interval at most (the margin is for a slow machine's scheduling, not a speed):
    # the census up to one interval before the stop, and the span, whose batch delay defaults
    # to the interval, are in the files.
    assert stopped_at - last_census_point_s(trainer) < interval_s + MARGIN_S
    assert STEP_SPAN in trainer.exported()[1]


# --- the bound --------------------------------------------------------------------------------


@pytest.fixture(params=["hung", "refused"])
def unreachable_endpoint(request):
    """An OTLP endpoint on a reserved local port that never answers: `hung` accepts connections
    (the kernel does, for a listening socket nobody accepts from) and never replies, `refused`
    is bound but not listening, so every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        if request.param == "hung":
            sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("stop", ["sigterm", "exit"])
def test_an_unreachable_collector_holds_the_exit_no_longer_than_the_bound(
        tmp_path, unreachable_endpoint, stop):
    trainer = Trainer(tmp_path, "instrumented", "stdin" if stop == "exit" else "signal",
                      OTEL_EXPORTER_OTLP_ENDPOINT=unreachable_endpoint,
                      YETO_OTEL_EXIT_FLUSH_TIMEOUT=str(BOUND_MS),
                      YETO_OTEL_EXIT_FLUSH_ON_SIGNALS="on" if stop == "sigterm" else "off")
    trainer.wait_for("ready")
    if stop == "exit":
        status, seconds = trainer.exit_normally()
        assert status == 0
    else:
        status, seconds = trainer.stop(signal.SIGTERM)
        assert status == -signal.SIGTERM
    assert seconds < BOUND_MS / 1000 + MARGIN_S
    stderr = trainer.process.stderr.read()
    assert stderr.count("YETO_OTEL_EXIT_FLUSH_TIMEOUT") <= 1  # said once, if at all


class HangingProvider:
    """A provider whose export never returns (a lock held by the interrupted code, a dead
    connection): what the bound is for."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def shutdown(self) -> None:
        self.calls += 1
        self.release.wait()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.calls += 1
        self.release.wait()
        return True


def test_all_the_flushes_of_one_exit_share_one_bound():
    provider = HangingProvider()
    flush = ExitFlush([provider], 300)
    try:
        started = time.monotonic()
        flush.flush(final=False)  # a trainer's handler comes next
        flush.flush(final=True)  # then its exit: nothing is left to wait for
        assert time.monotonic() - started < 0.3 + MARGIN_S
        assert flush.budget_s == 0.0
    finally:
        provider.release.set()


def test_a_hanging_provider_does_not_hold_the_others():
    hanging, quick = HangingProvider(), HangingProvider()
    quick.release.set()
    try:
        assert not flush_providers([ProviderFlusher(hanging), ProviderFlusher(quick)], 0.2,
                                   final=True)
        deadline = time.monotonic() + 30
        while quick.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling: the quick one runs on its own thread
        assert quick.calls == 1 and not hanging.release.is_set()
    finally:
        hanging.release.set()


# --- the setting and the defaults -------------------------------------------------------------


def test_a_bad_bound_fails_fast_with_one_line(tmp_path):
    result = run_instrumented("print('ran')", {"YETO_OTEL_EXIT_FLUSH_TIMEOUT": "soon",
                                               "YETO_OTEL_LOCAL_DIR": str(tmp_path)},
                              console=False)
    assert result.returncode == 2 and "ran" not in result.stdout
    assert result.stderr.strip().count("\n") == 0
    assert "YETO_OTEL_EXIT_FLUSH_TIMEOUT" in result.stderr


@pytest.mark.parametrize("interval, user_delay, delay", [
    (None, None, None),  # 10 s interval: the SDK's 5 s span batch delay is within it
    ("1000", None, "1000"),  # a shorter interval: spans go out as often as the census
    ("1000", "3000", "3000"),  # the user's own choice stands
])
def test_the_span_batch_delay_is_within_the_metric_interval(interval, user_delay, delay):
    env = {k: v for k, v in {"OTEL_METRIC_EXPORT_INTERVAL": interval,
                             "OTEL_BSP_SCHEDULE_DELAY": user_delay}.items() if v is not None}
    apply_otel_defaults(env)
    assert env.get("OTEL_BSP_SCHEDULE_DELAY") == delay
