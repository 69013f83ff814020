"""The HTML page: a header that says what was read and what was skipped, one section per
chart, the last step records and the warnings logged, with plotly.js inline so it opens
offline."""

from __future__ import annotations

import time
from pathlib import Path

from ...census import CENSUS_ERRORS
from ._charts import CHART_IDS, PLOTTED_PREFIXES, charts
from ._format import duration, esc, human_bytes, when
from ._names import (HOST_NAME, LOCAL_RANK_ATTRIBUTE, RANK_ATTRIBUTE, RESTART_SPAN,
                     STEP_LOG_PREFIX, WORLD_SIZE_ATTRIBUTE, is_timeline_span)
from ._steplog import STEPLOG_TABLE_ID, steplog_table
from ._telemetry import Telemetry

__all__ = ["build_html"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       background: #f6f7f9; color: #1b1f24; }
main { max-width: 1280px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 24px; margin: 8px 0 12px; }
h2 { font-size: 18px; margin: 0 0 4px; }
section { background: white; border: 1px solid #dde1e6; border-radius: 8px; padding: 14px 16px;
          margin: 18px 0; }
table.summary { border-collapse: collapse; font-size: 14px; }
table.summary th { text-align: left; vertical-align: top; padding: 4px 16px 4px 0;
                   color: #57606a; font-weight: 600; white-space: nowrap; }
table.summary td { padding: 4px 0; }
table.summary ul { margin: 4px 0; padding-left: 20px; }
.dim { color: #6e7781; }
.warn { color: #b35900; font-weight: 600; }
.note { font-size: 13px; color: #57606a; max-width: 1000px; }
nav { font-size: 14px; margin-top: 6px; }
nav a { color: #0969da; }
p.what { font-size: 13px; color: #57606a; margin: 0 0 6px; }
.scroll { overflow-x: auto; }
table.steps { border-collapse: collapse; font-size: 12px; font-variant-numeric: tabular-nums; }
table.steps th, table.steps td { border-bottom: 1px solid #eaeef2; padding: 3px 10px;
                                 text-align: right; white-space: nowrap; }
table.steps th:first-child { text-align: left; }
table.steps thead th { background: #f6f8fa; }
"""

# What each chart shows, under its title.
_WHAT = {
    "census-process": "Per-rank levels from /proc/self. The bottom lane shows the restart "
                      "spans on the same time axis; hover a bar for bytes mapped / touched.",
    "census-allocator": "The accelerator's host (pinned) allocator, as levels. `.current` "
                        "appears once `.freed` has moved.",
    "census-rates": "Monotonic counters turned into per-second rates between consecutive "
                    "exports; a gap marks a new process.",
    "census-node": "Observed once per host (by local rank 0).",
    "restart-bytes": f"One group per restart and rank (`{RESTART_SPAN}`): a mapped load "
                     "touches only what the catch-up read; an eager load reads the whole file "
                     "into anonymous memory.",
    "steplog-memory": f"The {STEP_LOG_PREFIX}* levels the trainer wrote into its step log "
                      "(running totals are in the table below).",
}

# Log records from this severity up (WARN) are listed on the page.
_WARN = 13
# How many corrupt lines and not-plotted names the header lists (the counts are complete).
_LISTED_BAD_LINES = 20
_LISTED_NOT_PLOTTED = 30


def build_html(data: Telemetry) -> tuple[str, list[str]]:
    """(the page, the chart div ids drawn)."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    drawn = charts(data)
    chart_ids = [chart_id for chart_id, _ in drawn]
    sections = []
    for chart_id, fig in drawn:
        div = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=chart_id,
                          config={"displaylogo": False, "responsive": True})
        sections.append(f"<section class=chart><h2>{esc(CHART_IDS[chart_id])}</h2>"
                        f"<p class=what>{esc(_WHAT.get(chart_id, ''))}</p>{div}</section>")
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    page = (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='generator' content='yeto-otel report'>"
        f"<title>yeto-otel report — {esc(data.directory.name)}</title>"
        f"<style>{_CSS}</style>"
        # plotly.js inline (what include_plotlyjs=True writes), once for all charts: offline.
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
        f"<script>{get_plotlyjs()}</script>"
        f"</head><body data-charts='{' '.join(chart_ids)}'><main>"
        f"{_header(data, chart_ids)}{''.join(sections)}{steplog_table(data)}"
        f"{_log_section(data)}<p class=dim>Generated {generated} by yeto-otel report.</p>"
        "</main></body></html>\n")
    return page, chart_ids


# --- the header ----------------------------------------------------------------------------


def _header(data: Telemetry, chart_ids: list[str]) -> str:
    rows = [("Ranks", _ranks(data))]
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
            f"exports. One colour per rank in every chart; shaded bands are restart windows "
            f"(<code>{RESTART_SPAN}</code>). Times are UTC.</p>"
            f"<nav>{toc}</nav></header>")


def _ranks(data: Telemetry) -> str:
    """Every rank with where it ran, from its resource attributes."""
    instances = data.instances()
    if not instances:
        return "none (no metrics or spans)"
    items = []
    for inst in instances:
        res = data.resources.get(inst, {})
        bits = [f"{label} {res[key]}" for label, key in (
            ("host", HOST_NAME), ("rank", RANK_ATTRIBUTE), ("local rank", LOCAL_RANK_ATTRIBUTE),
            ("of", WORLD_SIZE_ATTRIBUTE)) if key in res]
        items.append(f"<code>{esc(inst)}</code> <span class=dim>{esc(', '.join(bits))}</span>")
    return f"{len(instances)}: " + "; ".join(items)


def _files(data: Telemetry) -> str:
    counts = []
    listing = []
    for signal, paths in data.files.items():
        if paths:
            counts.append(f"{len(paths)} {signal}")
            for p in paths:
                listing.append(f"<li><code>{esc(p.name)}</code> "
                               f"<span class=dim>{data.lines.get(p, 0)} lines read, "
                               f"{human_bytes(_size(p))}</span></li>")
    return (", ".join(counts) + f" in <code>{esc(data.directory)}</code>"
            f"<details><summary>list</summary><ul>{''.join(listing)}</ul></details>")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _found(data: Telemetry) -> str:
    restarts = [(i, s) for i, s in data.spans if s.name == RESTART_SPAN]
    points = sum(len(s.points) for s in data.series.values())
    return (f"{points:,} metric points in {len(data.series)} series; "
            f"{len(data.spans)} spans ({len(restarts)} restarts on "
            f"{len({i for i, _ in restarts})} ranks); {len(data.logs)} log records; "
            f"{len(data.steps)} step records")


def _skipped(data: Telemetry) -> str:
    skipped = []
    if data.bad_lines:
        bad = data.bad_lines
        first = "".join(f"<li><code>{esc(b)}</code></li>" for b in bad[:_LISTED_BAD_LINES])
        more = (f"<li>… and {len(bad) - _LISTED_BAD_LINES} more</li>"
                if len(bad) > _LISTED_BAD_LINES else "")
        skipped.append(f"<span class=warn>{len(bad)} corrupt "
                       f"line{'s' if len(bad) != 1 else ''} skipped</span>"
                       f"<ul>{first}{more}</ul>")
    if data.empty_files:
        skipped.append(f"{len(data.empty_files)} empty file(s): " +
                       ", ".join(f"<code>{esc(p.name)}</code>" for p in data.empty_files))
    if data.unreadable:
        skipped.append("<span class=warn>unreadable:</span> " +
                       ", ".join(esc(u) for u in data.unreadable))
    not_plotted = _not_plotted(data)
    if not_plotted:
        skipped.append("not plotted: " + ", ".join(
            f"{esc(k)} ×{v}" for k, v in sorted(not_plotted.items())[:_LISTED_NOT_PLOTTED]))
    return "<br>".join(skipped) if skipped else "nothing"


def _not_plotted(data: Telemetry) -> dict[str, int]:
    """What was read but is in no chart: other metrics (by points) and spans (by count)."""
    found = dict(data.not_plotted)
    for s in data.series.values():
        if not s.metric.startswith(PLOTTED_PREFIXES):
            found[f"metric {s.metric}"] = found.get(f"metric {s.metric}", 0) + len(s.points)
    for _, span in data.spans:
        if not is_timeline_span(span.name):
            found[f"span {span.name}"] = found.get(f"span {span.name}", 0) + 1
    return found


# --- the log records -----------------------------------------------------------------------


def _log_section(data: Telemetry, last: int = 50) -> str:
    worth = [(i, r) for i, r in data.logs if r.severity_number >= _WARN]
    if not worth:
        return ""
    rows = "".join(f"<tr><td>{when(r.time_ns)[:23]}</td><td>{esc(i)}</td>"
                   f"<td>{esc(r.severity or r.severity_number)}</td><td>{esc(r.body)[:300]}</td>"
                   f"</tr>" for i, r in sorted(worth, key=lambda x: x[1].time_ns)[-last:])
    return (f"<section id='log-records'><h2>Warnings and errors logged ({len(worth)})</h2>"
            f"<div class=scroll><table class=steps><thead><tr><th>time (UTC)</th><th>rank</th>"
            f"<th>severity</th><th>message</th></tr></thead><tbody>{rows}</tbody></table>"
            f"</div></section>")
