"""A rank's last export when it stops: real signals to real trainer processes.

SIGTERM (what torchrun, Kubernetes and Slurm send) and SIGINT export the last metric collection
and the ended spans, then do what the signal would have done without us (the launcher sees the
same status); a trainer's own handler is chained or, installed after ours, its normal exit
still flushes; an unreachable collector holds the exit no longer than the bound."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from forked import in_fork
from yeto_otel.census import CENSUS
from yeto_otel.otel import ExitFlush, ProviderFlusher, flush_providers
from yeto_otel.settings import apply_otel_defaults
from zero_code import instrument_bin, otlp_lines, run_instrumented

TRAINER = Path(__file__).with_name("stopping_trainer.py")
CENSUS_NAMES = {metric.name for metric in CENSUS}
STEP_SPAN = "trainer.step"
# Far above what exporting to local files takes (milliseconds), far below the SDK's own
# 10 s export timeout that an unreachable collector would otherwise hold the exit for.
BOUND_MS = 1000
MARGIN_S = 6.0


class Trainer:
    """stopping_trainer.py as a rank (RANK=0) with its stdout read line by line."""

    def __init__(self, tmp_path: Path, setup: str, wait: str = "signal", **env: str) -> None:
        self.local_dir = tmp_path / "telemetry"
        full_env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("OTEL_", "YETO_"))
                    and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        full_env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                        YETO_OTEL_LOCAL_DIR=str(self.local_dir), **env)
        command = [sys.executable, str(TRAINER), setup, wait]
        if setup.startswith("instrumented"):
            command.insert(0, instrument_bin())
        self.process = subprocess.Popen(command, env=full_env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.lines.get(timeout=max(0.01, deadline - time.monotonic())) == text:
                    return
            except queue.Empty:
                break
        self.process.kill()
        pytest.fail(f"no {text!r} from the trainer:\n{self.process.stderr.read()}")

    def seen(self) -> list[str]:
        out = []
        while not self.lines.empty():
            out.append(self.lines.get())
        return out

    def stop(self, signum: int) -> tuple[int, float]:
        """Send `signum`; (exit status as Popen reports it, seconds until the process ended)."""
        started = time.monotonic()
        self.process.send_signal(signum)
        status = self.process.wait(timeout=120)
        return status, time.monotonic() - started

    def exit_normally(self, how: str = "exit") -> tuple[int, float]:
        started = time.monotonic()
        self.process.stdin.write(f"{how}\n")
        self.process.stdin.flush()
        status = self.process.wait(timeout=120)
        return status, time.monotonic() - started

    def exported(self) -> tuple[set[str], set[str]]:
        """(metric names, span names) in the trainer's local files."""
        metrics = {m["name"] for batch in otlp_lines(self.local_dir, "metrics")
                   for rm in batch["resourceMetrics"] for sm in rm["scopeMetrics"]
                   for m in sm["metrics"]}
        spans = {s["name"] for batch in otlp_lines(self.local_dir, "traces")
                 for rs in batch["resourceSpans"] for ss in rs["scopeSpans"]
                 for s in ss["spans"]}
        return metrics, spans


def assert_last_export_written(trainer: Trainer) -> None:
    metrics, spans = trainer.exported()
    assert CENSUS_NAMES & metrics, f"no census collection in the files: {sorted(metrics)}"
    assert STEP_SPAN in spans


# --- signals and exit on the default interval (10 s: no periodic export happens first) -----


def test_sigterm_exports_the_last_collection_and_the_spans_and_dies_of_sigterm(tmp_path):
    trainer = Trainer(tmp_path, "instrumented")
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == -signal.SIGTERM  # the status a launcher sees: 143 in a shell
    assert_last_export_written(trainer)


def test_a_trainer_handler_installed_before_is_chained_and_its_exit_code_kept(tmp_path):
    trainer = Trainer(tmp_path, "in-code+own-handler")
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == 7
    assert f"trainer handler {int(signal.SIGTERM)}" in trainer.seen()
    assert_last_export_written(trainer)


def test_a_trainer_handler_installed_after_replaces_ours_and_its_exit_still_flushes(tmp_path):
    trainer = Trainer(tmp_path, "instrumented+own-handler")
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == 7
    assert f"trainer handler {int(signal.SIGTERM)}" in trainer.seen()
    assert_last_export_written(trainer)


def test_sigint_exports_then_raises_keyboard_interrupt_as_before(tmp_path):
    trainer = Trainer(tmp_path, "instrumented")
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGINT)
    # An uncaught KeyboardInterrupt: the traceback, then Python ends the process by SIGINT.
    assert status == -signal.SIGINT
    assert "KeyboardInterrupt" in trainer.process.stderr.read()
    assert_last_export_written(trainer)


def test_an_ignored_sigterm_stays_ignored(tmp_path):
    trainer = Trainer(tmp_path, "in-code+ignore", "stdin")
    trainer.wait_for("ready")
    trainer.process.send_signal(signal.SIGTERM)  # discarded by the kernel: nothing runs
    status, _ = trainer.exit_normally()
    assert status == 0
    assert "exiting" in trainer.seen()
    assert_last_export_written(trainer)


def test_a_normal_exit_exports_the_last_collection(tmp_path):
    trainer = Trainer(tmp_path, "instrumented", "stdin")
    trainer.wait_for("ready")
    status, _ = trainer.exit_normally()
    assert status == 0
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
                      YETO_OTEL_EXIT_FLUSH_TIMEOUT=str(BOUND_MS))
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


# --- where handlers go ------------------------------------------------------------------------


def _install_where_allowed() -> tuple:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    before = signal.getsignal(signal.SIGTERM)
    from_thread: list = []
    other = threading.Thread(target=lambda: from_thread.append(
        ExitFlush([], 100).install_handlers((signal.SIGTERM,))))
    other.start()
    other.join()
    untouched = signal.getsignal(signal.SIGTERM) == before
    flush = ExitFlush([], 100)
    installed = flush.install_handlers((signal.SIGTERM, signal.SIGUSR1))
    return (from_thread, untouched, installed, signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN,
            signal.getsignal(signal.SIGTERM) == flush.on_signal)


def test_handlers_are_installed_from_the_main_thread_only_and_leave_ignored_signals_alone():
    # In a forked child: the handlers (and their fork hooks) stay out of the test process.
    from_thread, untouched, installed, still_ignored, ours = in_fork(_install_where_allowed)
    assert from_thread == [[]] and untouched
    assert installed == [signal.SIGTERM] and still_ignored and ours


FORKED_CHILD = """
import os, signal, sys, time
from yeto_otel.otel import exit_flush
assert exit_flush() is not None, "the rank has no exit flush"
pid = os.fork()
if pid == 0:
    time.sleep(3600)
    os._exit(0)
started = time.monotonic()
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print("child", os.WIFSIGNALED(status) and os.WTERMSIG(status), time.monotonic() - started)
"""


def test_a_forked_child_dies_of_sigterm_at_once_without_flushing_the_ranks_providers(tmp_path):
    result = run_instrumented(FORKED_CHILD, {"RANK": "0", "YETO_OTEL_LOCAL_DIR": str(tmp_path),
                                             "YETO_OTEL_EXIT_FLUSH_TIMEOUT": "30000"},
                              console=False)
    assert result.returncode == 0, result.stderr
    _, killed_by, seconds = result.stdout.split()
    assert int(killed_by) == signal.SIGTERM
    # The child inherited the handler; a flush there would wait on exporters that do not
    # send from the child. It chains at once instead (30 s would be the bound).
    assert float(seconds) < MARGIN_S


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
