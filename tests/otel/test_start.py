"""The role comes first: under opentelemetry-instrument, a process that does not report (a
launcher, a child, a helper a rank starts with subprocess) runs exactly as it would without
yeto-otel: no exit, no directory, no file. A reporting process still fails fast."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zero_code import instrument_bin, run_instrumented

# A rank that starts a helper interpreter (an evaluation script, a compile worker...) in a
# working directory of the helper's own, and says how the helper ended.
RANK_WITH_HELPER = """
import subprocess, sys
helper = subprocess.run([sys.executable, "-c", "print('helper ran')"], cwd=sys.argv[1],
                        capture_output=True, text=True)
print("helper exit", helper.returncode)
print(helper.stdout.strip())
print("helper stderr:", helper.stderr.strip() or "-")
"""


def run_rank(code: str, tmp_path, helper_cwd: str, **env: str):
    script = tmp_path / "rank.py"
    script.write_text(code)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))
            and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    full.update(RANK="0", WORLD_SIZE="1", YETO_OTEL_LOCAL_DIR=str(tmp_path / "telemetry"))
    full.update(env)
    return subprocess.run([instrument_bin(), sys.executable, str(script), helper_cwd], env=full,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("local_dir", ["relative", "unusable"])
def test_a_helper_in_a_directory_it_cannot_write_runs_its_first_line(tmp_path, local_dir):
    """The helper inherits the rank's PYTHONPATH (so the distro runs in it) and, here, a local
    directory it could not create: it is a child, so it is never made to exit."""
    env = {"YETO_OTEL_LOCAL_DIR": "yeto-telemetry"} if local_dir == "relative" else {}
    result = run_rank(RANK_WITH_HELPER, tmp_path, "/proc", **env)
    assert result.returncode == 0, result.stderr
    assert "helper exit 0" in result.stdout and "helper ran" in result.stdout
    assert "helper stderr: -" in result.stdout


def test_a_helper_leaves_no_directory_in_its_working_directory(tmp_path):
    helper_cwd = tmp_path / "helper"
    helper_cwd.mkdir()
    result = run_rank(RANK_WITH_HELPER, tmp_path, str(helper_cwd),
                      YETO_OTEL_LOCAL_DIR="yeto-telemetry")
    assert result.returncode == 0 and "helper exit 0" in result.stdout, result.stderr
    assert list(helper_cwd.iterdir()) == []  # no stray yeto-telemetry/ in the helper's cwd
    assert (tmp_path / "yeto-telemetry").is_dir()  # the rank's own, in the rank's cwd


def test_a_child_with_a_bad_setting_is_never_made_to_exit(tmp_path):
    """A process that inherited another's identity is a child: its settings are not ours to
    judge (its parent reports and judged its own)."""
    result = run_instrumented("print('child ran')", {
        "RANK": "0", "YETO_OTEL_IDENTITY_OWNER": "0:1", "YETO_OTEL_NODE_METRICS": "sometimes",
        "YETO_OTEL_LOCAL_DIR": "/proc/cannot-be-made"}, console=False, cwd=str(tmp_path))
    assert result.returncode == 0 and "child ran" in result.stdout, result.stderr
    assert result.stderr == ""


def test_a_launcher_with_a_bad_setting_runs_its_command(tmp_path):
    code = "print('launcher ran')"
    launcher = tmp_path / "torchrun"
    launcher.write_text(f"#!{sys.executable}\n{code}\n")
    launcher.chmod(0o755)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(YETO_OTEL_NODE_METRICS="sometimes", PATH=f"{tmp_path}:{env['PATH']}")
    done = subprocess.run([instrument_bin(), str(launcher)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "launcher ran" in done.stdout, done.stderr
    assert not (tmp_path / "yeto-telemetry").exists()


def test_a_reporting_process_still_fails_fast_with_one_line(tmp_path):
    result = run_instrumented("print('ran')", {"YETO_OTEL_NODE_METRICS": "sometimes"},
                              console=False, cwd=str(tmp_path))
    assert result.returncode == 2 and "ran" not in result.stdout
    assert result.stderr.strip().count("\n") == 0 and "YETO_OTEL_NODE_METRICS" in result.stderr


def test_with_the_sdk_disabled_nothing_of_ours_runs(tmp_path):
    result = run_instrumented("print('ran')", {"OTEL_SDK_DISABLED": "true",
                                               "YETO_OTEL_NODE_METRICS": "sometimes",
                                               "YETO_OTEL_LOCAL_DIR": "telemetry"},
                              console=False, cwd=str(tmp_path))
    assert result.returncode == 0 and "ran" in result.stdout, result.stderr
    assert not (tmp_path / "telemetry").exists()


@pytest.mark.parametrize("env, says", [
    # a rank of no known job: another unnamed job's rank on this host would share its series
    ({"RANK": "0", "WORLD_SIZE": "1"}, "would share its series (or set YETO_OTEL_JOB_ID)"),
    # a rank of a Slurm job: the job in its identity keeps it apart
    ({"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
     "by the job in its identity (slurm-41)"),
    ({}, "reports as unknown_service"),  # a plain process: nothing to share
])
def test_a_reporting_process_without_a_service_name_says_so_once(tmp_path, env, says):
    result = run_instrumented("print('ran')", {**env, "OTEL_METRICS_EXPORTER": "none"},
                              cwd=str(tmp_path))
    assert result.returncode == 0 and "ran" in result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines()
             if line.startswith("yeto-otel: no service name")]
    assert len(lines) == 1 and lines[0].endswith(says), result.stderr


@pytest.mark.parametrize("named", [{"OTEL_SERVICE_NAME": "pretrain"},
                                   {"OTEL_RESOURCE_ATTRIBUTES": "team=x, service.name=pretrain"}])
def test_a_named_service_is_not_told(tmp_path, named):
    result = run_instrumented("print('ran')", {"RANK": "0", **named}, cwd=str(tmp_path))
    assert result.returncode == 0 and "no service name" not in result.stderr, result.stderr
