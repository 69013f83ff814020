"""`yeto-otel report DIR`: driven as a user runs it (subprocess, real files), plus the rate
arithmetic it plots running totals with.

tests/fixtures/telemetry is a trimmed copy of what the embedded default wrote for two ranks
(`opentelemetry-instrument` with YETO_OTEL_LOCAL_DIR, OTEL_METRIC_EXPORT_INTERVAL=500) around a
mapped anchor restart with fragment_done events and a few sawtooth steps with a stand-in
pinned allocator, plus rank 0's step log.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_testkit import plotly_or_skip, report
from repo_paths import FIXTURES as FIXTURE_ROOT

from yeto_otel.otel import CUMULATIVE, DELTA
from yeto_otel.census import (ANONYMOUS, CENSUS_ERRORS, NODE_ANON_PAGES, NODE_AVAILABLE, RSS_PEAK,
                              Kind, allocator_metric)
from yeto_otel.cli.report import (CHART_IDS, Point, Series, build_html, kind_of, load_telemetry,
                              plotted, rates)

FIXTURE = FIXTURE_ROOT / "telemetry"
ALL_CHARTS = ["census-process", "census-allocator", "census-rates", "census-node",
              "restart-bytes", "steplog-memory"]


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "telemetry"
    shutil.copytree(FIXTURE, target)
    return target


# --- the page ------------------------------------------------------------------------------


def test_fixture_turns_into_one_offline_page(tmp_path):
    plotly_or_skip()
    before = sorted(p.name for p in FIXTURE.iterdir())
    out = tmp_path / "page.html"
    result = report(FIXTURE, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out.resolve())
    assert "Traceback" not in result.stderr and "warning" not in result.stderr
    assert sorted(p.name for p in FIXTURE.iterdir()) == before  # a read changes nothing

    page = out.read_text(encoding="utf-8")
    # plotly.js is in the page itself: it opens offline, no CDN
    assert "plotly.js v" in page and len(page) > 3_000_000
    assert not re.search(r"<script[^>]*\bsrc\s*=", page)
    assert "cdn.plot.ly" not in "".join(re.findall(r"<script[^>]*>", page))
    # every chart, in order, and the body lists what was drawn
    assert f"data-charts='{' '.join(ALL_CHARTS)}'" in page
    for chart_id in ALL_CHARTS:
        assert f'id="{chart_id}"' in page
        assert CHART_IDS[chart_id] in page
    assert "id='steplog-table'" in page
    # the header says what was found and what was skipped
    assert "vm/rank-0" in page and "vm/rank-1" in page
    assert "2 metrics, 2 traces, 2 logs, 1 steplog" in page
    assert "2 restarts on 2 ranks" in page
    assert "2 empty file(s)" in page
    # spans and their bytes are in the hover text
    for text in ("yeto.resume.anchors.load", "torch.load", "demo.step", "fragment_done",
                 "bytes touched so far", "touched 16.0 MiB (50% of mapped)"):
        assert text in page, text


def test_each_census_metric_is_drawn_in_its_chart():
    """The charts pick metrics by namespace (taken from the census table): every metric of the
    fixture lands in its chart, and none is listed as not plotted."""
    plotly_or_skip()
    page, chart_ids = build_html(load_telemetry(FIXTURE))
    header = page[page.index("<header>"):page.index("</header>")]
    assert "not plotted" not in header
    sections = {chart_id: page[page.index(f'id="{chart_id}"'):] for chart_id in chart_ids}
    for chart_id, next_id in zip(chart_ids, chart_ids[1:]):
        sections[chart_id] = sections[chart_id][:sections[chart_id].index(f'id="{next_id}"')]
    expected = {
        "census-process": [ANONYMOUS, RSS_PEAK],
        "census-allocator": [allocator_metric("active_bytes", "current"),
                             allocator_metric("allocations", "peak")],
        "census-rates": [allocator_metric("allocated_bytes", "freed"),
                         allocator_metric("num_host_alloc"), CENSUS_ERRORS],
        "census-node": [NODE_AVAILABLE, NODE_ANON_PAGES],
    }
    for chart_id, rows in expected.items():
        for row in rows:
            assert row.name in sections[chart_id], (chart_id, row.name)
    # the step log's node levels are drawn under their own title, without the "host_mem." part
    steplog = sections["steplog-memory"]
    assert "Node memory" in steplog
    assert '"name":"node_anon_pages_bytes"' in steplog
    assert '"name":"allocated_bytes.current"' in steplog


def test_default_output_is_dir_report_html(tmp_path):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)
    result = report(directory)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str((directory / "report.html").resolve())
    assert (directory / "report.html").stat().st_size > 3_000_000
    assert not list(directory.glob(".report-*"))  # no temp file left behind


def test_corrupt_lines_are_skipped_counted_and_shown(tmp_path):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)
    metrics = sorted(directory.glob("metrics-*rank-0*.jsonl"))[0]
    with open(metrics, "a") as handle:
        handle.write('{"resourceMetrics": [{"resource": {"attri\n')  # cut off mid-write
        handle.write('{"hello": "world"}\n')  # JSON, not an OTLP batch
    traces = sorted(directory.glob("traces-*.jsonl"))[0]
    with open(traces, "ab") as handle:
        handle.write(b"\xff\xfe not text\n")
    with open(directory / "steplog-rank-0.jsonl", "a") as handle:
        handle.write('{"loss": 1.0}\n')  # no step
    out = tmp_path / "out.html"
    result = report(directory, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "warning: skipped 4 corrupt line(s)" in result.stderr
    assert metrics.name in result.stderr
    page = out.read_text(encoding="utf-8")
    assert "4 corrupt lines skipped" in page
    assert f"{metrics.name}:25: not JSON" in page
    assert f"{metrics.name}:26: not an OTLP metrics batch" in page
    assert f"{traces.name}:3: not UTF-8 text" in page
    assert "steplog-rank-0.jsonl:11: not a step record" in page
    # what was good is all still there
    assert f"data-charts='{' '.join(ALL_CHARTS)}'" in page


# --- errors: one line, exit 2, no traceback ---------------------------------------------------


def _only_corrupt(directory: Path) -> None:
    (directory / "metrics-x.jsonl").write_text("not json\n{\"resourceMetrics\": 7}\n")


def _only_empty(directory: Path) -> None:
    (directory / "metrics-x.jsonl").write_text("")
    (directory / "traces-x.jsonl").write_text("\n")


@pytest.mark.parametrize("case, make, message", [
    ("missing", None, "does not exist"),
    ("file", lambda d: None, "is not a directory"),
    ("no-files", lambda d: (d / "notes.txt").write_text("hi"), "no telemetry files in"),
    ("all-empty", _only_empty, "2 of 2 file(s) empty"),
    ("all-corrupt", _only_corrupt, "2 corrupt line(s) skipped, e.g. metrics-x.jsonl:1: not JSON"),
])
def test_bad_directory_is_one_clear_error(tmp_path, case, make, message):
    target = tmp_path / case
    if case == "file":
        target.write_text("not a directory")
    elif make is not None:
        target.mkdir()
        make(target)
    result = report(target, "-o", tmp_path / "out.html")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert result.stderr.startswith("yeto-otel: report: ")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.html").exists()
    if case in ("all-empty", "all-corrupt"):
        assert "nothing to plot in" in result.stderr


def test_output_into_missing_directory_is_an_error(tmp_path):
    result = report(FIXTURE, "-o", tmp_path / "nope" / "out.html")
    assert result.returncode == 2
    assert f"directory {tmp_path / 'nope'} does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_output_that_is_a_directory_is_an_error(tmp_path):
    result = report(FIXTURE, "-o", tmp_path)
    assert result.returncode == 2
    assert "is a directory; give a file name" in result.stderr
    assert "Traceback" not in result.stderr


# --- what is plotted: values for levels, rates for running totals --------------------------


def _series(kind: Kind, points, temporality=CUMULATIVE) -> Series:
    return Series("host/rank-0", "m", (), kind, "By", temporality,
                  [Point(*p) if len(p) == 4 else Point(*p, "a") for p in points])


S = 1_000_000_000


def test_running_total_is_plotted_as_a_rate_per_second():
    total = _series(Kind.RUNNING_TOTAL, [(5, 1 * S, 100), (5, 2 * S, 300), (5, 4 * S, 300),
                                         (5, 4 * S + S // 2, 800)])
    assert rates(total) == [(2 * S, 200.0), (4 * S, 0.0), (4 * S + S // 2, 1000.0)]
    assert plotted(total) == rates(total)


def test_rate_sorts_points_and_breaks_at_a_reset():
    total = _series(Kind.RUNNING_TOTAL, [
        (5, 2 * S, 300, "a"), (5, 1 * S, 100, "a"),
        (9, 3 * S, 10, "b"),  # the rank restarted: another process, a new start time
        (9, 5 * S, 30, "b"),
        (9, 6 * S, 20, "b"),  # the counter went back
    ])
    assert rates(total) == [(2 * S, 200.0), (3 * S, None), (5 * S, 10.0), (6 * S, None)]


def test_delta_temporality_is_rated_per_interval():
    total = _series(Kind.RUNNING_TOTAL, [(1 * S, 3 * S, 50), (3 * S, 4 * S, 7)],
                    temporality=DELTA)
    assert rates(total) == [(3 * S, 25.0), (4 * S, 7.0)]


@pytest.mark.parametrize("kind", [Kind.GAUGE, Kind.HIGH_WATER_MARK])
def test_a_level_is_plotted_as_values_and_never_rated(kind):
    level = _series(kind, [(5, 2 * S, 300), (5, 1 * S, 100), (5, 3 * S, 50),
                           (9, 4 * S, 70, "b")])
    assert plotted(level) == [(1 * S, 100), (2 * S, 300), (3 * S, 50), (4 * S, None),
                              (4 * S, 70)]
    with pytest.raises(TypeError, match="never as a rate"):
        rates(level)


def test_kinds_come_from_what_was_exported():
    assert kind_of("yeto.host_allocator.allocated_bytes.freed", "sum", True) \
        is Kind.RUNNING_TOTAL
    assert kind_of("some.other.counter", "sum", True) is Kind.RUNNING_TOTAL
    assert kind_of("yeto.process.memory.rss", "sum", False) is Kind.GAUGE
    assert kind_of("yeto.process.memory.rss_peak", "gauge", False) is Kind.HIGH_WATER_MARK
    # a non-monotonic export is never rated, whatever the name says
    assert kind_of("yeto.host_allocator.num_host_alloc", "sum", False) is Kind.GAUGE


def test_fixture_series_kinds_and_ranks():
    data = load_telemetry(FIXTURE)
    assert data.instances() == ["vm/rank-0", "vm/rank-1"]
    kinds = {(s.instance, s.metric): s.kind for s in data.series.values()}
    assert kinds[("vm/rank-0", "yeto.process.memory.anonymous")] is Kind.GAUGE
    assert kinds[("vm/rank-1", "yeto.process.memory.rss_peak")] is Kind.HIGH_WATER_MARK
    assert kinds[("vm/rank-0", "yeto.host_allocator.allocated_bytes.allocated")] \
        is Kind.RUNNING_TOTAL
    assert kinds[("vm/rank-0", "yeto.census.errors")] is Kind.RUNNING_TOTAL
    # node metrics come from local rank 0 only
    assert ("vm/rank-0", "yeto.node.memory.available") in kinds
    assert ("vm/rank-1", "yeto.node.memory.available") not in kinds
    assert sorted({s.name for _, s in data.spans}) == [
        "demo.step", "torch.load", "yeto.resume.anchors", "yeto.resume.anchors.load"]
    assert len(data.steps) == 10 and not data.bad_lines
    assert len(data.empty_files) == 2


def test_demo_telemetry_turns_into_a_page(tmp_path):
    """End to end on the embedded default: `yeto-otel demo` writes the files, the report reads
    them (both as a user runs them)."""
    plotly_or_skip()
    if os.environ.get("CI") != "true":
        pytest.importorskip("torch", reason="the demo needs torch: pip install torch")
    local = tmp_path / "telemetry"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    env.update(YETO_OTEL_LOCAL_DIR=str(local), OTEL_METRIC_EXPORT_INTERVAL="200")
    demo = subprocess.run([sys.executable, "-m", "yeto_otel.cli", "demo", "--size", "16MiB",
                           "--steps", "4", "--step-size", "8MiB", "--step-seconds", "0.1",
                           "--compare-eager"], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr[-2000:]
    result = report(local)
    assert result.returncode == 0, result.stderr
    page = (local / "report.html").read_text(encoding="utf-8")
    charts = re.search(r"data-charts='([^']*)'", page).group(1).split()
    for chart_id in ("census-process", "census-node", "restart-bytes", "steplog-memory"):
        assert chart_id in charts
    assert " mmap" in page and " eager" in page  # both restarts, side by side
    assert "id='steplog-table'" in page
