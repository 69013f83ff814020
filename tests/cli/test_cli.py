import json
import os
import subprocess
import sys

import pytest

from yeto_otel import testing
from yeto_otel.testing import HostAllocatorStandIn

from yeto_otel.cli import main


def run_cli(*args, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "yeto_otel.cli", *args], capture_output=True,
                          text=True, env=full_env, timeout=60)


def test_census_table():
    result = run_cli("census")
    assert result.returncode == 0, result.stderr
    for name in ("yeto.process.memory.rss", "yeto.process.memory.rss_peak",
                 "yeto.node.memory.anon_pages"):
        assert name in result.stdout
    assert "MiB" in result.stdout and "high-water mark" in result.stdout


def test_census_json_shows_gauges_and_running_totals(monkeypatch, capsys):
    monkeypatch.setenv("YETO_OTEL_HOST_ALLOCATOR", "yeto_otel.testing:settable")
    monkeypatch.setattr(testing.settable, "stats", HostAllocatorStandIn.full_stats(freed=0, **{
        "active_bytes.freed": 3}))
    assert main(["census", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kinds = {row["metric"]: row["kind"] for row in doc["metrics"]}
    assert kinds["yeto.process.memory.rss"] == "gauge"
    assert kinds["yeto.process.memory.rss_peak"] == "high-water mark"
    assert kinds["yeto.host_allocator.active_bytes.current"] == "gauge"
    assert kinds["yeto.host_allocator.allocated_bytes.current"] == "running total"
    assert kinds["yeto.host_allocator.allocated_bytes.allocated"] == "running total"
    assert doc["errors"] == {}


def test_census_table_says_which_allocator_stats_are_gauges(monkeypatch, capsys):
    monkeypatch.setenv("YETO_OTEL_HOST_ALLOCATOR", "yeto_otel.testing:settable")
    monkeypatch.setattr(testing.settable, "stats", HostAllocatorStandIn.full_stats(freed=0, **{
        "active_bytes.freed": 3}))
    assert main(["census"]) == 0
    lines = capsys.readouterr().out.splitlines()
    active = next(line for line in lines if "host_allocator.active_bytes.current" in line)
    held = next(line for line in lines if "host_allocator.allocated_bytes.current" in line)
    assert "(gauge: .freed moves)" in active
    assert "running total: .freed never moved" in held


def test_census_watch_count(capsys):
    assert main(["census", "--json", "--watch", "0.01", "--count", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    assert all(json.loads(line)["metrics"] for line in lines)


def test_bad_setting_is_a_message_not_a_traceback():
    result = run_cli("census", env={"YETO_OTEL_HOST_ALLOCATOR": "gpu"})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "YETO_OTEL_HOST_ALLOCATOR='gpu' is not valid" in result.stderr


@pytest.mark.parametrize("args", [["census", "--watch", "0"], ["nonsense"]])
def test_bad_arguments(args):
    assert run_cli(*args).returncode == 2


@pytest.mark.parametrize("args, message", [
    (["--watch", "nan"], "argument --watch: 'nan' must be more than 0 and at most 86400 seconds"),
    (["--watch", "inf"], "argument --watch: 'inf' must be more than 0"),
    (["--watch", "1e400"], "argument --watch: '1e400' must be more than 0"),
    (["--watch", "-1"], "argument --watch: '-1' must be more than 0"),
    (["--watch", "0"], "argument --watch: '0' must be more than 0"),
    (["--watch", "soon"], "argument --watch: 'soon' is not a number of seconds"),
    (["--watch", "1", "--count", "-1"], "argument --count: '-1' must be at least 1"),
    (["--watch", "1", "--count", "0"], "argument --count: '0' must be at least 1"),
])
def test_census_refuses_out_of_range_flags_in_one_line(args, message):
    result = run_cli("census", *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"yeto-otel census: error: {message}")
    assert result.stdout == ""  # refused before any snapshot is taken
