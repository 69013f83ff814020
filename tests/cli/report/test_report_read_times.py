"""Values the census reads within a budget (smaps_rollup: Private_Dirty) are exported again
between reads, with their age. The report draws each such value once, at the time it was read
(the collection's time minus its age), with the age in the hover, in the census charts and in
the step log's chart; files without the age are drawn as they always were.

The files are built here: one rank exporting every second while its anonymous memory grows and
Private_Dirty is read twice (the demo's case: a flat line over ten collections that was one
read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import HOST_NAME, SERVICE_INSTANCE_ID
from report_testkit import plotly_or_skip

from yeto_otel.census import ANONYMOUS, PRIVATE_DIRTY, SMAPS_ROLLUP_AGE
from yeto_otel.cli.report import charts, load_telemetry

S = 1_000_000_000
T0 = 1_800_000_000 * S
MiB = 1 << 20
STEM = "h_rank-0-20270115T080000-42"
STEP_FILE = f"steplog-{STEM}"  # the step log's key: its file's stem
# (collection second, anonymous MiB, private dirty MiB, its age in seconds): read once just
# before the first collection, again 0.25 s before the seventh.
COLLECTIONS = [(k, 300 + 24 * k, 366.8 if k < 6 else 512.0, 0.4 + k if k < 6 else 0.25 + k - 6)
               for k in range(10)]
READS = [(T0 - int(0.4 * S), 366.8, 0.4), (T0 + 6 * S - int(0.25 * S), 512.0, 0.25)]


def _sum(name: str, at: int, value: int) -> dict:
    return {"name": name, "unit": "By", "sum": {
        "dataPoints": [{"startTimeUnixNano": str(T0 - S), "timeUnixNano": str(at),
                        "asInt": str(value)}],
        "aggregationTemporality": 2, "isMonotonic": False}}


def _gauge(name: str, at: int, value: float) -> dict:
    return {"name": name, "unit": "s",
            "gauge": {"dataPoints": [{"timeUnixNano": str(at), "asDouble": value}]}}


def write_metrics(directory: Path, *, with_age: bool = True) -> None:
    resource = {"attributes": [{"key": SERVICE_INSTANCE_ID, "value": {"stringValue": "h/rank-0"}},
                               {"key": HOST_NAME, "value": {"stringValue": "h"}}]}
    lines = []
    for k, anonymous, private_dirty, age in COLLECTIONS:
        at = T0 + k * S
        metrics = [_sum(ANONYMOUS.name, at, anonymous * MiB),
                   _sum(PRIVATE_DIRTY.name, at, int(private_dirty * MiB))]
        if with_age:
            metrics.append(_gauge(SMAPS_ROLLUP_AGE.name, at, age))
        lines.append(json.dumps({"resourceMetrics": [{"resource": resource, "scopeMetrics": [
            {"scope": {"name": "test"}, "metrics": metrics}]}]}))
    (directory / f"metrics-{STEM}.jsonl").write_text("\n".join(lines) + "\n")


def write_step_log(directory: Path, *, with_age: bool = True) -> None:
    """A record per collection (step k at the collection's time), as the step log has them."""
    records = []
    for k, anonymous, private_dirty, age in COLLECTIONS:
        record = {"step": k, "time_unix_nano": T0 + k * S,
                  ANONYMOUS.step_log_key: anonymous * MiB,
                  PRIVATE_DIRTY.step_log_key: int(private_dirty * MiB)}
        if with_age:
            record[PRIVATE_DIRTY.step_log_age_key] = age
        records.append(json.dumps(record))
    (directory / f"steplog-{STEM}.jsonl").write_text("\n".join(records) + "\n")


def _series(data, metric: str):
    (series,) = [s for s in data.series.values() if s.metric == metric]
    return series


def test_a_value_read_once_is_drawn_once_at_its_read_time_with_its_age(tmp_path):
    write_metrics(tmp_path)
    data = load_telemetry(tmp_path)
    read = _series(data, PRIVATE_DIRTY.name)
    assert [(p.time_ns, p.value / MiB, p.age_s) for p in read.points] == \
        [(t, pytest.approx(v, abs=1e-3), age) for t, v, age in READS]
    assert read.read == len(COLLECTIONS)  # every exported point was read
    # A value read fresh at every collection keeps its collections' times.
    fresh = _series(data, ANONYMOUS.name)
    assert [p.time_ns for p in fresh.points] == [T0 + k * S for k, *_ in COLLECTIONS]
    assert {p.age_s for p in fresh.points} == {None}


def test_the_chart_draws_each_read_once_and_shows_its_age(tmp_path):
    plotly_or_skip()
    write_metrics(tmp_path)
    figure = dict(charts(load_telemetry(tmp_path)))["census-process"]
    (line,) = [t for t in figure.data if PRIVATE_DIRTY.name in (t.hovertemplate or "")]
    assert list(line.x) == [t // 1_000_000 for t, _, _ in READS]
    assert [round(y, 1) for y in line.y] == [366.8, 512.0]
    assert [c[0] for c in line.customdata] == [age for _, _, age in READS]
    assert "s before the collection that first exported it" in line.hovertemplate
    (anonymous,) = [t for t in figure.data if ANONYMOUS.name in (t.hovertemplate or "")]
    assert len(anonymous.x) == len(COLLECTIONS) and anonymous.customdata is None


def test_files_without_the_age_are_drawn_at_their_collections(tmp_path):
    write_metrics(tmp_path, with_age=False)
    read = _series(load_telemetry(tmp_path), PRIVATE_DIRTY.name)
    assert [p.time_ns for p in read.points] == [T0 + k * S for k, *_ in COLLECTIONS]


def test_the_step_log_draws_each_read_once_at_the_step_it_was_read(tmp_path):
    write_step_log(tmp_path)
    steps = load_telemetry(tmp_path).steps
    # The first read was before the first record: its step. The second, 0.25 s before the
    # seventh record (step 6), was read during step 5.
    assert steps.line(STEP_FILE, PRIVATE_DIRTY.step_log_key) == [
        (0, int(366.8 * MiB)), (5, 512 * MiB)]
    assert steps.read_ages(STEP_FILE, PRIVATE_DIRTY.step_log_key) == [(0.4, 0), (0.25, 6)]
    assert len(steps.line(STEP_FILE, ANONYMOUS.step_log_key)) == len(COLLECTIONS)


def test_the_step_log_chart_shows_the_age_in_its_hover(tmp_path):
    plotly_or_skip()
    write_step_log(tmp_path)
    figure = dict(charts(load_telemetry(tmp_path)))["steplog-memory"]
    (line,) = [t for t in figure.data
               if PRIVATE_DIRTY.step_log_key in (t.hovertemplate or "")]
    assert list(line.x) == [0, 5]
    assert [list(c) for c in line.customdata] == [[0.4, 0], [0.25, 6]]
    assert "s before the record of step" in line.hovertemplate


def test_a_step_log_without_ages_is_drawn_per_record(tmp_path):
    write_step_log(tmp_path, with_age=False)
    steps = load_telemetry(tmp_path).steps
    assert len(steps.line(STEP_FILE, PRIVATE_DIRTY.step_log_key)) == len(COLLECTIONS)
