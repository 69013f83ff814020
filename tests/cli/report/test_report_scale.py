"""The report on any amount of input: points folded into min/max-preserving buckets as they
stream in (every bucket's extremes kept, so a sawtooth's peaks and troughs are on the page),
running totals rated before downsampling, a page of bounded size, progress on stderr for long
inputs only.

The synthetic job is `benchmarks/telemetry_day` (the scale benchmark's), templated here from a
real export line of tests/fixtures/telemetry-workers so the test needs no child process."""

from __future__ import annotations

import importlib.util
import io
import json
import random
import re
from pathlib import Path

import pytest
from report_testkit import plotly_or_skip, report
from repo_paths import FIXTURES, ROOT

from yeto_otel.census import ANONYMOUS, CENSUS_ERRORS, Kind
from yeto_otel.cli.report import load_telemetry, plotted
from yeto_otel.cli.report._buckets import TimeBuckets
from yeto_otel.cli.report._metric_fold import PAGE_POINTS
from yeto_otel.cli.report._progress import Progress


def _telemetry_day():
    spec = importlib.util.spec_from_file_location(
        "telemetry_day", ROOT / "benchmarks" / "telemetry_day" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DAY = _telemetry_day()


def fixture_template() -> dict:
    path = sorted((FIXTURES / "telemetry-workers").glob("metrics-vm_rank-0-*.jsonl"))[0]
    return json.loads(path.read_text(encoding="utf-8").splitlines()[-1])


# --- the buckets -----------------------------------------------------------------------------


def test_every_bucket_keeps_its_first_last_lowest_and_highest_point():
    rng = random.Random(7)
    raw = []
    t = 10**18
    for _ in range(50_000):
        t += rng.randint(1, 3_000_000_000)
        raw.append((t, rng.uniform(-1e9, 1e9)))
    buckets = TimeBuckets(limit=64)
    order = raw[:]
    head = order[:5000]
    rng.shuffle(head)  # some out of order too
    order[:5000] = head
    for t, v in order:
        buckets.add(t, v, "p")
    buckets.shrink(40)
    assert len(buckets) <= 40
    kept = buckets.points()
    assert len(kept) <= 4 * 40 and kept == sorted(kept)
    by_bucket: dict[int, list] = {}
    for t, v in raw:
        by_bucket.setdefault(t // buckets.width, []).append((t, v))
    kept_by: dict[int, list] = {}
    for t, v, _ in kept:
        kept_by.setdefault(t // buckets.width, []).append((t, v))
    assert set(kept_by) == set(by_bucket)
    for index, points in by_bucket.items():
        mine = kept_by[index]
        assert min(v for _, v in mine) == min(v for _, v in points)
        assert max(v for _, v in mine) == max(v for _, v in points)
        assert min(mine)[0] == min(points)[0] and max(mine)[0] == max(points)[0]


def test_a_short_series_keeps_every_point():
    buckets = TimeBuckets()
    for n in range(300):
        buckets.add(10**18 + n * 500_000_000, float(n % 7), "p")
    assert [v for _, v, _ in buckets.points()] == [float(n % 7) for n in range(300)]


# --- a day of exports ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def day(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("day")
    DAY.write_day(directory, fixture_template(), hours=24, ranks=2)
    yield directory
    for path in directory.iterdir():
        path.unlink()


def _page_traces(page: str, chart_id: str) -> list[dict]:
    at = re.search(rf'Plotly\.newPlot\(\s*"{chart_id}",\s*', page).end()
    start = page.index("[", at)
    traces, _ = json.JSONDecoder().raw_decode(page[start:])
    return traces


def test_a_sawtooths_peaks_and_troughs_survive_onto_the_page(day, tmp_path):
    """24 h of 2 ranks at 10 s: 144 teeth of rank 0's anonymous memory, each climbing from
    BASE to BASE + SAW over 60 exports. Every trough and every peak is on the page, at its
    time, though the page holds a fraction of the points."""
    plotly_or_skip()
    out = tmp_path / "page.html"
    result = report(day, "-o", out)
    assert result.returncode == 0, result.stderr
    page = out.read_text(encoding="utf-8")
    traces = _page_traces(page, "census-process")
    rank0 = [t for t in traces if t.get("name") == "rank 0" and
             f"{ANONYMOUS.name} (gauge)" in t.get("hovertemplate", "")]
    assert len(rank0) == 1
    drawn = {x: y for x, y in zip(rank0[0]["x"], rank0[0]["y"]) if y is not None}
    steps = 24 * 360
    assert len(drawn) < steps / 3  # downsampled ...
    scale = 2.0**30  # GiB on the axis
    for tooth in range(steps // DAY.SAW_PERIOD):
        for step in (tooth * DAY.SAW_PERIOD, tooth * DAY.SAW_PERIOD + DAY.SAW_PERIOD - 1):
            at = (DAY.T0 + step * 10 * 10**9) // 10**6
            assert at in drawn, (tooth, step)  # ... and yet every trough and peak is there
            assert drawn[at] == pytest.approx(DAY.sawtooth(step) / scale, rel=1e-5)
    assert min(drawn.values()) == pytest.approx(DAY.BASE_BYTES / scale, rel=1e-5)


def test_a_day_reads_into_bounded_series_with_rates_of_the_raw_points(day):
    data = load_telemetry(day)
    kept = sum(len(s.points) for s in data.series.values())
    assert kept <= PAGE_POINTS
    anon = data.series[("bench/rank-0", ANONYMOUS.name, ())]
    assert anon.read == 24 * 360 and len(anon.points) < anon.read / 3
    errors = [s for s in data.series.values() if s.metric == CENSUS_ERRORS.name]
    assert errors and all(s.kind is Kind.RUNNING_TOTAL and s.rated for s in errors)
    # a flat running total: rates of the raw points are 0 (never a rate between two
    # downsampled points, never a level drawn as a rate)
    for s in errors:
        assert {v for _, v in plotted(s) if v is not None} == {0.0}
    assert data.extents[("bench/rank-1", "bench_rank-1-20260302T000000-1001")][1] == \
        DAY.T0 + (24 * 360 - 1) * 10 * 10**9 + 1_000_000


def test_a_reset_running_total_breaks_its_rate_line_inside_one_file(tmp_path):
    """Rated as it streams in: a value that goes back (a reset) is a gap, not a negative
    rate, and the rate resumes from the next interval."""
    template = fixture_template()
    lines = []
    for step, value in enumerate((0, 10, 20, 5, 15, 25)):
        batch = json.loads(json.dumps(template))
        for entry in batch["resourceMetrics"]:
            for scope in entry["scopeMetrics"]:
                scope["metrics"] = [m for m in scope["metrics"] if m["name"] == CENSUS_ERRORS.name]
                for m in scope["metrics"]:
                    m["sum"]["dataPoints"] = m["sum"]["dataPoints"][:1]
                    point = m["sum"]["dataPoints"][0]
                    point.update(startTimeUnixNano=str(DAY.T0), asInt=str(value),
                                 timeUnixNano=str(DAY.T0 + (step + 1) * 10**9))
        lines.append(json.dumps(batch))
    (tmp_path / "metrics-vm_rank-0-20260302T000000-1.jsonl").write_text("\n".join(lines) + "\n")
    (series,) = load_telemetry(tmp_path).series.values()
    assert [v for _, v in plotted(series)] == [10.0, 10.0, None, 10.0, 10.0]


def test_the_page_budget_holds_for_thousands_of_series(tmp_path):
    """Many series share the page's points: each gets fewer buckets, the page never more
    points than its budget (a per-series floor would break it past ~1,900 series)."""
    template = fixture_template()
    series_count, steps = 4000, 80
    lines = []
    for step in range(steps):
        batch = json.loads(json.dumps(template))
        entry = batch["resourceMetrics"][0]
        scope = entry["scopeMetrics"][0]
        metric = next(m for e in batch["resourceMetrics"] for s in e["scopeMetrics"]
                      for m in s["metrics"] if m["name"] == ANONYMOUS.name)
        point = metric["sum"]["dataPoints"][0]  # a level: a non-monotonic sum
        metric["sum"]["dataPoints"] = [
            {**point, "attributes": [{"key": "shard", "value": {"intValue": str(i)}}],
             "timeUnixNano": str(DAY.T0 + step * 10**10), "asInt": str((step * 7 + i) % 97)}
            for i in range(series_count)]
        batch["resourceMetrics"] = [entry]
        entry["scopeMetrics"] = [scope]
        scope["metrics"] = [metric]
        lines.append(json.dumps(batch))
    (tmp_path / "metrics-vm_rank-0-20260302T000000-1.jsonl").write_text("\n".join(lines) + "\n")
    data = load_telemetry(tmp_path)
    assert len(data.series) == series_count
    assert sum(len(s.points) for s in data.series.values()) <= PAGE_POINTS


# --- progress --------------------------------------------------------------------------------


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def test_progress_is_a_line_every_few_seconds_not_per_file(day):
    stream = io.StringIO()
    load_telemetry(day, Progress(stream, every_s=3.0, clock=_Clock()))
    lines = stream.getvalue().splitlines()
    assert 2 <= len(lines) < 100
    assert all(line.startswith("yeto-otel: report: ") for line in lines)
    assert re.search(r"2 of 2 files, .* \(100%\)", lines[-1])


def test_a_short_run_prints_no_progress():
    stream = io.StringIO()
    load_telemetry(FIXTURES / "telemetry", Progress(stream))
    assert stream.getvalue() == ""
