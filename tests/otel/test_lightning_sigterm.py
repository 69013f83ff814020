"""Real PyTorch Lightning, SIGTERM mid-fit: the same hooks run and the same exit code comes
back with and without yeto-otel, with the signal opt-in off and on, and with Slurm's
environment (where Lightning adds its requeue handler and bypasses SIGTERM)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from signal_dispositions import default_stop_signals
from yeto_otel.census import CENSUS
from zero_code import instrument_bin, otlp_lines

pytest.importorskip("pytorch_lightning")

TRAINER = Path(__file__).with_name("lightning_trainer.py")
SLURM = {"SLURM_NTASKS": "1", "SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
         "SLURM_NODEID": "0", "SLURM_JOB_NAME": "train"}


def fit_and_stop(tmp_path: Path, *, instrumented: bool, env: dict) -> tuple[int, list[str]]:
    """Run the trainer, send SIGTERM once it is fitting; (exit status, the hooks it printed)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_", "SLURM_"))
            and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    full.update(YETO_OTEL_LOCAL_DIR=str(tmp_path / "telemetry"), PYTHONWARNINGS="ignore")
    full.update(env)
    command = [sys.executable, "-u", str(TRAINER)]
    if instrumented:
        command.insert(0, instrument_bin())
    process = subprocess.Popen(command, env=full, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=default_stop_signals)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in process.stdout],
                     daemon=True).start()
    seen = []
    while "fitting" not in seen:
        try:
            seen.append(lines.get(timeout=180))
        except queue.Empty:
            process.kill()
            pytest.fail(f"the trainer never started fitting:\n{process.stderr.read()}")
    process.send_signal(signal.SIGTERM)
    status = process.wait(timeout=180)
    hooks = []
    while True:
        try:
            line = lines.get(timeout=5)
        except queue.Empty:
            break
        if line.startswith(("hook", "fit returned")):
            hooks.append(line)
    return status, hooks


@pytest.mark.parametrize("env", [{}, {"YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "on"}, SLURM,
                                 {**SLURM, "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "on"}],
                         ids=["default", "opt-in", "slurm", "slurm+opt-in"])
def test_sigterm_mid_fit_runs_the_same_hooks_with_the_same_exit_code(tmp_path, env):
    bare = fit_and_stop(tmp_path / "bare", instrumented=False, env=env)
    ours = fit_and_stop(tmp_path / "ours", instrumented=True, env=env)
    assert bare[0] == 0 and "hook on_exception SIGTERMException" in bare[1], bare
    assert ours == bare
    # The trainer ended normally, so its last collection went out at exit.
    names = {m["name"] for batch in otlp_lines(tmp_path / "ours" / "telemetry", "metrics")
             for rm in batch["resourceMetrics"] for sm in rm["scopeMetrics"]
             for m in sm["metrics"]}
    assert {m.name for m in CENSUS} & names
