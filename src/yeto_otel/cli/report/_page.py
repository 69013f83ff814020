"""The HTML page: a header that says what was read and what was skipped, one section per
chart, the last step records and the warnings logged, with plotly.js inline so it opens
offline."""

from __future__ import annotations

import time

from ._charts import CHART_IDS, charts
from ._format import LAUNCH_GLYPHS, esc, when
from ._header import SHOWN_ELSEWHERE, header
from ._names import RESTART_SPAN, STEP_LOG_PREFIX
from ._roster import Roster
from ._steplog_table import steplog_table
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
details.steps { margin: 8px 0; }
details.steps summary { cursor: pointer; font-size: 14px; margin-bottom: 4px; }
"""

# What each chart shows, under its title.
_LAUNCHES = ", ".join(f"launch {n} {g}" for n, g in enumerate(LAUNCH_GLYPHS[:3], start=1))
_WHAT = {
    "census-process": "Per-rank levels from /proc/self, ranks only (their DataLoader workers "
                      "are in the next chart). A restarted rank's launches keep its colour, "
                      f"each with its own legend entry and marker ({_LAUNCHES}). The bottom "
                      "lane shows the restart and checkpoint-load spans on the same time axis "
                      "(a worker's torch.load on a lane under its rank); hover a bar for bytes mapped / "
                      "touched.",
    "dataloader-workers": "Each DataLoader worker in a shade of its rank's colour, the legend "
                          "grouped by rank (a click hides that rank's workers). A worker slot "
                          "is one line across epochs: each epoch's worker process is a "
                          "segment, the gaps are between processes. Private dirty is what a "
                          "worker owns (its copy-on-read growth); its RSS and anonymous "
                          "memory include pages still shared with its rank, so never add "
                          "them to the rank's.",
    "census-allocator": "The accelerator's host (pinned) allocator, as levels. `.current` "
                        "appears once `.freed` has moved.",
    "census-rates": "Monotonic counters turned into per-second rates between consecutive "
                    "exports; a gap marks a new process.",
    "census-node": "Observed once per host (by local rank 0).",
    "cgroup-memory": "The memory cgroup is what OOM-kills a rank, long before the node runs "
                     "out. One process per cgroup observes it and another takes over when it "
                     "exits, so each cgroup (host and path) is one line whichever rank read it "
                     "(hover a point for which). Limit and high are dashed; a cgroup without "
                     "a limit has none drawn. ✕ marks where the OOM-kill count rose (the "
                     "count is diffed, never drawn as a level), on the first read that showed "
                     "it: a kill of the observing rank itself shows when the next one takes "
                     "over.",
    "restart-bytes": f"One group per restart and rank (`{RESTART_SPAN}`) and per checkpoint "
                     "load or save of a rank (safetensors, DCP, a torch.load outside a "
                     "restart; the bar pattern and the legend group say which): a mapped load touches only "
                     "what was read; an eager load reads the whole file into anonymous "
                     "memory. A bar is missing where the span has no such number (DCP maps "
                     "nothing; a torch.load measures no touched bytes). DataLoader workers' "
                     "loads are on the timeline only. The gauges "
                     f"{' and '.join(f'`{n}`' for n in sorted(SHOWN_ELSEWHERE))} hold the same "
                     "bytes mapped / touched (the last resume of each process): they are "
                     "shown here, not drawn again.",
    "steplog-memory": f"The {STEP_LOG_PREFIX}* levels the trainer wrote into its step log, "
                      "one line per key and step-log file (running totals are in the tables "
                      "below).",
}

# Log records from this severity up (WARN) are listed on the page.
_WARN = 13


def build_html(data: Telemetry) -> tuple[str, list[str]]:
    """(the page, the chart div ids drawn)."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    roster = Roster(data)
    drawn = charts(data, roster)
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
        f"{header(data, roster, chart_ids)}{''.join(sections)}{steplog_table(data, roster)}"
        f"{_log_section(data, roster)}<p class=dim>Generated {generated} by yeto-otel report.</p>"
        "</main></body></html>\n")
    return page, chart_ids


# --- the log records -----------------------------------------------------------------------


def _log_section(data: Telemetry, roster: Roster, last: int = 50) -> str:
    worth = [(i, r) for i, r in data.logs if r.severity_number >= _WARN]
    if not worth:
        return ""
    rows = "".join(f"<tr><td>{when(r.time_ns)[:23]}</td><td>{esc(roster.label(i))}</td>"
                   f"<td>{esc(r.severity or r.severity_number)}</td><td>{esc(r.body)[:300]}</td>"
                   f"</tr>" for i, r in sorted(worth, key=lambda x: x[1].time_ns)[-last:])
    return (f"<section id='log-records'><h2>Warnings and errors logged ({len(worth)})</h2>"
            f"<div class=scroll><table class=steps><thead><tr><th>time (UTC)</th><th>rank</th>"
            f"<th>severity</th><th>message</th></tr></thead><tbody>{rows}</tbody></table>"
            f"</div></section>")
