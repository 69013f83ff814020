"""The memory cgroup chart: per cgroup (host and path, `_cgroups`), what the kernel compares
with its limit and what it kills on.

- usage, working set (what kubelet evicts on) and peak against the limit and `memory.high`
  (dashed lines; a cgroup without a limit has none drawn, and its panel says so), with one
  marker per OOM kill, where the count first rose (a running total, diffed: never drawn as a
  level);
- anonymous memory (not reclaimable without swap) against page cache (of which shmem and
  what is mapped);
- pressure, when the kernel gives it (v2): seconds stalled per second, `some` and `full`.

One colour per quantity: the cgroups are in panels of their own, and the ranks that observed a
cgroup in turn draw one line (hover a point for which rank read it).
"""

from __future__ import annotations

from bisect import bisect_right

from ...census import (CGROUP_ANON, CGROUP_FILE, CGROUP_FILE_MAPPED, CGROUP_HIGH, CGROUP_LIMIT,
                       CGROUP_PEAK, CGROUP_PRESSURE, CGROUP_SHMEM, CGROUP_USAGE,
                       CGROUP_WORKING_SET)
from ._cgroups import MAX_CGROUPS, Cgroup, cgroups
from ._format import byte_scale, esc
from ._telemetry import Telemetry

__all__ = ["OOM_KILL_TRACE", "cgroup_chart"]

_PANEL_HEIGHT = 210
_LEGEND_WIDTH = 250
OOM_KILL_TRACE = "OOM kill"

# (row, colour, dash, width) per line; the limits thin and dashed, in warning colours.
_LIMITS = ((CGROUP_LIMIT, "#d62728", "dash", 1.5), (CGROUP_HIGH, "#ff7f0e", "dash", 1.5))
_USAGE = ((CGROUP_USAGE, "#1f77b4", "solid", 2), (CGROUP_WORKING_SET, "#9467bd", "solid", 2),
          (CGROUP_PEAK, "#7f7f7f", "dot", 1.5)) + _LIMITS
_KINDS = ((CGROUP_ANON, "#2ca02c", "solid", 2), (CGROUP_FILE, "#8c564b", "solid", 2),
          (CGROUP_SHMEM, "#e377c2", "dot", 1.5), (CGROUP_FILE_MAPPED, "#bcbd22", "dashdot", 1.5))
_PRESSURE_STYLE = {"some": ("#17becf", "solid"), "full": ("#d62728", "dash")}


def _usage_title(cgroup: Cgroup) -> str:
    title = f"{cgroup.title}: usage, working set, peak vs limit, high"
    if (CGROUP_LIMIT.name, ()) not in cgroup.lines:
        title += " — no limit (unlimited): none drawn"
    if cgroup.kills or cgroup.kills_before:
        total = sum(k.added for k in cgroup.kills)
        title += f" — {total} OOM kill{'s' if total != 1 else ''}"
        if cgroup.kills_before:
            title += f" (+{cgroup.kills_before} before the first read)"
    return title


def _panels(cgroup: Cgroup) -> list[tuple[str, str, tuple]]:
    """(kind, title, lines) of the panels of one cgroup that have something to draw."""
    def has(lines) -> bool:
        return any((row.name, ()) in cgroup.lines for row, *_ in lines)

    panels = []
    if cgroup.kills or has(_USAGE):
        panels.append(("usage", _usage_title(cgroup), _USAGE))
    if has(_KINDS):
        panels.append(("kinds", f"{cgroup.title}: anon vs file (of file: shmem, mapped)",
                       _KINDS))
    pressure = tuple(sorted(a for m, a in cgroup.lines if m == CGROUP_PRESSURE.name))
    if pressure:
        panels.append(("pressure", f"{cgroup.title}: stalled on memory (pressure), s/s",
                       pressure))
    return panels


def cgroup_chart(go, make_subplots, data: Telemetry, *, x_range):
    """The figure, or None when no cgroup has numbers."""
    found = cgroups(data)[:MAX_CGROUPS]
    plan = [(cgroup, panel) for cgroup in found for panel in _panels(cgroup)]
    if not plan:
        return None
    fig = make_subplots(rows=len(plan), cols=1, shared_xaxes=True,
                        subplot_titles=[panel[1] for _, panel in plan],
                        vertical_spacing=min(0.06, 0.3 / len(plan)))
    seen: set[str] = set()
    for row, (cgroup, panel) in enumerate(plan, start=1):
        if panel[0] == "pressure":
            _pressure_panel(go, fig, row, cgroup, panel[2], seen)
        else:
            _byte_panel(go, fig, row, cgroup, panel[2], seen)
            if panel[0] == "usage":
                _kill_markers(go, fig, row, cgroup, seen)
    fig.update_xaxes(type="date", range=x_range, showticklabels=True, tickformat="%H:%M:%S")
    fig.update_xaxes(title_text="time (UTC)", row=len(plan), col=1)
    fig.update_layout(height=_PANEL_HEIGHT * len(plan) + 140, margin=dict(r=_LEGEND_WIDTH),
                      legend=dict(title=dict(text="cgroup quantity"), x=1.02, xanchor="left",
                                  y=1, yanchor="top"))
    return fig


def _byte_panel(go, fig, row: int, cgroup: Cgroup, lines, seen: set) -> None:
    drawn = [(m, cgroup.lines.get((m.name, ()), []), style) for m, *style in lines]
    scale, unit = byte_scale(v for _, found, _ in drawn for _, v, _ in found)
    for m, found, (color, dash, width) in drawn:
        if not found:
            continue
        points = cgroup.points(m.name)
        name = m.field  # the quantity: the legend groups it across cgroups
        fig.add_trace(go.Scatter(
            x=[t // 1_000_000 for t, _ in points],
            y=[None if v is None else float(f"{v / scale:.6g}") for _, v in points],
            customdata=[_observer(found, t) for t, _ in points],
            mode="lines", name=name, legendgroup=name, showlegend=name not in seen,
            line=dict(color=color, dash=dash, width=width), connectgaps=False,
            hovertemplate=(f"<b>{esc(m.name)}</b><br>{esc(cgroup.name)}<br>"
                           f"%{{x|%H:%M:%S.%L}}: %{{y:,.2f}} {unit}<br>read by %{{customdata}}"
                           "<extra></extra>")),
            row=row, col=1)
        seen.add(name)
    fig.update_yaxes(title_text=unit, row=row, col=1, rangemode="tozero")


def _observer(found: list, t: int) -> str:
    """The rank that read the point at `t` (found is in time order)."""
    at = bisect_right(found, t, key=lambda item: item[0]) - 1
    return str(found[max(at, 0)][2])


def _pressure_panel(go, fig, row: int, cgroup: Cgroup, levels, seen: set) -> None:
    for attributes in levels:
        level = dict(attributes).get(CGROUP_PRESSURE.attribute, "")
        color, dash = _PRESSURE_STYLE.get(level, ("#7f7f7f", "dot"))
        points = cgroup.points(CGROUP_PRESSURE.name, attributes)
        name = f"pressure {level}"
        fig.add_trace(go.Scatter(
            x=[t // 1_000_000 for t, _ in points],
            y=[None if v is None else float(f"{v:.6g}") for _, v in points],
            mode="lines", name=name, legendgroup=name, showlegend=name not in seen,
            line=dict(color=color, dash=dash, width=2), connectgaps=False,
            hovertemplate=(f"<b>{esc(CGROUP_PRESSURE.name)} {esc(level)}</b><br>"
                           f"{esc(cgroup.name)}<br>%{{x|%H:%M:%S.%L}}: %{{y:.4f}} s stalled "
                           "per s<extra></extra>")),
            row=row, col=1)
        seen.add(name)
    fig.update_yaxes(title_text="s/s", row=row, col=1, rangemode="tozero")


def _kill_markers(go, fig, row: int, cgroup: Cgroup, seen: set) -> None:
    """A marker per rise of the OOM-kill count, on the usage line where it was first seen."""
    if not cgroup.kills:
        return
    usage = cgroup.lines.get((CGROUP_USAGE.name, ()), [])
    scale, _ = byte_scale(v for _, v, _ in usage)
    fig.add_trace(go.Scatter(
        x=[k.time_ns // 1_000_000 for k in cgroup.kills],
        y=[_level_at(usage, k.time_ns) / scale for k in cgroup.kills],
        text=[f"+{k.added} OOM kill{'s' if k.added != 1 else ''} (total {k.total}), first "
              f"read by {k.observer}" for k in cgroup.kills],
        mode="markers", name=OOM_KILL_TRACE, legendgroup=OOM_KILL_TRACE,
        showlegend=OOM_KILL_TRACE not in seen,
        marker=dict(symbol="x", size=13, color="#d62728", line=dict(width=1, color="#67000d")),
        hovertemplate=(f"<b>%{{text}}</b><br>{esc(cgroup.name)}<br>"
                       "%{x|%H:%M:%S.%L}<extra></extra>")),
        row=row, col=1)
    seen.add(OOM_KILL_TRACE)


def _level_at(found: list, t: int) -> float:
    """The usage read last at or before `t` (the first one after, if none was before)."""
    if not found:
        return 0.0
    at = bisect_right(found, t, key=lambda item: item[0]) - 1
    return float(found[max(at, 0)][1])
