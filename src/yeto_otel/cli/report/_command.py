"""`yeto-otel report DIR [-o FILE]`: one self-contained HTML page from the local telemetry files.

Reads what the embedded default writes into YETO_OTEL_LOCAL_DIR (see `local_files`):

    traces-*.jsonl, metrics-*.jsonl, logs-*.jsonl   one OTLP JSON export batch per line,
                                                    one set of files per process (rank)
    steplog-*.jsonl                                 a trainer's step log, one record per line

and draws, with plotly (imported only here; plotly.js is embedded, so the page opens offline):

- the census over time, one trace per rank (`service.instance.id`): gauges and high-water
  marks as values, running totals as rates per second, node metrics in their own chart;
- the restart spans (`yeto.resume.anchors`, `.load`, `torch.load`, `demo.*`) on the same time
  axis, with fragment_done events, and bytes mapped vs touched per restart and rank;
- the step log: the host_mem.* levels over step and a table of the last records.

Corrupt lines are skipped and counted (on the page and in a warning); a directory with nothing
usable is an error, as are a missing directory and an unwritable output.
"""

from __future__ import annotations

import argparse
import html
import math
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ... import names as span_table
from ...census import CENSUS, CENSUS_ERRORS
from ...errors import UserFacingError
from ...otel import (CUMULATIVE, DELTA, BadBatch, BadLine, LogRecord, Span, log_records,
                        metric_points, read_json_lines, spans)
from ...census import Kind
from ...units import format_bytes

__all__ = ["CHART_IDS", "Point", "Series", "Telemetry", "add_arguments", "build_html",
           "load_telemetry", "plotted", "rates", "run"]

PATTERNS = {"metrics": "metrics-*.jsonl", "traces": "traces-*.jsonl", "logs": "logs-*.jsonl",
            "steplog": "steplog-*.jsonl"}

# Every chart the page can have, in page order: (div id, title). A chart without data is left
# out, and the page lists the ids it drew in <body data-charts="...">.
CHART_IDS = {
    "census-process": "Process memory per rank, with the restart spans",
    "census-allocator": "Host (pinned) allocator levels per rank",
    "census-rates": "Running totals as rates per second, per rank",
    "census-node": "Node memory",
    "restart-bytes": "Restarts: anchor bytes mapped vs touched, per rank",
    "steplog-memory": "Step log: host memory over step",
}
STEPLOG_TABLE_ID = "steplog-table"

RESTART_SPAN = span_table.RESUME_ANCHORS.name
TIMELINE_SPANS = (RESTART_SPAN, span_table.RESUME_ANCHORS_LOAD.name, span_table.TORCH_LOAD.name)
FRAGMENT_EVENT = span_table.FRAGMENT_DONE.name

_KIND_OF = {m.name: m.kind for m in CENSUS + (CENSUS_ERRORS,)}
_DESCRIPTION = {m.name: m.description for m in CENSUS + (CENSUS_ERRORS,)}
_STEP_KEYS = {m.step_log_key: m for m in CENSUS if m.step_log_key}

_RANK_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf")
_SPAN_COLORS = dict(zip(TIMELINE_SPANS, ("#9ecae1", "#3182bd", "#08519c")))
_OTHER_SPAN_COLORS = ("#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2")
_DASHES = ("solid", "dot", "dash", "dashdot", "longdash", "longdashdot")
_LEGEND_WIDTH = 250


# --- the data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    start_ns: int
    time_ns: int
    value: float
    source: str = ""  # the file (process) it came from: a new one starts a new line segment


@dataclass
class Series:
    """One metric stream of one rank: (instance, metric, data point attributes)."""
    instance: str
    metric: str
    attributes: tuple
    kind: Kind
    unit: str
    temporality: int = CUMULATIVE
    points: list[Point] = field(default_factory=list)

    @property
    def label(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.attributes)
        return f"{self.metric} ({extra})" if extra else self.metric


def kind_of(name: str, shape: str, monotonic: bool) -> Kind:
    """What a metric is, from what was exported: a monotonic sum is a running total (rated);
    anything else is a level, a high-water mark where the census table says so."""
    if shape == "sum" and monotonic:
        return Kind.RUNNING_TOTAL
    kind = _KIND_OF.get(name, Kind.GAUGE)
    return Kind.GAUGE if kind is Kind.RUNNING_TOTAL else kind


def rates(series: Series) -> list[tuple[int, float | None]]:
    """(time, per-second rate) of a running total, one per interval between consecutive points
    of one process (cumulative), or per point (delta temporality). A reset (another process, a
    new start time, a value that went back) gives (time, None): a gap in the line.

    A gauge or a high-water mark has no rate: asking for one raises TypeError."""
    if series.kind is not Kind.RUNNING_TOTAL:
        raise TypeError(f"{series.metric} is a {series.kind.value}, not a running total: "
                        "it is plotted as values, never as a rate")
    points = sorted(series.points, key=lambda p: p.time_ns)
    out: list[tuple[int, float | None]] = []
    if series.temporality == DELTA:
        for p in points:
            if p.time_ns > p.start_ns > 0:
                out.append((p.time_ns, p.value / ((p.time_ns - p.start_ns) / 1e9)))
        return out
    previous: Point | None = None
    for p in points:
        if previous is not None:
            same_process = (p.source == previous.source and p.start_ns == previous.start_ns
                            and p.value >= previous.value)
            if not same_process:
                out.append((p.time_ns, None))
            elif p.time_ns > previous.time_ns:
                out.append((p.time_ns, (p.value - previous.value) /
                            ((p.time_ns - previous.time_ns) / 1e9)))
        previous = p
    return out


def plotted(series: Series) -> list[tuple[int, float | None]]:
    """What the page draws for a series: rates for running totals, the values themselves for
    gauges and high-water marks (with a gap where another process of the rank takes over)."""
    if series.kind is Kind.RUNNING_TOTAL:
        return rates(series)
    out: list[tuple[int, float | None]] = []
    previous: Point | None = None
    for p in sorted(series.points, key=lambda p: p.time_ns):
        if previous is not None and p.source != previous.source:
            out.append((p.time_ns, None))
        out.append((p.time_ns, p.value))
        previous = p
    return out


@dataclass
class Telemetry:
    directory: Path
    files: dict[str, list[Path]]
    empty_files: list[Path] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    series: dict[tuple, Series] = field(default_factory=dict)
    resources: dict[str, dict] = field(default_factory=dict)  # instance -> resource attributes
    spans: list[tuple[str, Span]] = field(default_factory=list)  # (instance, span)
    logs: list[tuple[str, LogRecord]] = field(default_factory=list)
    steps: list[tuple[str, dict]] = field(default_factory=list)  # (file stem, record)
    not_plotted: dict[str, int] = field(default_factory=dict)  # what was read but not drawn
    lines: dict[Path, int] = field(default_factory=dict)  # usable lines per file

    @property
    def usable(self) -> bool:
        return bool(self.series or self.spans or self.steps)

    def instances(self) -> list[str]:
        found = set(self.resources)
        found.update(s.instance for s in self.series.values())
        found.update(i for i, _ in self.spans)
        return sorted(found, key=self._rank_order)

    def _rank_order(self, instance: str):
        rank = self.resources.get(instance, {}).get("yeto.rank")
        numbers = [int(n) for n in re.findall(r"\d+", instance)]
        return (0 if isinstance(rank, int) else 1, rank if isinstance(rank, int) else 0,
                re.sub(r"\d+", "", instance), numbers)

    def time_range(self) -> tuple[int, int] | None:
        times = [p.time_ns for s in self.series.values() for p in s.points]
        for _, span in self.spans:
            times += [span.start_ns, span.end_ns]
        times = [t for t in times if t > 0]
        return (min(times), max(times)) if times else None


def _instance(resource: dict, path: Path) -> str:
    found = resource.get("service.instance.id")
    if found:
        return str(found)
    stem = path.stem.split("-", 1)[-1]
    return str(resource.get("host.name") or stem)


def _read(path: Path, data: Telemetry) -> list[tuple[int, object]]:
    try:
        good, bad = read_json_lines(path)
    except OSError as exc:
        data.unreadable.append(f"{path.name}: {exc.strerror or exc}")
        return []
    data.bad_lines.extend(bad)
    if not good and not bad:
        data.empty_files.append(path)
    return good


_PARSE_ERRORS = (BadBatch, ValueError, TypeError, AttributeError, KeyError)


def _batches(data: "Telemetry", signal: str, parse):
    """(path, parse(batch)) for every line of the signal's files that parses; the others are
    recorded in `data.bad_lines` and skipped."""
    for path in data.files[signal]:
        for number, batch in _read(path, data):
            try:
                parsed = parse(batch)
            except _PARSE_ERRORS as exc:
                data.bad_lines.append(BadLine(path, number, f"not an OTLP {signal} batch: {exc}"))
                continue
            data.lines[path] = data.lines.get(path, 0) + 1
            yield path, parsed


def load_telemetry(directory: Path) -> Telemetry:
    """Read every telemetry file of `directory` (already checked to be a readable directory).
    Corrupt lines are collected in `bad_lines`, never raised."""
    try:
        files = {signal: sorted(directory.glob(pattern)) for signal, pattern in PATTERNS.items()}
    except OSError as exc:
        raise UserFacingError(f"cannot list {directory}: {exc.strerror or exc}") from None
    data = Telemetry(directory, {s: [p for p in f if p.is_file()] for s, f in files.items()})

    for path, (points, other) in _batches(data, "metrics", metric_points):
        for name in other:
            data.not_plotted[f"metric {name} (histogram or summary)"] = \
                data.not_plotted.get(f"metric {name} (histogram or summary)", 0) + 1
        for p in points:
            instance = _instance(p.resource, path)
            data.resources.setdefault(instance, p.resource)
            key = (instance, p.name, tuple(sorted((k, str(v)) for k, v in
                                                  p.attributes.items())))
            series = data.series.get(key)
            if series is None:
                series = data.series[key] = Series(
                    instance, p.name, key[2], kind_of(p.name, p.shape, p.monotonic), p.unit,
                    p.temporality or CUMULATIVE)
            series.points.append(Point(p.start_ns, p.time_ns, p.value, path.name))

    for path, found in _batches(data, "traces", spans):
        for span in found:
            instance = _instance(span.resource, path)
            data.resources.setdefault(instance, span.resource)
            data.spans.append((instance, span))

    for path, found in _batches(data, "logs", log_records):
        data.logs += [(_instance(r.resource, path), r) for r in found]

    for path in data.files["steplog"]:
        for number, record in _read(path, data):
            if not isinstance(record, dict) or not _is_int(record.get("step")):
                data.bad_lines.append(BadLine(path, number,
                                              "not a step record (an object with an int 'step')"))
                continue
            data.lines[path] = data.lines.get(path, 0) + 1
            data.steps.append((path.stem, record))
    data.spans.sort(key=lambda item: item[1].start_ns)
    return data


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- formatting --------------------------------------------------------------------------------


def _when(ns: int) -> str:
    """Unix nanos as a naive UTC time string plotly reads (microseconds kept)."""
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def _clock(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%H:%M:%S")


def _human_bytes(value: float | None) -> str:
    return "-" if value is None else format_bytes(value)


def _byte_scale(values) -> tuple[float, str]:
    top = max((abs(v) for v in values if v is not None), default=0)
    if top >= 4 * 2**30:
        return 2.0**30, "GiB"
    if top >= 2**20:
        return 2.0**20, "MiB"
    return 2.0**10, "KiB"


def _unit_name(unit: str) -> str:
    return unit.strip("{}") or "1"


def _duration(ns: int) -> str:
    seconds = ns / 1e9
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _short(metric: str) -> str:
    for prefix in ("yeto.process.memory.", "yeto.node.memory.", "yeto.host_allocator.", "yeto."):
        if metric.startswith(prefix):
            return metric[len(prefix):]
    return metric


# --- the charts --------------------------------------------------------------------------------

# (panel title, [metric, ...]); within a panel the n-th metric is drawn with the n-th dash
_PROCESS_PANELS = (
    ("Anonymous memory — what a leak grows", ("yeto.process.memory.anonymous",)),
    ("RSS (solid) and its high-water mark (dotted)",
     ("yeto.process.memory.rss", "yeto.process.memory.rss_peak")),
    ("Private dirty", ("yeto.process.memory.private_dirty",)),
)
_ALLOCATOR_PANELS = (
    ("Bytes held from the OS: current (solid), peak (dotted)",
     ("yeto.host_allocator.allocated_bytes.current", "yeto.host_allocator.allocated_bytes.peak")),
    ("Bytes in use by tensors: current (solid), peak (dotted)",
     ("yeto.host_allocator.active_bytes.current", "yeto.host_allocator.active_bytes.peak")),
    ("Blocks held (solid, peak dotted); active requests (dashed, peak dash-dot)",
     ("yeto.host_allocator.allocations.current", "yeto.host_allocator.allocations.peak",
      "yeto.host_allocator.active_requests.current", "yeto.host_allocator.active_requests.peak")),
)
_RATE_PANELS = (
    ("Pinned bytes obtained from (solid) / returned to (dotted) the OS, per second",
     ("yeto.host_allocator.allocated_bytes.allocated",
      "yeto.host_allocator.allocated_bytes.freed")),
    ("Bytes handed to (solid) / back from (dotted) tensors, per second",
     ("yeto.host_allocator.active_bytes.allocated", "yeto.host_allocator.active_bytes.freed")),
    ("Allocator OS calls per second: alloc (solid), free (dotted)",
     ("yeto.host_allocator.num_host_alloc", "yeto.host_allocator.num_host_free")),
    ("Blocks (solid/dotted) and requests (dashed/dash-dot) allocated/freed per second",
     ("yeto.host_allocator.allocations.allocated", "yeto.host_allocator.allocations.freed",
      "yeto.host_allocator.active_requests.allocated",
      "yeto.host_allocator.active_requests.freed")),
    ("Census read errors per second, by source", ("yeto.census.errors",)),
)
_NODE_PANELS = (
    ("MemAvailable", ("yeto.node.memory.available",)),
    ("AnonPages — the node-wide leak signal", ("yeto.node.memory.anon_pages",)),
)


def _rank_colors(instances: list[str]) -> dict[str, str]:
    return {inst: _RANK_COLORS[i % len(_RANK_COLORS)] for i, inst in enumerate(instances)}


def _panels(data: Telemetry, *, kinds: set[Kind], prefix: str, declared) -> list:
    """[(title, [(series, dash)])] for the series of `kinds` whose metric starts with `prefix`
    (a tuple of prefixes): the declared panels first, then one panel per unit for the rest."""
    chosen = [s for s in data.series.values()
              if s.kind in kinds and s.metric.startswith(prefix)]
    panels = []
    placed: set[int] = set()
    for title, metrics in declared:
        entries = []
        for n, metric in enumerate(metrics):
            for s in chosen:
                if s.metric == metric:
                    entries.append((s, _DASHES[n % len(_DASHES)]))
                    placed.add(id(s))
        if entries:
            panels.append((title, entries))
    rest: dict[str, list] = defaultdict(list)
    for s in chosen:
        if id(s) not in placed:
            rest[s.unit].append(s)
    for unit, group in sorted(rest.items()):
        metrics = sorted({s.metric for s in group})
        dash = {m: _DASHES[n % len(_DASHES)] for n, m in enumerate(metrics)}
        names = ", ".join(_short(m) for m in metrics)
        panels.append((f"Other ({_unit_name(unit)}): {names}",
                       [(s, dash[s.metric]) for s in group]))
    return panels


def _restart_windows(data: Telemetry) -> list[tuple[int, int, int]]:
    """Merged [start, end, ranks] windows of the `yeto.resume.anchors` spans of all ranks
    (windows closer than 1% of the page's time range are one band)."""
    windows = sorted((s.start_ns, s.end_ns, inst) for inst, s in data.spans
                     if s.name == RESTART_SPAN)
    span_range = data.time_range()
    near = (span_range[1] - span_range[0]) // 100 if span_range else 0
    merged: list[list] = []
    for start, end, inst in windows:
        if merged and start <= merged[-1][1] + near:
            merged[-1][1] = max(merged[-1][1], end)
            merged[-1][2].add(inst)
        else:
            merged.append([start, end, {inst}])
    return [(a, b, len(c)) for a, b, c in merged]


def _timeline_spans(data: Telemetry) -> list[tuple[str, Span]]:
    return [(i, s) for i, s in data.spans
            if s.name in TIMELINE_SPANS or s.name.startswith("demo.")]


_BYTE_ATTRIBUTES = ("_bytes", "bytes_mapped", "bytes_touched", "file_size", "anonymous_delta")


def _span_hover(instance: str, span: Span) -> str:
    lines = [f"<b>{html.escape(span.name)}</b> — {html.escape(instance)}",
             f"{_when(span.start_ns)[11:23]} UTC, {_duration(span.end_ns - span.start_ns)}"]
    for key, value in sorted(span.attributes.items()):
        shown = _human_bytes(value) if _is_int(value) and key.endswith(_BYTE_ATTRIBUTES) \
            else value
        lines.append(f"{html.escape(key)}: {html.escape(str(shown))}")
    if span.events:
        lines.append(f"{len(span.events)} events")
    if span.error:
        lines.append(f"<b>ERROR</b>: {html.escape(span.error)}")
    return "<br>".join(lines)


def _time_chart(go, make_subplots, data: Telemetry, panels, *, colors, x_range, legend_seen,
                timeline: bool):
    rows = len(panels) + (1 if timeline else 0)
    titles = [title for title, _ in panels]
    lanes = data.instances()
    heights = [230] * len(panels)
    if timeline:
        titles.append("Restart spans (bars) and fragment_done events (◆), per rank")
        heights.append(max(150, 28 * len(lanes) * max(1, len(_span_names(data))) // 2 + 70))
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles,
                        vertical_spacing=min(0.08, 0.35 / max(1, rows)),
                        row_heights=[h / sum(heights) for h in heights])
    for row, (title, entries) in enumerate(panels, start=1):
        values_by_series = [(s, dash, plotted(s)) for s, dash in entries]
        unit = entries[0][0].unit
        rated = entries[0][0].kind is Kind.RUNNING_TOTAL
        if unit == "By":
            scale, unit_label = _byte_scale(v for _, _, pts in values_by_series for _, v in pts)
        else:
            scale, unit_label = 1.0, _unit_name(unit)
        for s, dash, pts in sorted(values_by_series, key=lambda e: lanes.index(e[0].instance)
                                   if e[0].instance in lanes else 0):
            ys = [None if v is None else v / scale for _, v in pts]
            first = s.instance not in legend_seen
            legend_seen.add(s.instance)
            kind = "rate" if rated else s.kind.value
            suffix = f"{unit_label}/s" if rated else unit_label
            fig.add_trace(go.Scatter(
                x=[_when(t) for t, _ in pts], y=ys, mode="lines+markers",
                name=s.instance, legendgroup=s.instance, showlegend=first,
                line=dict(color=colors.get(s.instance), dash=dash, width=2),
                marker=dict(size=4), connectgaps=False,
                hovertemplate=(f"<b>{html.escape(s.instance)}</b><br>{html.escape(s.label)}"
                               f" ({kind})<br>%{{x|%H:%M:%S.%L}}: %{{y:,.2f}} {suffix}"
                               "<extra></extra>")),
                row=row, col=1)
        fig.update_yaxes(title_text=f"{unit_label}/s" if rated else unit_label, row=row, col=1,
                         rangemode="tozero" if rated else "normal")
    if timeline:
        _add_timeline(go, fig, data, rows, lanes)
    for start, end, ranks in _restart_windows(data):
        fig.add_vrect(x0=_when(start), x1=_when(end), row="all", col=1, fillcolor="#6baed6",
                      opacity=0.18, line_width=0, layer="below")
        fig.add_annotation(x=_when(end), y=0.97, xref="x", yref="y domain", yanchor="top",
                           xanchor="left", showarrow=False, font=dict(size=10, color="#08519c"),
                           bgcolor="rgba(255,255,255,0.7)",
                           text=f"◀ restart ({ranks} rank{'s' if ranks != 1 else ''})")
    fig.update_xaxes(type="date", range=x_range, showticklabels=True, tickformat="%H:%M:%S")
    fig.update_xaxes(title_text="time (UTC)", row=rows, col=1)
    # A fixed right margin holds the legend, so every time chart has the same plot width and
    # their time axes line up on the page.
    fig.update_layout(height=sum(heights) + 140, barmode="group", bargap=0.25,
                      margin=dict(r=_LEGEND_WIDTH),
                      legend=dict(title=dict(text="rank (service.instance.id)"), x=1.02,
                                  xanchor="left", y=1, yanchor="top"))
    return fig


def _span_names(data: Telemetry) -> list[str]:
    names = {s.name for _, s in _timeline_spans(data)}
    return [n for n in TIMELINE_SPANS if n in names] + sorted(names - set(TIMELINE_SPANS))


def _add_timeline(go, fig, data: Telemetry, row: int, lanes: list[str]) -> None:
    spans_ = _timeline_spans(data)
    others = iter(_OTHER_SPAN_COLORS * 10)
    for name in _span_names(data):
        chosen = [(i, s) for i, s in spans_ if s.name == name]
        fig.add_trace(go.Bar(
            orientation="h", base=[_when(s.start_ns) for _, s in chosen],
            x=[max((s.end_ns - s.start_ns) / 1e6, 0.5) for _, s in chosen],
            y=[i for i, _ in chosen], name=name, legendgroup="spans",
            legendgrouptitle=dict(text="spans"), offsetgroup=name,
            marker=dict(color=_SPAN_COLORS.get(name) or next(others),
                        line=dict(width=0.5, color="#08306b")),
            hovertext=[_span_hover(i, s) for i, s in chosen], hoverinfo="text"),
            row=row, col=1)
    events = [(i, s, e) for i, s in spans_ for e in s.events if e.name == FRAGMENT_EVENT]
    if events:
        def hover(inst, span, event):
            touched = event.attributes.get(span_table.ANCHORS_BYTES_TOUCHED.name)
            return (f"<b>fragment_done</b> — {html.escape(inst)}<br>"
                    f"fragment {html.escape(str(event.attributes.get('yeto.fragment.id', '?')))}"
                    f"<br>{_when(event.time_ns)[11:23]} UTC<br>bytes touched so far: "
                    f"{_human_bytes(touched) if _is_int(touched) else '-'}")
        fig.add_trace(go.Scatter(
            x=[_when(e.time_ns) for _, _, e in events], y=[i for i, _, _ in events],
            mode="markers", name="fragment_done", legendgroup="spans",
            marker=dict(symbol="diamond", size=9, color="#e6550d",
                        line=dict(width=1, color="white")),
            hovertext=[hover(*item) for item in events], hoverinfo="text"), row=row, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=lanes[::-1],
                     row=row, col=1)


def _restart_chart(go, data: Telemetry, colors: dict[str, str]):
    restarts = [(i, s) for i, s in data.spans if s.name == RESTART_SPAN]
    if not restarts:
        return None
    children = defaultdict(list)
    for inst, span in data.spans:
        children[(inst, span.parent_span_id)].append(span)
    labels, hovers = [], []
    columns = (("file size", span_table.ANCHORS_FILE_SIZE.name, "#c6dbef"),
               ("bytes mapped", span_table.ANCHORS_BYTES_MAPPED.name, "#6baed6"),
               ("bytes touched", span_table.ANCHORS_BYTES_TOUCHED.name, "#08519c"),
               ("anonymous delta", span_table.ANCHORS_ANONYMOUS_DELTA.name, "#e6550d"))
    values = {attr: [] for _, attr, _ in columns}
    for inst, span in restarts:
        a = span.attributes
        label = base = (f"{inst}<br>{_when(span.start_ns)[11:23]} "
                        f"{a.get('yeto.anchors.load_mode', '')}").rstrip()
        n = 2
        while label in labels:  # every restart its own group, even at the same millisecond
            label, n = f"{base} #{n}", n + 1
        labels.append(label)
        for _, attr, _ in columns:
            values[attr].append(a.get(attr) if _is_int(a.get(attr)) else None)
        load = [c for c in children[(inst, span.span_id)] if c.name.endswith(".load")]
        mapped = a.get(span_table.ANCHORS_BYTES_MAPPED.name)
        touched = a.get(span_table.ANCHORS_BYTES_TOUCHED.name)
        share = (f" ({100 * touched / mapped:.0f}% of mapped)"
                 if _is_int(mapped) and _is_int(touched) and mapped > 0 else "")
        hovers.append("<br>".join(filter(None, [
            f"<b>{html.escape(inst)}</b> — restart at {_when(span.start_ns)[11:23]} UTC",
            f"load mode: {html.escape(str(a.get('yeto.anchors.load_mode', '?')))}, dtype "
            f"{html.escape(str(a.get('yeto.anchors.dtype', '?')))}, "
            f"{a.get('yeto.anchors.tensor_count', '?')} tensors",
            f"window {_duration(span.end_ns - span.start_ns)}" +
            (f", load {_duration(load[0].end_ns - load[0].start_ns)}" if load else ""),
            f"file size {_human_bytes(a.get('yeto.anchors.file_size'))}",
            f"mapped {_human_bytes(mapped)}, touched {_human_bytes(touched)}{share}",
            f"anonymous delta {_human_bytes(a.get('yeto.anchors.anonymous_delta'))}",
            f"fragments done: {a.get('yeto.anchors.fragments_done', '-')}",
            f"path: {html.escape(str(a.get('yeto.anchors.path', '?')))}",
            f"<b>ERROR</b>: {html.escape(span.error)}" if span.error else "",
            f"residency not measured: {html.escape(str(a['yeto.anchors.residency_error']))}"
            if span_table.ANCHORS_RESIDENCY_ERROR.name in a else ""])))
    scale, unit = _byte_scale(v for col in values.values() for v in col)
    fig = go.Figure()
    for name, attr, color in columns:
        ys = [None if v is None else v / scale for v in values[attr]]
        if all(y is None for y in ys):
            continue
        fig.add_trace(go.Bar(
            x=labels, y=ys, name=name, marker_color=color, hovertext=hovers, hoverinfo="text",
            text=[_human_bytes(v) if v is not None else "" for v in values[attr]],
            textposition="outside" if len(restarts) <= 8 else "none", cliponaxis=False))
    fig.update_layout(barmode="group", height=430, yaxis_title=unit, margin=dict(r=40),
                      legend=dict(orientation="h", y=1.12, x=0))
    return fig


def _steplog_chart(go, make_subplots, data: Telemetry):
    if not data.steps:
        return None
    stems = sorted({stem for stem, _ in data.steps})
    keys: list[str] = []
    for _, record in data.steps:
        for key, value in record.items():
            if key.startswith("host_mem.") and key not in keys and \
                    isinstance(value, (int, float)) and not isinstance(value, bool):
                keys.append(key)

    def level(key: str) -> bool:
        row = _STEP_KEYS.get(key)
        if row is not None:
            return row.kind is not Kind.RUNNING_TOTAL and row.unit == "By"
        return key.endswith("_bytes")

    process = [k for k in keys if level(k) and not k.startswith("host_mem.host_alloc.")
               and not k.startswith("host_mem.node_")]
    node = [k for k in keys if level(k) and k.startswith("host_mem.node_")]
    allocator = [k for k in keys if level(k) and k.startswith("host_mem.host_alloc.")]
    extra = [k for k in ("loss",) if any(_number(r.get(k)) for _, r in data.steps)]
    panels = [p for p in (("Process memory (peaks dotted)", process),
                          ("Node memory", node),
                          ("Host allocator: current (solid) and peak (dotted)", allocator),
                          ("Loss", extra)) if p[1]]
    if not panels:
        return None
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True,
                        subplot_titles=[t for t, _ in panels], vertical_spacing=0.09)
    palette = iter(_RANK_COLORS * 10)
    color = {}
    for row, (title, columns) in enumerate(panels, start=1):
        if columns == extra:
            scale, unit = 1.0, ""
        else:
            scale, unit = _byte_scale(r.get(k) for _, r in data.steps for k in columns
                                      if _number(r.get(k)))
        for key in columns:
            color.setdefault(key, next(palette))
            for n, stem in enumerate(stems):
                records = sorted((r for s, r in data.steps if s == stem and _number(r.get(key))),
                                 key=lambda r: r["step"])
                if not records:
                    continue
                name = key.replace("host_mem.", "").replace("host_alloc.", "")
                row_kind = _STEP_KEYS.get(key)
                peak = row_kind is not None and row_kind.kind is Kind.HIGH_WATER_MARK
                fig.add_trace(go.Scatter(
                    x=[r["step"] for r in records],
                    y=[r[key] / scale if _steplog_level(r, key) else None for r in records],
                    mode="lines+markers", name=name + (f" · {stem}" if len(stems) > 1 else ""),
                    line=dict(color=color[key], width=2,
                              dash="dot" if peak else _DASHES[(2 * n) % len(_DASHES)]),
                    marker=dict(size=5), connectgaps=False,
                    legendgroup=f"steplog-{row}", legendgrouptitle=dict(text=title),
                    hovertemplate=(f"{html.escape(key)}<br>step %{{x}}: %{{y:,.2f}} {unit}"
                                   "<extra></extra>")), row=row, col=1)
        fig.update_yaxes(title_text=unit or None, row=row, col=1)
    fig.update_xaxes(title_text="step", row=len(panels), col=1)
    fig.update_layout(height=300 * len(panels) + 120)
    return fig


def _steplog_level(record: dict, key: str) -> bool:
    """Whether `record[key]` is a level: an allocator `.current` is one only once `.freed` has
    moved (the step log's `<stat>.current_is_gauge` flag); until then it is the running total."""
    if key.startswith("host_mem.host_alloc.") and key.endswith(".current"):
        return record.get(key + "_is_gauge", True) is not False
    return True


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


# --- the page ----------------------------------------------------------------------------------


def _charts(data: Telemetry) -> list[tuple[str, object]]:
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        raise UserFacingError("the report draws with plotly, which is not installed: "
                              "pip install 'plotly>=6' (or yeto-otel[demo])") from None
    instances = data.instances()
    colors = _rank_colors(instances)
    span_range = data.time_range()
    x_range = None
    if span_range:
        pad = max(int((span_range[1] - span_range[0]) * 0.02), 50_000_000)
        x_range = [_when(span_range[0] - pad), _when(span_range[1] + pad)]
    legend_seen: set[str] = set()
    charts = []
    levels = {Kind.GAUGE, Kind.HIGH_WATER_MARK}
    process = _panels(data, kinds=levels, prefix="yeto.process.", declared=_PROCESS_PANELS)
    timeline = bool(_timeline_spans(data))
    if process or timeline:
        charts.append(("census-process", _time_chart(
            go, make_subplots, data, process, colors=colors, x_range=x_range,
            legend_seen=legend_seen, timeline=timeline)))
    for chart_id, kinds, prefix, declared in (
            ("census-allocator", levels, "yeto.host_allocator.", _ALLOCATOR_PANELS),
            ("census-rates", {Kind.RUNNING_TOTAL}, ("yeto.host_allocator.", "yeto.census."),
             _RATE_PANELS),
            ("census-node", levels, "yeto.node.", _NODE_PANELS)):
        panels = _panels(data, kinds=kinds, prefix=prefix, declared=declared)
        if panels:
            charts.append((chart_id, _time_chart(go, make_subplots, data, panels, colors=colors,
                                                 x_range=x_range, legend_seen=set(),
                                                 timeline=False)))
    restart = _restart_chart(go, data, colors)
    if restart is not None:
        charts.append(("restart-bytes", restart))
    steplog = _steplog_chart(go, make_subplots, data)
    if steplog is not None:
        charts.append(("steplog-memory", steplog))
    for chart_id, fig in charts:
        fig.update_layout(template="plotly_white", margin=dict(l=90, t=60, b=50),
                          hoverlabel=dict(align="left"), font=dict(size=12))
    return charts


def _not_plotted(data: Telemetry) -> dict[str, int]:
    found = dict(data.not_plotted)
    for s in data.series.values():
        if not s.metric.startswith(("yeto.process.", "yeto.host_allocator.", "yeto.node.",
                                    "yeto.census.")):
            found[f"metric {s.metric}"] = found.get(f"metric {s.metric}", 0) + len(s.points)
    for _, span in data.spans:
        if not (span.name in TIMELINE_SPANS or span.name.startswith("demo.")):
            found[f"span {span.name}"] = found.get(f"span {span.name}", 0) + 1
    return found


def _esc(text) -> str:
    return html.escape(str(text))


def _header(data: Telemetry, chart_ids: list[str]) -> str:
    rows = []
    instances = data.instances()
    rank_items = []
    for inst in instances:
        res = data.resources.get(inst, {})
        bits = [f"host {res['host.name']}" if "host.name" in res else "",
                f"rank {res['yeto.rank']}" if "yeto.rank" in res else "",
                f"local rank {res['yeto.local_rank']}" if "yeto.local_rank" in res else "",
                f"of {res['yeto.world_size']}" if "yeto.world_size" in res else ""]
        rank_items.append(f"<code>{_esc(inst)}</code> <span class=dim>"
                          f"{_esc(', '.join(b for b in bits if b))}</span>")
    rows.append(("Ranks", f"{len(instances)}: " + "; ".join(rank_items) if instances
                 else "none (no metrics or spans)"))
    span_range = data.time_range()
    if span_range:
        rows.append(("Time range", f"{_when(span_range[0])[:19]} → {_when(span_range[1])[:19]} "
                                   f"UTC ({_duration(span_range[1] - span_range[0])})"))
    file_bits = []
    listing = []
    for signal, paths in data.files.items():
        if paths:
            file_bits.append(f"{len(paths)} {signal}")
            for p in paths:
                listing.append(f"<li><code>{_esc(p.name)}</code> "
                               f"<span class=dim>{data.lines.get(p, 0)} lines read, "
                               f"{_human_bytes(_size(p))}</span></li>")
    rows.append(("Files", ", ".join(file_bits) + f" in <code>{_esc(data.directory)}</code>"
                 f"<details><summary>list</summary><ul>{''.join(listing)}</ul></details>"))
    restarts = [(i, s) for i, s in data.spans if s.name == RESTART_SPAN]
    points = sum(len(s.points) for s in data.series.values())
    rows.append(("Found", f"{points:,} metric points in {len(data.series)} series; "
                 f"{len(data.spans)} spans ({len(restarts)} restarts on "
                 f"{len({i for i, _ in restarts})} ranks); {len(data.logs)} log records; "
                 f"{len(data.steps)} step records"))
    skipped = []
    if data.bad_lines:
        first = "".join(f"<li><code>{_esc(b)}</code></li>" for b in data.bad_lines[:20])
        more = (f"<li>… and {len(data.bad_lines) - 20} more</li>"
                if len(data.bad_lines) > 20 else "")
        skipped.append(f"<span class=warn>{len(data.bad_lines)} corrupt "
                       f"line{'s' if len(data.bad_lines) != 1 else ''} skipped</span>"
                       f"<ul>{first}{more}</ul>")
    if data.empty_files:
        skipped.append(f"{len(data.empty_files)} empty file(s): " +
                       ", ".join(f"<code>{_esc(p.name)}</code>" for p in data.empty_files))
    if data.unreadable:
        skipped.append("<span class=warn>unreadable:</span> " +
                       ", ".join(_esc(u) for u in data.unreadable))
    not_plotted = _not_plotted(data)
    if not_plotted:
        skipped.append("not plotted: " + ", ".join(
            f"{_esc(k)} ×{v}" for k, v in sorted(not_plotted.items())[:30]))
    rows.append(("Skipped", "<br>".join(skipped) if skipped else "nothing"))
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    toc = " · ".join(f"<a href='#{c}'>{_esc(CHART_IDS[c].split(',')[0])}</a>" for c in chart_ids)
    if data.steps:
        toc += f" · <a href='#{STEPLOG_TABLE_ID}'>Last step records</a>"
    return (f"<header><h1>yeto-otel report</h1><table class=summary>{table}</table>"
            f"<p class=note>Gauges and high-water marks are plotted as values; running totals "
            f"(<code>*.allocated</code>, <code>*.freed</code>, <code>num_host_*</code>, "
            f"<code>yeto.census.errors</code>) as rates per second between consecutive "
            f"exports. One colour per rank in every chart; shaded bands are restart windows "
            f"(<code>{RESTART_SPAN}</code>). Times are UTC.</p>"
            f"<nav>{toc}</nav></header>")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _steplog_table(data: Telemetry, last: int = 10) -> str:
    if not data.steps:
        return ""
    records = sorted(data.steps, key=lambda item: (item[1].get("time_unix_nano") or 0,
                                                   item[1]["step"]))[-last:]
    keys: list[str] = []
    for _, record in records:
        for key in record:
            if key not in keys and key not in ("step", "time_unix_nano") and \
                    not key.endswith("_is_gauge"):
                keys.append(key)

    def cell(key: str, value, record: dict) -> str:
        if value is None:
            return "<td class=dim>-</td>"
        if not _steplog_level(record, key):
            return (f"<td class=dim title='.freed has not moved yet: this is the running "
                    f"total, not a level'>{cell(key, value, {})[4:-5]}*</td>")
        row = _STEP_KEYS.get(key)
        if _number(value) and ((row is not None and row.unit == "By") or
                               key.endswith("_bytes")):
            return f"<td>{_human_bytes(value)}</td>"
        if isinstance(value, float):
            return f"<td>{value:,.4g}</td>"
        if _is_int(value):
            return f"<td>{value:,}</td>"
        return f"<td>{_esc(value)[:60]}</td>"

    def kind(key: str) -> str:
        row = _STEP_KEYS.get(key)
        return f" <span class=dim>({row.kind.value})</span>" if row is not None else ""

    head = "".join(f"<th>{r['step']}</th>" for _, r in records)
    times = "".join(
        f"<td>{_clock(r['time_unix_nano']) if _is_int(r.get('time_unix_nano')) else '-'}</td>"
        for _, r in records)
    body = [f"<tr><th>time (UTC)</th>{times}</tr>"]
    if len({stem for stem, _ in records}) > 1:
        body.append("<tr><th>file</th>" + "".join(f"<td>{_esc(s)}</td>" for s, _ in records)
                    + "</tr>")
    for key in keys:
        body.append(f"<tr><th>{_esc(key)}{kind(key)}</th>" +
                    "".join(cell(key, r.get(key), r) for _, r in records) + "</tr>")
    starred = any(not _steplog_level(r, k) for _, r in records for k in keys if k in r)
    note = ("<p class=dim>* the allocator's <code>.freed</code> had not moved yet: this "
            "<code>.current</code> is the running total, not a level (not plotted).</p>"
            if starred else "")
    return (f"<section id='{STEPLOG_TABLE_ID}'><h2>Last {len(records)} step records</h2>"
            f"<div class=scroll><table class=steps><thead><tr><th>step</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>{note}</section>")


def _log_section(data: Telemetry, last: int = 50) -> str:
    worth = [(i, r) for i, r in data.logs if r.severity_number >= 13]  # WARN and above
    if not worth:
        return ""
    rows = "".join(f"<tr><td>{_when(r.time_ns)[:23]}</td><td>{_esc(i)}</td>"
                   f"<td>{_esc(r.severity or r.severity_number)}</td><td>{_esc(r.body)[:300]}</td>"
                   f"</tr>" for i, r in sorted(worth, key=lambda x: x[1].time_ns)[-last:])
    return (f"<section id='log-records'><h2>Warnings and errors logged ({len(worth)})</h2>"
            f"<div class=scroll><table class=steps><thead><tr><th>time (UTC)</th><th>rank</th>"
            f"<th>severity</th><th>message</th></tr></thead><tbody>{rows}</tbody></table>"
            f"</div></section>")


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

_WHAT = {
    "census-process": "Per-rank levels from /proc/self. The bottom lane shows the restart "
                      "spans on the same time axis; hover a bar for bytes mapped / touched.",
    "census-allocator": "The accelerator's host (pinned) allocator, as levels. `.current` "
                        "appears once `.freed` has moved.",
    "census-rates": "Monotonic counters turned into per-second rates between consecutive "
                    "exports; a gap marks a new process.",
    "census-node": "Observed once per host (by local rank 0).",
    "restart-bytes": "One group per restart and rank (`yeto.resume.anchors`): a mapped load "
                     "touches only what the catch-up read; an eager load reads the whole file "
                     "into anonymous memory.",
    "steplog-memory": "The host_mem.* levels the trainer wrote into its step log (running "
                      "totals are in the table below).",
}


def build_html(data: Telemetry) -> tuple[str, list[str]]:
    """(the page, the chart div ids drawn)."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    charts = _charts(data)
    chart_ids = [chart_id for chart_id, _ in charts]
    sections = []
    for chart_id, fig in charts:
        div = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=chart_id,
                          config={"displaylogo": False, "responsive": True})
        sections.append(f"<section class=chart><h2>{_esc(CHART_IDS[chart_id])}</h2>"
                        f"<p class=what>{_esc(_WHAT.get(chart_id, ''))}</p>{div}</section>")
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    page = (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='generator' content='yeto-otel report'>"
        f"<title>yeto-otel report — {_esc(data.directory.name)}</title>"
        f"<style>{_CSS}</style>"
        # plotly.js inline (what include_plotlyjs=True writes), once for all charts: offline.
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
        f"<script>{get_plotlyjs()}</script>"
        f"</head><body data-charts='{' '.join(chart_ids)}'><main>"
        f"{_header(data, chart_ids)}{''.join(sections)}{_steplog_table(data)}"
        f"{_log_section(data)}<p class=dim>Generated {generated} by yeto-otel report.</p>"
        "</main></body></html>\n")
    return page, chart_ids


# --- the command -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR",
                        help="the directory of local telemetry files (YETO_OTEL_LOCAL_DIR)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="where to write the page (default: DIR/report.html)")


def _check_directory(directory: Path) -> None:
    if not directory.exists():
        raise UserFacingError(f"report: {directory} does not exist (give the directory the "
                              "telemetry files were written to: YETO_OTEL_LOCAL_DIR)")
    if not directory.is_dir():
        raise UserFacingError(f"report: {directory} is not a directory (give the directory "
                              "of telemetry files, not a file)")
    if not os.access(directory, os.R_OK | os.X_OK):
        raise UserFacingError(f"report: {directory} cannot be read (permission denied)")


def _output_path(args: argparse.Namespace, directory: Path) -> Path:
    output = Path(args.output).expanduser() if args.output else directory / "report.html"
    if output.is_dir():
        raise UserFacingError(f"report: -o {output} is a directory; give a file name, "
                              f"e.g. {output / 'report.html'}")
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise UserFacingError(f"report: cannot write {output}: directory {parent} does not "
                              "exist")
    return output


def _nothing_usable(data: Telemetry) -> UserFacingError:
    found = sum(len(v) for v in data.files.values())
    details = []
    if data.bad_lines:
        details.append(f"{len(data.bad_lines)} corrupt line(s) skipped, e.g. "
                       f"{data.bad_lines[0]}")
    if data.empty_files:
        details.append(f"{len(data.empty_files)} of {found} file(s) empty")
    if data.unreadable:
        details.append("unreadable: " + "; ".join(data.unreadable[:3]))
    if data.logs:
        details.append(f"only {len(data.logs)} log record(s)")
    return UserFacingError(f"report: nothing to plot in {data.directory}: no metrics, spans "
                           f"or step records in its {found} telemetry file(s) (" +
                           "; ".join(details or ["no records"]) + ")")


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory).expanduser()
    _check_directory(directory)
    output = _output_path(args, directory)
    data = load_telemetry(directory)
    if not any(data.files.values()):
        raise UserFacingError(
            f"report: no telemetry files in {directory} (expected " +
            ", ".join(PATTERNS.values()) + "; is it the YETO_OTEL_LOCAL_DIR of a run?)")
    if not data.usable:
        raise _nothing_usable(data)
    page, chart_ids = build_html(data)
    try:
        handle, temp = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp",
                                        dir=output.parent or ".")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(page)
            os.chmod(temp, 0o644)
            os.replace(temp, output)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        raise UserFacingError(f"report: cannot write {output}: {exc.strerror or exc}") from None
    if data.bad_lines:
        files = sorted({b.path.name for b in data.bad_lines})
        print(f"yeto-otel: warning: skipped {len(data.bad_lines)} corrupt line(s) in "
              f"{', '.join(files)} (first: {data.bad_lines[0]}); the page lists them",
              file=sys.stderr)
    if data.unreadable:
        print(f"yeto-otel: warning: could not read {'; '.join(data.unreadable)}",
              file=sys.stderr)
    print(output.resolve())
    return 0
