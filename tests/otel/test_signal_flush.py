"""Signals: by default yeto-otel installs no handler, so a rank stops exactly as it would
without it; with YETO_OTEL_EXIT_FLUSH_ON_SIGNALS=on, SIGTERM and SIGINT export first and then
do what they did before, and a handler that was chained by whoever replaced it never decides
that the process dies. Real signals to real trainer processes."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from forked import in_fork
from stopping import (MARGIN_S, STEP_SPAN, Trainer, assert_last_export_written, wait_until)
from yeto_otel.otel import ExitFlush
from zero_code import otlp_lines, run_instrumented

ON = {"YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "on"}
DEFAULTS = "dispositions SIGTERM=SIG_DFL SIGINT=default_int_handler"


# --- the default: no handler ------------------------------------------------------------------


@pytest.mark.parametrize("setup, env", [("bare", {}), ("instrumented", {}),
                                        ("instrumented", {"OTEL_SDK_DISABLED": "true", **ON})])
def test_by_default_and_with_the_sdk_disabled_the_dispositions_are_pythons_own(
        tmp_path, setup, env):
    trainer = Trainer(tmp_path, setup, **env)
    assert trainer.wait_for("dispositions", prefix=True) == DEFAULTS
    trainer.stop(signal.SIGKILL)


@pytest.mark.parametrize("setup, env", [("bare", {}), ("instrumented", {})])
def test_by_default_sigterm_ends_a_rank_inside_a_c_call_at_once(tmp_path, setup, env):
    """The C call would run for hours; only the signal's default action ends it now."""
    trainer = Trainer(tmp_path, setup, "c-call", **env)
    trainer.wait_for("in C")
    started = trainer.cpu_seconds()  # inside the call once it has run 0.3 s of CPU
    assert wait_until(lambda: trainer.cpu_seconds() - started >= 0.3)
    status, seconds = trainer.stop(signal.SIGTERM)
    assert status == -signal.SIGTERM and seconds < MARGIN_S


def test_the_opt_in_price_a_rank_inside_a_c_call_outlives_sigterm(tmp_path):
    """Documented in docs/faults.md: a Python handler waits for the C call to return."""
    trainer = Trainer(tmp_path, "instrumented", "c-call", **ON)
    trainer.wait_for("in C")
    # A few bytecodes run between `in C` and the call: a signal that lands there runs the
    # handler at once. 0.3 s of CPU after the line can only be spent inside the call.
    started = trainer.cpu_seconds()
    assert wait_until(lambda: trainer.cpu_seconds() - started >= 0.3)
    trainer.process.send_signal(signal.SIGTERM)
    with pytest.raises(Exception):  # still in its C call: the handler has not run
        trainer.process.wait(timeout=2)
    trainer.stop(signal.SIGKILL)


def test_by_default_sigterm_loses_at_most_what_was_not_exported(tmp_path):
    trainer = Trainer(tmp_path, "instrumented", OTEL_METRIC_EXPORT_INTERVAL="1000")
    trainer.wait_for("ready")
    assert wait_until(lambda: len(otlp_lines(trainer.local_dir, "metrics")) >= 2)
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == -signal.SIGTERM
    assert STEP_SPAN in trainer.exported()[1]  # the span batch delay is the interval


# --- opted in -------------------------------------------------------------------------------


def test_sigterm_exports_the_last_collection_and_the_spans_and_dies_of_sigterm(tmp_path):
    trainer = Trainer(tmp_path, "instrumented", **ON)
    assert trainer.wait_for("dispositions", prefix=True) == \
        "dispositions SIGTERM=ExitFlush.on_signal SIGINT=ExitFlush.on_signal"
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == -signal.SIGTERM  # the status a launcher sees: 143 in a shell
    assert_last_export_written(trainer)


@pytest.mark.parametrize("env", [{}, ON], ids=["default", "opt-in"])
def test_sigint_exports_then_raises_keyboard_interrupt_as_before(tmp_path, env):
    """Opted in, our handler exports first; by default Python's own raises and the
    KeyboardInterrupt that ends the interpreter runs the exit flush."""
    trainer = Trainer(tmp_path, "instrumented", **env)
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGINT)
    # An uncaught KeyboardInterrupt: the traceback, then Python ends the process by SIGINT.
    assert status == -signal.SIGINT
    assert "KeyboardInterrupt" in trainer.process.stderr.read()
    assert_last_export_written(trainer)


def test_a_trainer_handler_installed_before_is_chained_and_its_exit_code_kept(tmp_path):
    trainer = Trainer(tmp_path, "in-code+own-handler", **ON)
    trainer.wait_for("ready")
    status, _ = trainer.stop(signal.SIGTERM)
    assert status == 7
    assert f"trainer handler {int(signal.SIGTERM)}" in trainer.seen()
    assert_last_export_written(trainer)


def test_a_handler_that_chains_ours_decides_and_the_trainer_goes_on(tmp_path):
    """Lightning's way: its handler runs, then the one it found (ours). Ours exports and
    returns; the trainer goes on and later exits normally, as it would without us."""
    trainer = Trainer(tmp_path, "instrumented+chaining", "stdin",
                      OTEL_METRIC_EXPORT_INTERVAL="600000", **ON)  # no periodic export
    trainer.wait_for("ready")
    trainer.process.send_signal(signal.SIGTERM)
    trainer.wait_for(f"chained handler {int(signal.SIGTERM)}")
    assert wait_until(lambda: STEP_SPAN in trainer.exported()[1])  # our flush, not an exit
    assert trainer.process.poll() is None  # alive: not ours to end it
    status, _ = trainer.exit_normally()
    assert status == 0
    assert_last_export_written(trainer)


def test_an_ignored_sigterm_stays_ignored(tmp_path):
    trainer = Trainer(tmp_path, "in-code+ignore", "stdin", **ON)
    trainer.wait_for("ready")
    trainer.process.send_signal(signal.SIGTERM)  # discarded by the kernel: nothing runs
    status, _ = trainer.exit_normally()
    assert status == 0
    assert "exiting" in trainer.seen()
    assert_last_export_written(trainer)


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
                                             "YETO_OTEL_EXIT_FLUSH_TIMEOUT": "30000", **ON},
                              console=False)
    assert result.returncode == 0, result.stderr
    _, killed_by, seconds = result.stdout.split()
    assert int(killed_by) == signal.SIGTERM
    # The child inherited the handler; a flush there would wait on exporters that do not
    # send from the child. It chains at once instead (30 s would be the bound).
    assert float(seconds) < MARGIN_S
