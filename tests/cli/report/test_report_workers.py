"""The report on a job with DataLoader workers and restarted ranks: workers in their own chart,
grouped under their rank; each launch of a rank its own legend entry and marker; the step-log
table per file; empty files and the resume gauges not listed as skipped.

tests/fixtures/telemetry-workers holds what the embedded default wrote (descriptions of the
metrics trimmed) for `opentelemetry-instrument torchrun --standalone --nproc_per_node=2
train.py`, run twice in one YETO_OTEL_LOCAL_DIR (OTEL_METRIC_EXPORT_INTERVAL=500,
YETO_DILOCO_HOST_MEM_CENSUS=1): each rank a DataLoader of 2 forked workers with
persistent_workers=False (a new worker process per epoch) over 2 epochs, worker 0 calling
torch.load; the first launch saves resume anchors, the second restarts from them (mapped);
each rank writes `steplog-<stem of its telemetry files>.jsonl`. So: 2 ranks x 2 launches,
2 workers per rank x 2 epochs x 2 launches (16 worker processes).

The rest builds small directories of OTLP JSON lines here (`_Job`) for what a real run of that
size does not show: files of older versions (no role), a rank's second DataLoader, a worker
whose rank wrote nothing, a plain process without RANK.
"""

from __future__ import annotations

import calendar
import json
import re
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import HOST_NAME, SERVICE_INSTANCE_ID
from report_testkit import plotly_or_skip, report
from repo_paths import FIXTURES

from yeto_otel.census import CENSUS_ERRORS, PRIVATE_DIRTY, RSS, RSS_PEAK
from yeto_otel.cli.report import Roster, build_html, charts, load_telemetry
from yeto_otel.names import RESUME_BYTES_MAPPED
from yeto_otel.otel import RANK_ATTRIBUTE, ROLE_ATTRIBUTE, WORKER_ID_ATTRIBUTE, Role

WORKERS = FIXTURES / "telemetry-workers"
WORKER_CHARTS = ["census-process", "dataloader-workers", "census-rates", "census-node",
                 "restart-bytes", "steplog-memory"]
LAUNCHES = {1: "(launch 1, 14:19:46)", 2: "(launch 2, 14:20:02)"}
RANK_NAMES = {f"rank {r} {LAUNCHES[n]}" for r in (0, 1) for n in (1, 2)}
WORKER_NAMES = {f"rank {r} / worker {k} {LAUNCHES[n]}" for r in (0, 1) for k in (0, 1)
                for n in (1, 2)}


@pytest.fixture(scope="module")
def data():
    return load_telemetry(WORKERS)


@pytest.fixture(scope="module")
def figures(data):
    plotly_or_skip()
    return dict(charts(data))


def _lines(fig) -> list:
    return [t for t in fig.data if t.type == "scatter" and t.mode == "lines+markers"]


def _header(page: str) -> dict[str, str]:
    head = page[page.index("<header>"):page.index("</header>")]
    return dict(re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", head, re.S))


# --- who is who ------------------------------------------------------------------------------


def test_roster_tells_ranks_launches_and_workers_apart(data):
    roster = Roster(data)
    assert roster.ranks == ["vm/rank-0", "vm/rank-1"]
    assert roster.workers == {"vm/rank-0": ["vm/rank-0/worker-0", "vm/rank-0/worker-1"],
                              "vm/rank-1": ["vm/rank-1/worker-0", "vm/rank-1/worker-1"]}
    assert roster.label("vm/rank-1/worker-0") == "rank 1 / worker 0"
    for rank in roster.ranks:
        launches = roster.launches(rank)
        assert [(launch.number, launch.count) for launch in launches] == [(1, 2), (2, 2)]
        assert launches[0].pid != launches[1].pid
        assert [launch.suffix for launch in launches] == [f" {LAUNCHES[1]}", f" {LAUNCHES[2]}"]
        assert roster.processes(rank) == 2
    for worker in roster.parent:
        assert roster.processes(worker) == 4  # 2 epochs x 2 launches
    # the same rank, the same hue: worker 0 in its colour, worker 1 a lighter shade of it
    assert roster.color("vm/rank-0/worker-0") == roster.color("vm/rank-0")
    assert roster.color("vm/rank-0/worker-1") not in (roster.color("vm/rank-0"),
                                                     roster.color("vm/rank-1"))


# --- the charts ------------------------------------------------------------------------------


def test_rank_charts_hold_ranks_only_one_entry_per_launch(figures):
    assert list(figures) == WORKER_CHARTS
    for chart_id in ("census-process", "census-rates", "census-node"):
        lines = _lines(figures[chart_id])
        assert lines and {t.name for t in lines} <= RANK_NAMES, chart_id
        assert not any("worker" in t.name for t in lines)
    process = _lines(figures["census-process"])
    assert {t.name for t in process} == RANK_NAMES
    # each launch: one legend entry for the whole chart, its own group, the rank's colour
    legend = [t.name for t in process if t.showlegend is not False]
    assert sorted(legend) == sorted(RANK_NAMES)
    by_name = {t.name: t for t in process}
    first, second = by_name[f"rank 0 {LAUNCHES[1]}"], by_name[f"rank 0 {LAUNCHES[2]}"]
    assert first.line.color == second.line.color
    assert first.legendgroup != second.legendgroup
    assert (first.marker.symbol, second.marker.symbol) == ("circle", "square-open")
    # a launch is one process: no gap inside it
    assert None not in first.y and None not in second.y


def test_workers_chart_groups_workers_under_their_rank(figures):
    fig = figures["dataloader-workers"]
    lines = _lines(fig)
    assert {t.name for t in lines} == WORKER_NAMES
    for t in lines:
        rank = re.match(r"rank (\d)", t.name).group(1)
        assert t.legendgroup == f"vm/rank-{rank}"
        assert t.legendgrouptitle.text == f"rank {rank}"
    assert sorted(t.name for t in lines if t.showlegend is not False) == sorted(WORKER_NAMES)
    # the panels: what a worker owns first, then RSS with its peak; no census errors (none)
    panels = [a.text for a in fig.layout.annotations if a.yref == "paper"]
    assert panels[0].startswith("Private dirty") and panels[1].startswith("RSS")
    by_panel = {row: {re.search(r"<br>([\w.]+) \(", t.hovertemplate).group(1)
                      for t in lines if (t.yaxis or "y") == row} for row in ("y", "y2")}
    assert by_panel == {"y": {PRIVATE_DIRTY.name}, "y2": {RSS.name, RSS_PEAK.name}}
    assert not any(CENSUS_ERRORS.name in t.hovertemplate for t in lines)
    # one worker slot in one launch: its two epochs' processes are segments of one line
    slot = next(t for t in lines if t.name == f"rank 0 / worker 1 {LAUNCHES[2]}"
                and (t.yaxis or "y") == "y")
    assert list(slot.y).count(None) == 1 and len(slot.y) >= 3


def test_restart_bands_launch_lines_and_worker_lanes(figures):
    fig = figures["census-process"]
    texts = [a.text for a in fig.layout.annotations]
    assert "◀ restart (2 ranks)" in texts
    assert "launch 2 (2 ranks) ▶" in texts
    assert any(s.type == "rect" for s in fig.layout.shapes)
    assert any(s.type == "line" and str(s.x0).startswith("2026-12-03 14:20:02")
               for s in fig.layout.shapes)
    # worker 0 of each rank called torch.load: a lane under its rank, bars of their own
    lane_axis = fig.layout.yaxis4  # under the three process panels
    assert list(lane_axis.categoryarray) == ["rank 1 / worker 0", "rank 1",
                                             "rank 0 / worker 0", "rank 0"]
    worker_bars = next(t for t in fig.data if t.type == "bar" and "workers" in t.name)
    assert set(worker_bars.y) == {"rank 0 / worker 0", "rank 1 / worker 0"}
    rank_bars = [t for t in fig.data if t.type == "bar" and t is not worker_bars]
    assert not any("worker" in y for t in rank_bars for y in t.y)


# --- the page --------------------------------------------------------------------------------


def test_workers_page_header_tables_and_skipped(tmp_path):
    plotly_or_skip()
    out = tmp_path / "page.html"
    result = report(WORKERS, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
    page = out.read_text(encoding="utf-8")
    assert f"data-charts='{' '.join(WORKER_CHARTS)}'" in page
    rows = _header(page)
    assert rows["Ranks"].startswith("2: ") and rows["Ranks"].count("2 launches") == 2
    assert "worker-" not in rows["Ranks"]  # ranks only; workers are counted apart
    assert rows["DataLoader workers"].startswith("4 (16 processes")
    assert "rank 0: 2 (worker 0 ×4, worker 1 ×4)" in rows["DataLoader workers"]
    # empty files are counted beside the files, not skipped; the resume gauges are shown
    assert rows["Skipped"] == "nothing"
    assert "14 empty file(s)" in rows["Files"]
    assert RESUME_BYTES_MAPPED.name in page[page.index('id="restart-bytes"') - 2000:]
    # one table per step-log file; rank 0's (with the census) open, with no empty cell
    table = page[page.index("id='steplog-table'"):]
    blocks = re.findall(r"<details class=steps( open)?><summary><b>(.*?)</b>(.*?)</details>",
                        table, re.S)
    assert [title.split(" <code")[0] for _, title, _ in blocks] == [
        f"rank {r} {LAUNCHES[n]}" for r in (0, 1) for n in (1, 2)]
    assert [bool(opened) for opened, _, _ in blocks] == [True, True, False, False]
    for opened, _, body in blocks:
        if opened:
            assert "host_mem.vm_rss_bytes" in body and "<td class=dim>-</td>" not in body


def test_old_fixture_ranks_without_roles_and_launches():
    """Files without `yeto.process.role` are ranks; one launch each: no launch in the name."""
    plotly_or_skip()
    data = load_telemetry(FIXTURES / "telemetry")
    roster = Roster(data)
    assert roster.ranks == ["vm/rank-0", "vm/rank-1"] and not roster.parent
    names = {t.name for t in _lines(dict(charts(data, roster))["census-process"])}
    assert names == {"rank 0", "rank 1"}
    page, chart_ids = build_html(data)
    assert "dataloader-workers" not in chart_ids
    rows = _header(page)
    assert rows["Skipped"] == "nothing" and "2 empty file(s)" in rows["Files"]
    assert "DataLoader workers" not in rows


# --- built directories -----------------------------------------------------------------------

T0 = calendar.timegm((2026, 1, 1, 0, 0, 0)) * 1_000_000_000
S = 1_000_000_000


class _Job:
    """Writes telemetry files the way the embedded default names them."""

    def __init__(self, directory: Path, host: str = "h"):
        self.directory, self.host = directory, host

    def process(self, instance: str, start_s: int, pid: int, points: list[tuple[int, dict]],
                **attributes) -> str:
        """A process's files: metrics (one batch per (second, {metric: value})) and an empty
        traces file; returns their stem."""
        stamp = f"20260101T{start_s // 3600:02d}{start_s // 60 % 60:02d}{start_s % 60:02d}"
        stem = f"{re.sub(r'[^A-Za-z0-9._-]+', '_', instance)}-{stamp}-{pid}"
        resource = {"attributes": [
            {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
             {"stringValue": v}}
            for k, v in {SERVICE_INSTANCE_ID: instance, HOST_NAME: self.host,
                         **attributes}.items()]}
        lines = [json.dumps({"resourceMetrics": [{"resource": resource, "scopeMetrics": [
            {"scope": {"name": "test"}, "metrics": [
                {"name": name, "unit": "By",
                 "gauge": {"dataPoints": [{"timeUnixNano": str(T0 + at * S),
                                           "asInt": str(value)}]}}
                for name, value in values.items()]}]}]})
            for at, values in points]
        (self.directory / f"metrics-{stem}.jsonl").write_text("\n".join(lines) + "\n")
        (self.directory / f"traces-{stem}.jsonl").write_text("")
        return stem


def _worker(rank: int, worker_id: int) -> dict:
    return {ROLE_ATTRIBUTE: Role.DATALOADER_WORKER.value, RANK_ATTRIBUTE: rank,
            WORKER_ID_ATTRIBUTE: worker_id}


def _made(tmp_path: Path) -> Path:
    job = _Job(tmp_path)
    mem = {RSS.name: 300 << 20, PRIVATE_DIRTY.name: 10 << 20}
    # rank 3, written before roles existed, launched twice; its second loader's worker 0
    # runs two epochs in launch 1 and one in launch 2
    job.process("h/rank-3", 0, 100, [(1, mem), (2, mem), (3, mem)], **{RANK_ATTRIBUTE: 3})
    second = job.process("h/rank-3", 60, 200,
                         [(61, {**mem, RESUME_BYTES_MAPPED.name: 1 << 20}), (62, mem)],
                         **{RANK_ATTRIBUTE: 3})
    for start, pid in ((10, 101), (20, 102), (70, 201)):
        job.process("h/rank-3/loader-1/worker-0", start, pid,
                    [(start + 1, mem), (start + 2, mem)], **_worker(3, 0))
    # a worker of rank 5, which wrote nothing itself; a process without RANK
    job.process("h/rank-5/worker-2", 30, 300, [(31, mem), (32, mem)], **_worker(5, 2))
    job.process("h/pid-7", 40, 7, [(41, mem), (42, mem)], **{ROLE_ATTRIBUTE: Role.PROCESS.value})
    (tmp_path / f"steplog-{second}.jsonl").write_text(
        json.dumps({"step": 0, "time_unix_nano": T0 + 61 * S, RSS.step_log_key: 1 << 20}) +
        "\n")
    return tmp_path


def test_built_job_second_loader_orphan_worker_and_plain_process(tmp_path):
    plotly_or_skip()
    data = load_telemetry(_made(tmp_path))
    roster = Roster(data)
    assert roster.ranks == ["h/rank-3", "h/rank-5", "h/pid-7"]
    assert roster.label("h/rank-3/loader-1/worker-0") == "rank 3 / loader 1 / worker 0"
    assert roster.label("h/rank-5/worker-2") == "rank 5 / worker 2"
    assert roster.label("h/pid-7") == "h/pid-7"
    assert roster.processes("h/rank-3/loader-1/worker-0") == 3
    figures = dict(charts(data, roster))
    ranks = {t.name for t in _lines(figures["census-process"])}
    assert ranks == {"rank 3 (launch 1, 00:00:00)", "rank 3 (launch 2, 00:01:00)", "h/pid-7"}
    workers = _lines(figures["dataloader-workers"])
    assert {t.name for t in workers} == {"rank 3 / loader 1 / worker 0 (launch 1, 00:00:00)",
                                         "rank 3 / loader 1 / worker 0 (launch 2, 00:01:00)",
                                         "rank 5 / worker 2"}
    epochs = next(t for t in workers if t.name.endswith("(launch 1, 00:00:00)"))
    assert list(epochs.y).count(None) == 1  # two epochs: two segments
    assert {t.legendgroup for t in workers} == {"h/rank-3", "h/rank-5"}
    page, _ = build_html(data)
    rows = _header(page)
    assert rows["Skipped"] == "nothing"  # the empty traces files, the resume gauge
    assert "no files of its own" in rows["Ranks"]
    assert "rank 3 (launch 2, 00:01:00)" in page[page.index("id='steplog-table'"):]
