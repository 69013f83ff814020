"""The census over time: one chart of stacked panels sharing a time axis, one line per rank,
with the restart windows shaded and, under the process memory, a lane per rank with the
restart spans and their fragment_done events."""

from __future__ import annotations

from collections import defaultdict

from ... import names
from ...census import Kind
from ...otel import Span
from ._format import (DASHES, byte_scale, duration, esc, human_bytes, is_int, short, unit_name,
                      when)
from ._names import (FRAGMENT_EVENT, RESTART_SPAN, SERVICE_INSTANCE_ID, TIMELINE_SPANS,
                     is_timeline_span)
from ._telemetry import Telemetry, plotted

__all__ = ["panels_of", "time_chart", "timeline_spans"]

_SPAN_COLORS = dict(zip(TIMELINE_SPANS, ("#9ecae1", "#3182bd", "#08519c")))
_OTHER_SPAN_COLORS = ("#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2")
_LEGEND_WIDTH = 250
_PANEL_HEIGHT = 230

# Attribute names whose integer values are bytes (shown as KiB/MiB/GiB in the hover text):
# suffixes, so the byte attributes of spans outside the table read the same way.
_BYTE_ATTRIBUTES = ("_bytes", "bytes_mapped", "bytes_touched", "file_size", "anonymous_delta")


def panels_of(data: Telemetry, *, kinds: set[Kind], prefix: str | tuple[str, ...],
              declared) -> list:
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
                    entries.append((s, DASHES[n % len(DASHES)]))
                    placed.add(id(s))
        if entries:
            panels.append((title, entries))
    rest: dict[str, list] = defaultdict(list)
    for s in chosen:
        if id(s) not in placed:
            rest[s.unit].append(s)
    for unit, group in sorted(rest.items()):
        metrics = sorted({s.metric for s in group})
        dash = {m: DASHES[n % len(DASHES)] for n, m in enumerate(metrics)}
        listed = ", ".join(short(m) for m in metrics)
        panels.append((f"Other ({unit_name(unit)}): {listed}",
                       [(s, dash[s.metric]) for s in group]))
    return panels


def timeline_spans(data: Telemetry) -> list[tuple[str, Span]]:
    return [(i, s) for i, s in data.spans if is_timeline_span(s.name)]


def time_chart(go, make_subplots, data: Telemetry, panels, *, colors, x_range, legend_seen,
               timeline: bool):
    """One figure: a row per panel, plus the span lane when `timeline`. A rank's first line
    (across every chart sharing `legend_seen`) is the one that shows in the legend."""
    titles = [title for title, _ in panels]
    lanes = data.instances()
    heights = [_PANEL_HEIGHT] * len(panels)
    if timeline:
        titles.append(f"Restart spans (bars) and {FRAGMENT_EVENT} events (◆), per rank")
        heights.append(max(150, 28 * len(lanes) * max(1, len(_span_names(data))) // 2 + 70))
    rows = len(titles)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles,
                        vertical_spacing=min(0.08, 0.35 / max(1, rows)),
                        row_heights=[h / sum(heights) for h in heights])
    for row, (_, entries) in enumerate(panels, start=1):
        _add_panel(go, fig, row, entries, lanes=lanes, colors=colors, legend_seen=legend_seen)
    if timeline:
        _add_timeline(go, fig, data, rows, lanes)
    _add_restart_bands(fig, data)
    fig.update_xaxes(type="date", range=x_range, showticklabels=True, tickformat="%H:%M:%S")
    fig.update_xaxes(title_text="time (UTC)", row=rows, col=1)
    # A fixed right margin holds the legend, so every time chart has the same plot width and
    # their time axes line up on the page.
    fig.update_layout(height=sum(heights) + 140, barmode="group", bargap=0.25,
                      margin=dict(r=_LEGEND_WIDTH),
                      legend=dict(title=dict(text=f"rank ({SERVICE_INSTANCE_ID})"), x=1.02,
                                  xanchor="left", y=1, yanchor="top"))
    return fig


def _add_panel(go, fig, row: int, entries, *, lanes, colors, legend_seen: set[str]) -> None:
    """One panel's lines, in rank order. A panel holds one unit and one kind (its first
    series says which): running totals are drawn as rates, the rest as values."""
    values_by_series = [(s, dash, plotted(s)) for s, dash in entries]
    unit = entries[0][0].unit
    rated = entries[0][0].kind is Kind.RUNNING_TOTAL
    if unit == "By":
        scale, unit_label = byte_scale(v for _, _, pts in values_by_series for _, v in pts)
    else:
        scale, unit_label = 1.0, unit_name(unit)
    suffix = f"{unit_label}/s" if rated else unit_label
    for s, dash, pts in sorted(values_by_series, key=lambda e: lanes.index(e[0].instance)
                               if e[0].instance in lanes else 0):
        first = s.instance not in legend_seen
        legend_seen.add(s.instance)
        kind = "rate" if rated else s.kind.value
        fig.add_trace(go.Scatter(
            x=[when(t) for t, _ in pts], y=[None if v is None else v / scale for _, v in pts],
            mode="lines+markers", name=s.instance, legendgroup=s.instance, showlegend=first,
            line=dict(color=colors.get(s.instance), dash=dash, width=2),
            marker=dict(size=4), connectgaps=False,
            hovertemplate=(f"<b>{esc(s.instance)}</b><br>{esc(s.label)}"
                           f" ({kind})<br>%{{x|%H:%M:%S.%L}}: %{{y:,.2f}} {suffix}"
                           "<extra></extra>")),
            row=row, col=1)
    fig.update_yaxes(title_text=suffix, row=row, col=1,
                     rangemode="tozero" if rated else "normal")


def _add_restart_bands(fig, data: Telemetry) -> None:
    for start, end, ranks in _restart_windows(data):
        fig.add_vrect(x0=when(start), x1=when(end), row="all", col=1, fillcolor="#6baed6",
                      opacity=0.18, line_width=0, layer="below")
        fig.add_annotation(x=when(end), y=0.97, xref="x", yref="y domain", yanchor="top",
                           xanchor="left", showarrow=False, font=dict(size=10, color="#08519c"),
                           bgcolor="rgba(255,255,255,0.7)",
                           text=f"◀ restart ({ranks} rank{'s' if ranks != 1 else ''})")


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


def _span_names(data: Telemetry) -> list[str]:
    """The span names in the lane: the restart's own in their nesting order, then the rest."""
    found = {s.name for _, s in timeline_spans(data)}
    return [n for n in TIMELINE_SPANS if n in found] + sorted(found - set(TIMELINE_SPANS))


def _add_timeline(go, fig, data: Telemetry, row: int, lanes: list[str]) -> None:
    spans_ = timeline_spans(data)
    others = iter(_OTHER_SPAN_COLORS * 10)
    for name in _span_names(data):
        chosen = [(i, s) for i, s in spans_ if s.name == name]
        fig.add_trace(go.Bar(
            orientation="h", base=[when(s.start_ns) for _, s in chosen],
            # at least half a millisecond, so a very short span still shows as a bar
            x=[max((s.end_ns - s.start_ns) / 1e6, 0.5) for _, s in chosen],
            y=[i for i, _ in chosen], name=name, legendgroup="spans",
            legendgrouptitle=dict(text="spans"), offsetgroup=name,
            marker=dict(color=_SPAN_COLORS.get(name) or next(others),
                        line=dict(width=0.5, color="#08306b")),
            hovertext=[_span_hover(i, s) for i, s in chosen], hoverinfo="text"),
            row=row, col=1)
    events = [(i, s, e) for i, s in spans_ for e in s.events if e.name == FRAGMENT_EVENT]
    if events:
        fig.add_trace(go.Scatter(
            x=[when(e.time_ns) for _, _, e in events], y=[i for i, _, _ in events],
            mode="markers", name=FRAGMENT_EVENT, legendgroup="spans",
            marker=dict(symbol="diamond", size=9, color="#e6550d",
                        line=dict(width=1, color="white")),
            hovertext=[_fragment_hover(*item) for item in events], hoverinfo="text"),
            row=row, col=1)
    # lanes top to bottom in rank order (a category axis counts from the bottom)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=lanes[::-1],
                     row=row, col=1)


def _span_hover(instance: str, span: Span) -> str:
    lines = [f"<b>{esc(span.name)}</b> — {esc(instance)}",
             f"{when(span.start_ns)[11:23]} UTC, {duration(span.end_ns - span.start_ns)}"]
    for key, value in sorted(span.attributes.items()):
        shown = human_bytes(value) if is_int(value) and key.endswith(_BYTE_ATTRIBUTES) \
            else value
        lines.append(f"{esc(key)}: {esc(shown)}")
    if span.events:
        lines.append(f"{len(span.events)} events")
    if span.error:
        lines.append(f"<b>ERROR</b>: {esc(span.error)}")
    return "<br>".join(lines)


def _fragment_hover(instance: str, span: Span, event) -> str:
    touched = event.attributes.get(names.ANCHORS_BYTES_TOUCHED.name)
    fragment = event.attributes.get(names.FRAGMENT_ID.name, "?")
    return (f"<b>{FRAGMENT_EVENT}</b> — {esc(instance)}<br>"
            f"fragment {esc(fragment)}"
            f"<br>{when(event.time_ns)[11:23]} UTC<br>bytes touched so far: "
            f"{human_bytes(touched) if is_int(touched) else '-'}")
