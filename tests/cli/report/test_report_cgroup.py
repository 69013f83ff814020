"""The report draws the memory cgroup: one line per cgroup (host and path) whichever rank
observed it, usage and working set against the limit and high (none drawn when unlimited),
anon vs file, pressure, and OOM kills as markers where the count rose, a kill of the observing
rank itself included. The input is what the real census writes (`cgroup_runs`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cgroup_runs import POD, SLURM, Rank, pod_run, tree_copy
from report_testkit import plotly_or_skip

from yeto_otel.census import (CGROUP_EVENTS, CGROUP_INFO, CGROUP_LIMIT, CGROUP_PRESSURE,
                              CGROUP_USAGE)
from yeto_otel.cli.report import build_html, charts, load_telemetry
from yeto_otel.cli.report._cgroup_chart import OOM_KILL_TRACE
from yeto_otel.cli.report._cgroups import MAX_CGROUPS
from yeto_otel.proc import UNLIMITED_FROM


def panels(fig) -> dict[str, list]:
    """subplot title -> the traces drawn in it."""
    titles = [a.text for a in fig.layout.annotations if a.yref == "paper"]
    found: dict[str, list] = {t: [] for t in titles}
    for trace in fig.data:
        row = int(trace.yaxis[1:] or 1)
        found[titles[row - 1]].append(trace)
    return found


def cgroup_figure(directory: Path):
    drawn = dict(charts(load_telemetry(directory)))
    assert "cgroup-memory" in drawn
    return drawn["cgroup-memory"]


def trace(panel: list, name: str):
    found = [t for t in panel if t.name == name]
    assert len(found) == 1, (name, [t.name for t in panel])
    return found[0]


def in_window(x_ms: int, window: tuple[int, int]) -> bool:
    return window[0] // 1_000_000 <= x_ms <= window[1] // 1_000_000


@pytest.fixture(name="pod_run")
def pod_run_fixture(tmp_path):
    """Rank 0 of a pod observes its cgroup, is OOM-killed, rank 1 takes over and later sees a
    sibling killed."""
    plotly_or_skip()
    return pod_run(tmp_path)


def test_a_takeover_continues_the_cgroup_line_and_each_kill_is_a_marker(pod_run):
    directory, times = pod_run
    fig = cgroup_figure(directory)
    found = panels(fig)
    usage_title = next(t for t in found if t.startswith(f"h1 …{POD[-47:]}: usage"))
    usage = trace(found[usage_title], "usage")
    # one line for the cgroup, read by both ranks in turn, without a break at the takeover
    assert None not in usage.y
    assert set(usage.customdata) == {"h1/rank-0", "h1/rank-1"}
    assert list(usage.customdata).index("h1/rank-1") > len(usage.customdata) // 3
    assert max(usage.y) == 13.0 and 9.0 in usage.y  # GiB
    assert not [t for t in fig.data if t.name == "usage" and t is not usage]
    # the limit and high as dashed lines at their values
    limit, high = trace(found[usage_title], "limit"), trace(found[usage_title], "high")
    assert set(limit.y) == {16.0} and limit.line.dash == "dash"
    assert set(high.y) == {15.0} and high.line.dash == "dash"
    assert trace(found[usage_title], "working_set").y
    # OOM kills: the one that took the observer, seen when rank 1 took over, and the next
    kills = trace(found[usage_title], OOM_KILL_TRACE)
    assert len(kills.x) == 2
    assert in_window(kills.x[0], times["takeover"])
    assert in_window(kills.x[1], times["second kill"])
    assert kills.text[0].startswith("+1 OOM kill (total 2), first read by h1/rank-1")
    assert "2 OOM kills (+1 before the first read)" in usage_title
    # anon vs file, and pressure (v2) as seconds stalled per second
    kinds = next(p for t, p in found.items() if t.startswith(f"h1 …{POD[-47:]}: anon vs file"))
    assert {t.name for t in kinds} == {"anon", "file", "shmem", "file_mapped"}
    pressure = next(p for t, p in found.items() if "pressure" in t)
    assert {t.name for t in pressure} == {"pressure some", "pressure full"}


def test_the_page_lists_as_not_plotted_only_what_it_does_not_draw(pod_run):
    directory, _ = pod_run
    page, chart_ids = build_html(load_telemetry(directory))
    assert "cgroup-memory" in chart_ids
    header = page[page.index("<header>"):page.index("</header>")]
    not_plotted = header[header.index("not plotted"):]
    for drawn in ("yeto.cgroup.memory.usage ", "yeto.cgroup.memory.limit ",
                  "yeto.cgroup.memory.pressure", f"{CGROUP_INFO.name} ",
                  "event=oom_kill"):
        assert drawn not in not_plotted, drawn
    # the other events are not drawn: listed with their attributes
    assert f"{CGROUP_EVENTS.name} (event=max)" in not_plotted
    # the OpenTelemetry names of the process metrics are not drawn either
    assert "process.memory.virtual" in not_plotted


def test_an_unlimited_cgroup_has_no_limit_drawn_and_says_so(tmp_path):
    """v1 (the hybrid layout of these machines) without a limit: the census exports none; a
    producer that exports v1's "unlimited" number anyway gets no line drawn either."""
    plotly_or_skip()
    directory = tmp_path / "telemetry"
    directory.mkdir()
    (tmp_path / "locks").mkdir()
    rank = Rank(directory, tree_copy(tmp_path, "v1_hybrid", "h2"), tmp_path / "locks", "h2", 0)
    for _ in range(3):
        rank.collect()
    rank.die()
    found = panels(cgroup_figure(directory))
    title = next(t for t in found if t.startswith(f"h2 {SLURM}: usage"))
    assert "no limit (unlimited): none drawn" in title
    assert "limit" not in {t.name for t in found[title]}
    assert set(trace(found[title], "usage").y) == {35.2422}  # MiB: 36954112 bytes

    # the same run with v1's PAGE_COUNTER_MAX exported as a limit
    path = next(directory.glob("metrics-*.jsonl"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for batch in lines:
        metrics = batch["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        usage = next(m for m in metrics if m["name"] == CGROUP_USAGE.name)
        limit = json.loads(json.dumps(usage))
        limit["name"] = CGROUP_LIMIT.name
        limit["sum"]["dataPoints"][0]["asInt"] = str(9223372036854771712)
        assert int(limit["sum"]["dataPoints"][0]["asInt"]) >= UNLIMITED_FROM
        metrics.append(limit)
    path.write_text("".join(json.dumps(b) + "\n" for b in lines))
    found = panels(cgroup_figure(directory))
    title = next(t for t in found if t.startswith(f"h2 {SLURM}: usage"))
    assert "no limit (unlimited)" in title and "limit" not in {t.name for t in found[title]}


def test_cgroups_of_two_hosts_with_one_path_are_two_cgroups(tmp_path):
    """Slurm gives every host's step the same path: the host tells them apart."""
    plotly_or_skip()
    directory = tmp_path / "telemetry"
    directory.mkdir()
    for host in ("a", "b"):
        (tmp_path / f"locks-{host}").mkdir()
        rank = Rank(directory, tree_copy(tmp_path, "v1_hybrid", host), tmp_path / f"locks-{host}",
                    host, 0 if host == "a" else 8)
        rank.collect()
        rank.collect()
        rank.die()
    found = panels(cgroup_figure(directory))
    assert sum(1 for t in found if t.endswith("usage, working set, peak vs limit, high"
                                              " — no limit (unlimited): none drawn")) == 2
    assert {t.split(" ", 1)[0] for t in found} == {"a", "b"}
    assert not any(CGROUP_PRESSURE.name in t for t in found)  # v1: no pressure panel


def test_the_page_draws_at_most_max_cgroups_and_lists_the_rest(tmp_path):
    """A page stays bounded on a large job: the first `MAX_CGROUPS` cgroups (those with OOM
    kills first) are drawn, the others listed as not plotted."""
    plotly_or_skip()
    directory = tmp_path / "telemetry"
    directory.mkdir()
    hosts = [f"node{n:02d}" for n in range(MAX_CGROUPS + 1)]
    for n, host in enumerate(hosts):
        (tmp_path / f"locks-{host}").mkdir()
        rank = Rank(directory, tree_copy(tmp_path, "v1_hybrid", host),
                    tmp_path / f"locks-{host}", host, n)
        rank.collect()
        rank.die()
    data = load_telemetry(directory)
    found = panels(dict(charts(data))["cgroup-memory"])
    assert len({t.split(" ", 1)[0] for t in found}) == MAX_CGROUPS
    page, _ = build_html(data)
    header = page[page.index("<header>"):page.index("</header>")]
    assert f"memory cgroups past the first {MAX_CGROUPS} ×1" in header
