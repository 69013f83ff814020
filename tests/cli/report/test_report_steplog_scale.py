"""The step log on any amount of input: read a record at a time into bounded folds (per file its
count and last records, per file and key a min/max-preserving series over step), so a day-long
log at a step a second keeps what a short one keeps, and a sawtooth's troughs and peaks are
still on the page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_testkit import plotly_or_skip, report

from yeto_otel.census import ANONYMOUS
from yeto_otel.cli.report import load_telemetry
from yeto_otel.cli.report._buckets import MAX_BUCKETS
from yeto_otel.cli.report._names import STEP_LOG_PREFIX

RECORDS = 200_000
PERIOD = 1000  # steps per tooth
BASE, LEAK, CLIMB = 3 * 2**30, 2**20, 2**20  # bytes; per tooth; per step within a tooth
KEY = ANONYMOUS.step_log_key
STEM = "steplog-vm_rank-0-20261203T141946-26071"
T0 = 1_780_000_000 * 10**9


def sawtooth(step: int) -> int:
    """A leak under a sawtooth: each tooth climbs PERIOD steps from a trough LEAK above the
    last one."""
    return BASE + (step // PERIOD) * LEAK + (step % PERIOD) * CLIMB


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("steplog")
    with open(directory / f"{STEM}.jsonl", "w", encoding="utf-8") as out:
        for step in range(RECORDS):
            out.write(json.dumps({"step": step, "time_unix_nano": T0 + step * 10**9,
                                  KEY: sawtooth(step), "loss": 1.0 / (step + 1)}) + "\n")
    yield directory
    for path in directory.iterdir():
        path.unlink()


def test_a_long_step_log_reads_into_bounded_folds(long_log):
    data = load_telemetry(long_log)
    steps = data.steps
    assert len(steps) == RECORDS  # every record counted ...
    found = steps.files[STEM]
    assert found.count == RECORDS
    # ... but only the table's last records kept, and a bounded series per key
    assert [r["step"] for r in found.last()] == list(range(RECORDS - steps.kept, RECORDS))
    assert len(found._last) == steps.kept
    assert sorted(found.series) == sorted([KEY, "loss"])
    for series in found.series.values():
        assert len(series.levels) <= MAX_BUCKETS and not len(series.gaps)
        assert len(series.points()) <= 4 * MAX_BUCKETS
    assert list(steps.keys) == [KEY, "loss"]


def _steplog_traces(page: str) -> list[dict]:
    at = re.search(r'Plotly\.newPlot\(\s*"steplog-memory",\s*', page).end()
    start = page.index("[", at)
    traces, _ = json.JSONDecoder().raw_decode(page[start:])
    return traces


def test_a_step_log_sawtooths_troughs_and_peaks_survive_onto_the_page(long_log, tmp_path):
    plotly_or_skip()
    out = tmp_path / "page.html"
    result = report(long_log, "-o", out)
    assert result.returncode == 0, result.stderr
    page = out.read_text(encoding="utf-8")
    assert f"last 10 of {RECORDS} records" in page
    assert f"{RECORDS} step records" in page
    lines = [t for t in _steplog_traces(page) if t.get("hovertemplate", "").startswith(KEY)]
    assert len(lines) == 1
    drawn = {x: y for x, y in zip(lines[0]["x"], lines[0]["y"]) if y is not None}
    assert len(drawn) < RECORDS / 50  # downsampled ...
    scale = 2.0**30  # GiB on the axis
    for tooth in range(RECORDS // PERIOD):
        for step in (tooth * PERIOD, tooth * PERIOD + PERIOD - 1):
            assert step in drawn, (tooth, step)  # ... and yet every trough and peak is there
            assert drawn[step] == pytest.approx(sawtooth(step) / scale, rel=1e-9)
    assert min(drawn.values()) == pytest.approx(BASE / scale)


def test_records_written_out_of_time_order_show_the_latest_in_the_table(tmp_path):
    times = [5, 1, 9, 3, 7, 2, 8, 4, 6, 0, 11, 10]
    with open(tmp_path / f"{STEM}.jsonl", "w", encoding="utf-8") as out:
        for step, t in enumerate(times):
            out.write(json.dumps({"step": step, "time_unix_nano": T0 + t * 10**9,
                                  KEY: 2**30}) + "\n")
    data = load_telemetry(tmp_path)
    shown = data.steps.files[STEM].last()
    # the last 10 by time, oldest first: everything but the records at times 0 and 1
    assert [r["time_unix_nano"] - T0 for r in shown] == [t * 10**9 for t in range(2, 12)]


def test_a_log_naming_a_new_key_per_record_keeps_a_bounded_set_of_keys(tmp_path):
    with open(tmp_path / f"{STEM}.jsonl", "w", encoding="utf-8") as out:
        for step in range(2000):
            out.write(json.dumps({"step": step, f"{STEP_LOG_PREFIX}k{step}_bytes": step})
                      + "\n")
    data = load_telemetry(tmp_path)
    kept = len(data.steps.keys)
    assert kept < 2000 and len(data.steps.files[STEM].series) == kept
    assert len(data.steps.dropped_keys) <= kept
    assert [v for k, v in data.not_plotted.items() if k.startswith("step-log keys")] == \
        [len(data.steps.dropped_keys)]
