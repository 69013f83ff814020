"""The page's header: the ranks with their launches, the DataLoader workers counted per rank,
the time range, the files read, what was found, and what was skipped (corrupt lines, unreadable
files, what no chart draws). An empty file is not skipped data: a process that had nothing of
a signal (a worker without spans, a rank without warnings) leaves one, so they are only
counted beside the files."""

from __future__ import annotations

from pathlib import Path

from ...census import CENSUS_ERRORS
from ...names import RESUME_METRICS
from ._cgroups import MAX_CGROUPS, drawn_cgroup_series
from ._charts import CHART_IDS, PLOTTED_PREFIXES
from ._format import LAUNCH_GLYPHS, clock, duration, esc, human_bytes, when
from ._names import (HOST_NAME, JOB_ATTRIBUTE, LOCAL_RANK_ATTRIBUTE, RANK_ATTRIBUTE, RESTART_SPAN,
                     WORLD_SIZE_ATTRIBUTE, is_timeline_span)
from ._roster import Launch, Roster
from ._steplog_table import STEPLOG_TABLE_ID
from ._telemetry import Telemetry

__all__ = ["header", "skipped_records"]

# How many corrupt lines and not-plotted names the header lists (the counts are complete).
_LISTED_BAD_LINES = 20
_LISTED_NOT_PLOTTED = 30
# Metrics no census chart draws that the page still shows: the resume gauges hold the bytes
# mapped / touched the restart chart draws from the restart spans.
SHOWN_ELSEWHERE = frozenset(m.name for m in RESUME_METRICS)


def header(data: Telemetry, roster: Roster, chart_ids: list[str]) -> str:
    rows = [("Ranks", _ranks(data, roster))]
    if roster.parent:
        rows.append(("DataLoader workers", _workers(roster)))
    span_range = data.time_range()
    if span_range:
        rows.append(("Time range", f"{when(span_range[0])[:19]} → {when(span_range[1])[:19]} "
                                   f"UTC ({duration(span_range[1] - span_range[0])})"))
    rows += [("Files", _files(data)), ("Found", _found(data)), ("Skipped", _skipped(data))]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    toc = " · ".join(f"<a href='#{c}'>{esc(CHART_IDS[c].split(',')[0])}</a>" for c in chart_ids)
    if data.steps:
        toc += f" · <a href='#{STEPLOG_TABLE_ID}'>Last step records</a>"
    return (f"<header><h1>yeto-otel report</h1><table class=summary>{table}</table>"
            f"<p class=note>Gauges and high-water marks are plotted as values; running totals "
            f"(<code>*.allocated</code>, <code>*.freed</code>, <code>num_host_*</code>, "
            f"<code>{CENSUS_ERRORS.name}</code>) as rates per second between consecutive "
            f"exports. One colour per rank in every chart: a rank's later launches (restarts) "
            f"keep it, with a legend entry and a marker of their own "
            f"({', '.join(f'launch {n} {g}' for n, g in enumerate(LAUNCH_GLYPHS[:3], 1))}); "
            f"its DataLoader workers are shades of it, in a chart of their own. Shaded bands "
            f"are restart windows (<code>{RESTART_SPAN}</code>). Times are UTC.</p>"
            f"<nav>{toc}</nav></header>")


def _launch_text(launch: Launch) -> str:
    glyph = LAUNCH_GLYPHS[(launch.number - 1) % len(LAUNCH_GLYPHS)]
    pid = f" pid {launch.pid}" if launch.pid else ""
    return f"{glyph} {launch.number}: {clock(launch.started_ns)}{pid}"


def _ranks(data: Telemetry, roster: Roster) -> str:
    """Every rank (and process without RANK) with where it ran, from its resource attributes,
    and its launches when it had more than one."""
    if not roster.ranks:
        return "none (no metrics or spans)"
    items = []
    for rank in roster.ranks:
        res = data.resources.get(rank)
        bits = [f"{label} {res[key]}" for label, key in (
            ("job", JOB_ATTRIBUTE), ("host", HOST_NAME), ("rank", RANK_ATTRIBUTE),
            ("local rank", LOCAL_RANK_ATTRIBUTE), ("of", WORLD_SIZE_ATTRIBUTE)) if key in res] if res is not None else \
            ["no files of its own (its workers reported)"]
        launches = roster.launches(rank)
        if len(launches) > 1:
            bits.append(f"{len(launches)} launches (" +
                        ", ".join(_launch_text(launch) for launch in launches) + ")")
        if roster.workers[rank]:
            bits.append(f"{len(roster.workers[rank])} DataLoader worker(s)")
        items.append(f"<code>{esc(rank)}</code> <span class=dim>{esc(', '.join(bits))}</span>")
    return f"{len(roster.ranks)}: " + "; ".join(items)


def _workers(roster: Roster) -> str:
    """The workers of each rank, with how many processes each had (one per epoch unless the
    loader keeps its workers)."""
    items = []
    total = processes = 0
    for rank, workers in roster.workers.items():
        if not workers:
            continue
        prefix = len(roster.label(rank)) + len(" / ")
        slots = ", ".join(f"{esc(roster.label(w)[prefix:])} ×{roster.processes(w)}"
                          for w in workers)
        items.append(f"{esc(roster.label(rank))}: {len(workers)} ({slots})")
        total += len(workers)
        processes += sum(roster.processes(w) for w in workers)
    return (f"{total} ({processes} processes: ×n = one process per epoch) — " +
            "; ".join(items) + "<br><span class=dim>Drawn apart from their ranks: a forked "
            "worker's RSS and anonymous memory count pages it still shares with its rank, so "
            "they are never added to or compared with the rank's.</span>")


def _files(data: Telemetry) -> str:
    counts = []
    listing = []
    empty = set(data.empty_files)
    for signal, paths in data.files.items():
        if paths:
            counts.append(f"{len(paths)} {signal}")
            for p in paths:
                read = "empty" if p in empty else f"{data.lines.get(p, 0)} lines read"
                listing.append(f"<li><code>{esc(p.name)}</code> "
                               f"<span class=dim>{read}, {human_bytes(_size(p))}</span></li>")
    note = (f" <span class=dim>({len(empty)} empty file(s): a process with nothing of that "
            f"signal)</span>" if empty else "")
    return (", ".join(counts) + f" in <code>{esc(data.directory)}</code>{note}"
            f"<details><summary>list</summary><ul>{''.join(listing)}</ul></details>")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _found(data: Telemetry) -> str:
    restarts = [(i, s) for i, s in data.spans if s.name == RESTART_SPAN]
    points = sum(s.read or len(s.points) for s in data.series.values())
    return (f"{points:,} metric points in {len(data.series)} series; "
            f"{len(data.spans)} spans ({len(restarts)} restarts on "
            f"{len({i for i, _ in restarts})} ranks); {len(data.logs)} log records; "
            f"{len(data.steps)} step records")


def _skipped(data: Telemetry) -> str:
    skipped = []
    if data.bad_lines:
        bad, count = data.bad_lines, data.bad_line_count
        first = "".join(f"<li><code>{esc(b)}</code></li>" for b in bad[:_LISTED_BAD_LINES])
        more = (f"<li>… and {count - _LISTED_BAD_LINES} more</li>"
                if count > _LISTED_BAD_LINES else "")
        skipped.append(f"<span class=warn>{count} corrupt "
                       f"line{'s' if count != 1 else ''} skipped</span>"
                       f"<ul>{first}{more}</ul>")
    skipped += [f"<span class=warn>{esc(line)}</span>" for line in skipped_records(data)]
    if data.unreadable:
        skipped.append("<span class=warn>unreadable:</span> " +
                       ", ".join(esc(u) for u in data.unreadable))
    not_plotted = _not_plotted(data)
    if not_plotted:
        skipped.append("not plotted: " + ", ".join(
            f"{esc(k)} ×{v}" for k, v in sorted(not_plotted.items())[:_LISTED_NOT_PLOTTED]))
    return "<br>".join(skipped) if skipped else "nothing"


def skipped_records(data: Telemetry) -> list[str]:
    """One line per reason a record (a point, a span, a step record) was skipped for a bad
    value: `3 metric points skipped: asInt is outside the 64-bit integer range (first at
    metrics-x.jsonl:2)`."""
    lines = []
    for reason, (count, first) in sorted(data.skipped.items()):
        what, _, why = reason.partition(": ")
        lines.append(f"{count} {what}{'s' if count != 1 else ''} skipped: {why} "
                     f"(first at {first})")
    return lines


def _not_plotted(data: Telemetry) -> dict[str, int]:
    """What was read but is in no chart: other metrics (by points) and spans (by count)."""
    found = dict(data.not_plotted)
    cgroup_series, cgroups_left_out = drawn_cgroup_series(data)
    # a metric the page draws part of (one event of several) is listed with its attributes
    in_part = {s.metric for s in data.series.values() if id(s) in cgroup_series}
    for s in data.series.values():
        if s.metric.startswith(PLOTTED_PREFIXES) or s.metric in SHOWN_ELSEWHERE or \
                id(s) in cgroup_series:
            continue
        what = f"metric {s.label if s.metric in in_part else s.metric}"
        found[what] = found.get(what, 0) + (s.read or len(s.points))
    if cgroups_left_out:
        found[f"memory cgroups past the first {MAX_CGROUPS}"] = cgroups_left_out
    for _, span in data.spans:
        if not is_timeline_span(span.name):
            found[f"span {span.name}"] = found.get(f"span {span.name}", 0) + 1
    return found
