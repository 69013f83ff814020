"""The report page, opened offline in headless Chromium (Debian's `chromium`, driven by
Playwright for Python; no browser download): no script errors, every chart drawn, and a
full-page screenshot kept as a test artifact in test-artifacts/report.png (and, for the job
with DataLoader workers and a restart, test-artifacts/report-workers.png; for a pod whose
cgroup observer was OOM-killed, test-artifacts/report-cgroup.png).

Outside CI a missing chromium or playwright skips with how to install it; in CI (CI=true)
it fails.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cgroup_runs import pod_run
from repo_paths import FIXTURES as FIXTURE_ROOT, ROOT

REPO = ROOT
FIXTURE = FIXTURE_ROOT / "telemetry"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
EXPECTED_CHARTS = ["census-process", "census-allocator", "census-rates", "census-node",
                   "restart-bytes", "steplog-memory"]
WORKERS_FIXTURE = FIXTURE_ROOT / "telemetry-workers"
WORKER_CHARTS = ["census-process", "dataloader-workers", "census-rates", "census-node",
                 "restart-bytes", "steplog-memory"]


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (required in CI)")
    pytest.skip(what)


def _chromium() -> str:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    _missing("chromium is not installed: apt-get install chromium")
    raise AssertionError("unreachable")


def _report(tmp_path_factory, fixture: Path) -> Path:
    try:
        import plotly  # noqa: F401
    except ImportError:
        _missing("plotly is not installed: pip install 'plotly>=6'")
    out = tmp_path_factory.mktemp("report") / "report.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    result = subprocess.run([sys.executable, "-m", "yeto_otel.cli", "report", str(fixture),
                             "-o", str(out)], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    return _report(tmp_path_factory, FIXTURE)


@pytest.fixture(scope="module")
def workers_page_file(tmp_path_factory) -> Path:
    return _report(tmp_path_factory, WORKERS_FIXTURE)


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: pip install playwright "
                 "(it drives the system chromium; no `playwright install` needed)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS,
                                             headless=True)
        yield browser
        browser.close()


_CHART_STATE = """ids => ids.map(id => {
    const el = document.getElementById(id);
    return {id, svg: el.querySelectorAll('.main-svg').length,
            traces: (el.data || []).length,
            drawn: el.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,
            height: el.getBoundingClientRect().height,
            title: el.closest('section').querySelector('h2').textContent};
})"""


def _drawn_charts(page) -> tuple[list[str], list[dict]]:
    """(the chart ids the page lists, each chart's state) once plotly has drawn every chart:
    its svg, and at least half its traces (plotly draws in passes after the first svg)."""
    charts = page.evaluate("document.body.dataset.charts.split(' ')")
    page.wait_for_function(f"""ids => ({_CHART_STATE})(ids).every(
        c => c.svg >= 1 && c.traces > 0 && c.drawn >= c.traces * 0.5)""", arg=charts)
    return charts, page.evaluate(_CHART_STATE, charts)


def test_page_renders_every_chart_offline(page_file, browser):
    page, errors, requests = _open_offline(browser, page_file)
    charts, drawn = _drawn_charts(page)
    assert charts == EXPECTED_CHARTS
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == len(charts)
    for chart in drawn:
        assert chart["svg"] >= 1, chart
        assert chart["traces"] > 0 and chart["drawn"] >= chart["traces"] * 0.5, chart
        assert chart["height"] > 300, chart
    by_id = {c["id"]: c for c in drawn}
    # one line per rank and metric; the timeline's bars and fragment_done markers
    assert by_id["census-process"]["traces"] >= 2 * 4 + 2
    assert by_id["restart-bytes"]["traces"] == 4  # file size, mapped, touched, anonymous delta
    rows = page.evaluate("document.querySelectorAll('#steplog-table tbody tr').length")
    assert rows > 10

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    assert (ARTIFACTS / "report.png").stat().st_size > 50_000
    assert not requests, f"the page fetched from the network: {requests[:5]}"
    assert not errors, errors
    page.close()


def test_hover_on_a_restart_bar_shows_bytes(page_file, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(20_000)
    page.goto(page_file.as_uri(), wait_until="load")
    page.wait_for_function("document.getElementById('restart-bytes')?.querySelector('.main-svg')")
    # the bytes-touched bar of the first restart; plotly's drag layer takes the pointer events
    bar = page.locator("#restart-bytes .barlayer .trace").nth(2).locator("path").first
    bar.scroll_into_view_if_needed()
    box = bar.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = page.locator("#restart-bytes .hoverlayer")
    page.wait_for_function(
        "document.querySelector('#restart-bytes .hoverlayer').textContent.includes('touched')")
    text = hover.text_content()
    assert "mapped" in text and "load mode: mmap" in text
    page.close()


def _open_offline(browser, page_file: Path):
    """The page loaded with the network cut off: (page, errors, requests made)."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    errors: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda msg: errors.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" else None)

    def offline(route):  # the page must need nothing but itself
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(page_file.as_uri(), wait_until="load")
    return page, errors, requests


def test_workers_page_renders_and_groups_workers_by_rank(workers_page_file, browser):
    page, errors, requests = _open_offline(browser, workers_page_file)
    charts, drawn = _drawn_charts(page)
    assert charts == WORKER_CHARTS
    for chart in drawn:
        assert chart["traces"] > 0 and chart["drawn"] >= chart["traces"] * 0.5, chart
        assert chart["height"] > 300, chart
    # the workers' legend: one group per rank, each titled with its rank
    groups = page.evaluate("""() => Array.from(
        document.querySelectorAll('#dataloader-workers .legend .groups'),
        g => Array.from(g.querySelectorAll('text.legendtext'), t => t.textContent))""")
    assert [len(g) for g in groups] == [5, 5]  # its title, 2 workers x 2 launches
    assert groups[0][0] == "rank 0" and groups[1][0] == "rank 1"
    assert "rank 0 / worker 1 (launch 2, 14:20:02)" in groups[0]
    assert all(t.startswith("rank 1 / worker") for t in groups[1][1:])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-workers.png"), full_page=True)
    # a click on a worker of rank 0 hides rank 0's workers, in every panel, and only them
    page.locator("#dataloader-workers .legend .groups").first.locator(".traces").nth(1) \
        .locator(".legendtoggle").click()
    # plotly waits out its double-click delay before it acts on a single click
    page.wait_for_function("document.getElementById('dataloader-workers').data"
                           ".some(t => t.visible === 'legendonly')", timeout=5_000)
    visible = page.evaluate("""() => {
        const out = {};
        for (const t of document.getElementById('dataloader-workers').data)
            (out[t.legendgroup] ??= new Set()).add(String(t.visible ?? true));
        return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v]]));
    }""")
    assert visible == {"vm/rank-0": ["legendonly"], "vm/rank-1": ["true"]}
    assert not requests, f"the page fetched from the network: {requests[:5]}"
    assert not errors, errors
    page.close()


@pytest.fixture(scope="module")
def cgroup_page_file(tmp_path_factory) -> Path:
    directory, _ = pod_run(tmp_path_factory.mktemp("cgroup"))
    return _report(tmp_path_factory, directory)


def test_cgroup_page_renders_with_its_limit_and_oom_kill_markers(cgroup_page_file, browser):
    page, errors, requests = _open_offline(browser, cgroup_page_file)
    charts, drawn = _drawn_charts(page)
    assert "cgroup-memory" in charts
    chart = next(c for c in drawn if c["id"] == "cgroup-memory")
    assert chart["height"] > 300 and chart["drawn"] >= chart["traces"] * 0.5, chart
    names = page.evaluate("() => document.getElementById('cgroup-memory').data"
                          ".map(t => t.name)")
    for name in ("usage", "working_set", "limit", "high", "OOM kill", "anon", "file",
                 "pressure some"):
        assert name in names, name
    # the OOM-kill markers are on the page as drawn points
    assert page.evaluate("""() => document.querySelectorAll(
        '#cgroup-memory .scatterlayer .trace .points path').length""") >= 2
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-cgroup.png"), full_page=True)
    assert not requests, f"the page fetched from the network: {requests[:5]}"
    assert not errors, errors
    page.close()


@pytest.fixture(scope="module")
def day_page_file(tmp_path_factory) -> Path:
    """The page of a synthetic day: 8 ranks exporting the census every 10 s for 24 h (about
    350 MB of metrics, templated from a real export: `benchmarks/telemetry_day`). The files
    are deleted once the page is written."""
    spec = importlib.util.spec_from_file_location(
        "telemetry_day", REPO / "benchmarks" / "telemetry_day" / "__init__.py")
    day = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(day)
    directory = tmp_path_factory.mktemp("day")
    try:
        day.write_day(directory, day.template_batch(), hours=24, ranks=8)
        page = _report(tmp_path_factory, directory)
    finally:
        shutil.rmtree(directory)
    return page


def test_the_page_of_a_day_of_eight_ranks_loads_and_plots(day_page_file, browser):
    assert day_page_file.stat().st_size <= 10_000_000
    page, errors, requests = _open_offline(browser, day_page_file)
    charts, drawn = _drawn_charts(page)
    assert charts[0] == "census-process"
    for chart in drawn:
        assert chart["traces"] > 0 and chart["drawn"] >= chart["traces"] * 0.5, chart
    # every rank's anonymous memory drawn over the whole day, downsampled
    lines = page.evaluate("""() => document.getElementById('census-process').data
        .filter(t => t.type === 'scatter' && t.hovertemplate.includes('memory.anonymous'))
        .map(t => ({name: t.name, n: t.x.length, first: t.x[0], last: t.x[t.x.length - 1]}))""")
    assert sorted(line["name"] for line in lines) == [f"rank {r}" for r in range(8)]
    for line in lines:
        assert 100 < line["n"] < 24 * 360 / 3, line
        assert line["last"] - line["first"] > 23.9 * 3600 * 1000, line  # ms: the whole day
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-day.png"), full_page=False)
    assert not requests, f"the page fetched from the network: {requests[:5]}"
    assert not errors, errors
    page.close()
