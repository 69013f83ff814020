"""The census over time: one chart of stacked panels sharing a time axis, one line per rank
and launch (or per DataLoader worker and launch of its rank), with the restart windows shaded
and, under the process memory, the span lanes (`_timeline`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ...census import Kind
from ._format import DASHES, byte_scale, esc, launch_symbol, short, unit_name, when
from ._names import RESTART_SPAN
from ._roster import Roster
from ._telemetry import Series, Telemetry, plotted
from ._timeline import add_timeline, timeline_height, timeline_lanes, timeline_title

__all__ = ["panels_of", "time_chart"]

_LEGEND_WIDTH = 250
_PANEL_HEIGHT = 230
_LEGEND_TITLES = {False: "rank (launch)", True: "DataLoader workers, by rank"}


def panels_of(data: Telemetry, *, kinds: set[Kind], prefix: str | tuple[str, ...],
              declared, keep: Callable[[Series], bool] | None = None) -> list:
    """[(title, [(series, dash)])] for the series of `kinds` whose metric starts with `prefix`
    (a tuple of prefixes) and that `keep` keeps: the declared panels first, then one panel per
    unit for the rest."""
    chosen = [s for s in data.series.values()
              if s.kind in kinds and s.metric.startswith(prefix) and (keep is None or keep(s))]
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


def time_chart(go, make_subplots, data: Telemetry, panels, *, roster: Roster, x_range,
               timeline: bool, workers: bool = False):
    """One figure: a row per panel, plus the span lanes when `timeline`. Each rank's launch
    (`workers`: each worker's launch, grouped under its rank) has one legend entry."""
    titles = [title for title, _ in panels]
    heights = [_PANEL_HEIGHT] * len(panels)
    lanes = timeline_lanes(data, roster) if timeline else []
    if timeline:
        titles.append(timeline_title(roster))
        heights.append(timeline_height(data, roster, lanes))
    rows = len(titles)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles,
                        vertical_spacing=min(0.08, 0.35 / max(1, rows)),
                        row_heights=[h / sum(heights) for h in heights])
    legend_seen: set = set()
    for row, (_, entries) in enumerate(panels, start=1):
        _add_panel(go, fig, row, entries, roster=roster, legend_seen=legend_seen,
                   workers=workers)
    if timeline:
        add_timeline(go, fig, data, rows, roster, lanes)
    _add_restart_bands(fig, data)
    _add_launch_lines(fig, roster)
    fig.update_xaxes(type="date", range=x_range, showticklabels=True, tickformat="%H:%M:%S")
    fig.update_xaxes(title_text="time (UTC)", row=rows, col=1)
    # A fixed right margin holds the legend, so every time chart has the same plot width and
    # their time axes line up on the page.
    fig.update_layout(height=sum(heights) + 140, barmode="group", bargap=0.25,
                      margin=dict(r=_LEGEND_WIDTH),
                      legend=dict(title=dict(text=_LEGEND_TITLES[workers]), x=1.02,
                                  xanchor="left", y=1, yanchor="top"))
    return fig


def _lines(entries, roster: Roster):
    """(series of one launch, dash, launch, what is drawn) of a panel, in rank order (a rank's
    workers in worker order), each rank's launches oldest first."""
    lines = [(part, dash, launch, plotted(part)) for s, dash in entries
             for launch, part in roster.by_launch(s)]
    return sorted(lines, key=lambda e: (roster.position(e[0].instance), e[2].number))


def _add_panel(go, fig, row: int, entries, *, roster: Roster, legend_seen: set,
               workers: bool) -> None:
    """One panel's lines. A panel holds one unit and one kind (its first series says which):
    running totals are drawn as rates, the rest as values. The first line of each rank's launch
    (of each worker's, under `workers`) in the figure is the one in the legend."""
    lines = _lines(entries, roster)
    unit = entries[0][0].unit
    rated = entries[0][0].kind is Kind.RUNNING_TOTAL
    if unit == "By":
        scale, unit_label = byte_scale(v for *_, pts in lines for _, v in pts)
    else:
        scale, unit_label = 1.0, unit_name(unit)
    suffix = f"{unit_label}/s" if rated else unit_label
    for s, dash, launch, pts in lines:
        name = roster.trace_name(s.instance, launch)
        first = (s.instance, launch) not in legend_seen
        legend_seen.add((s.instance, launch))
        rank = roster.parent.get(s.instance, s.instance)
        group = dict(legendgroup=rank, legendgrouptitle=dict(text=roster.label(rank))) \
            if workers else dict(legendgroup=f"{s.instance} #{launch.number}")
        where = esc(s.instance) + (f" · pid {launch.pid}" if launch.pid and not workers else "")
        kind = "rate" if rated else s.kind.value
        color = roster.color(s.instance)
        ages, read = _read_ages(s, pts)
        fig.add_trace(go.Scatter(
            x=[t // 1_000_000 for t, _ in pts],  # ms since the epoch: a date axis reads them
            y=[None if v is None else float(f"{v / scale:.6g}") for _, v in pts],
            mode="lines+markers", name=name, showlegend=first, **group,
            line=dict(color=color, dash=dash, width=2), marker=_marker(launch, color),
            connectgaps=False, customdata=ages,
            hovertemplate=(f"<b>{esc(name)}</b><br>{where}<br>{esc(s.label)}"
                           f" ({kind})<br>%{{x|%H:%M:%S.%L}}: %{{y:,.2f}} {suffix}{read}"
                           "<extra></extra>")),
            row=row, col=1)
    fig.update_yaxes(title_text=suffix, row=row, col=1,
                     rangemode="tozero" if rated else "normal")


def _read_ages(series: Series, pts) -> tuple[list | None, str]:
    """For a value read within a budget (drawn at the time it was read): each drawn point's
    age when first exported, and the hover's line that shows it. (None, "") for the rest."""
    ages = {p.time_ns: p.age_s for p in series.points if p.age_s is not None}
    if not ages:
        return None, ""
    return ([[ages.get(t)] for t, _ in pts],
            "<br>read at this time, %{customdata[0]:.2f} s before the collection that first "
            "exported it (re-read only within its CPU budget)")


def _marker(launch, color: str) -> dict:
    """A launch's marker: dots for the first, open shapes (a little larger) after a restart."""
    first = launch.number == 1
    return dict(size=5 if first else 7, symbol=launch_symbol(launch.number), color=color,
                line=dict(width=0 if first else 1.5, color=color))


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


def _add_launch_lines(fig, roster: Roster) -> None:
    """A dotted line where ranks were launched again (a restart: new processes under the same
    identities), one per second in which some were, so a restart reads as one even without a
    resume span."""
    starts: dict[int, list[int]] = defaultdict(list)
    for rank in roster.ranks:
        for launch in roster.launches(rank)[1:]:
            starts[launch.started_ns // 1_000_000_000].append(launch.number)
    for second, numbers in sorted(starts.items()):
        at = when(second * 1_000_000_000)
        fig.add_vline(x=at, row="all", col=1, line=dict(color="#57606a", width=1, dash="dot"))
        which = "/".join(str(n) for n in sorted(set(numbers)))
        fig.add_annotation(x=at, y=0.97, xref="x", yref="y domain", yanchor="top",
                           xanchor="right", showarrow=False, font=dict(size=10, color="#57606a"),
                           bgcolor="rgba(255,255,255,0.7)",
                           text=f"launch {which} ({len(numbers)} rank"
                                f"{'s' if len(numbers) != 1 else ''}) ▶")
