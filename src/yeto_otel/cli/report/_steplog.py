"""The trainer's step log: the host_mem.* levels over step (one line per key and step-log
file) and a table of the last records, running totals and flags included."""

from __future__ import annotations

from ...census import CENSUS, Kind
from ._format import (DASHES, RANK_COLORS, byte_scale, clock, esc, human_bytes, is_int, number)
from ._names import (STEP_LOG_ALLOCATOR_PART, STEP_LOG_ALLOCATOR_PREFIX, STEP_LOG_NODE_PREFIX,
                     STEP_LOG_PREFIX, allocator_flag_key)
from ._telemetry import Telemetry

__all__ = ["STEPLOG_TABLE_ID", "steplog_chart", "steplog_table"]

STEPLOG_TABLE_ID = "steplog-table"

_STEP_KEYS = {m.step_log_key: m for m in CENSUS if m.step_log_key}
# A step record's own fields (not census keys), and what the demo trainer adds to them.
_STEP, _TIME = "step", "time_unix_nano"
_EXTRA = ("loss",)
# The suffix of the flags that say whether an allocator `.current` is a level yet: shown in
# the table as a star on the value, not as a row of their own.
_FLAG_SUFFIX = "_is_gauge"


def steplog_level(record: dict, key: str) -> bool:
    """Whether `record[key]` is a level: an allocator `.current` is one only once `.freed` has
    moved (the step log's `<stat>.current_is_gauge` flag); until then it is the running total."""
    flag = allocator_flag_key(key)
    return flag is None or record.get(flag, True) is not False


def _is_level(key: str) -> bool:
    """Whether a step-log key holds bytes that are a level (plotted), from the census table or,
    for keys it does not know, by the `_bytes` naming convention."""
    row = _STEP_KEYS.get(key)
    if row is not None:
        return row.kind is not Kind.RUNNING_TOTAL and row.unit == "By"
    return key.endswith("_bytes")


def _steplog_panels(data: Telemetry) -> list[tuple[str, list[str], bool]]:
    """[(title, keys, in bytes)] of the panels that have data, in page order."""
    keys: list[str] = []
    for _, record in data.steps:
        for key, value in record.items():
            if key.startswith(STEP_LOG_PREFIX) and key not in keys and \
                    isinstance(value, (int, float)) and not isinstance(value, bool):
                keys.append(key)
    levels = [k for k in keys if _is_level(k)]
    process = [k for k in levels if not k.startswith(STEP_LOG_ALLOCATOR_PREFIX)
               and not k.startswith(STEP_LOG_NODE_PREFIX)]
    node = [k for k in levels if k.startswith(STEP_LOG_NODE_PREFIX)]
    allocator = [k for k in levels if k.startswith(STEP_LOG_ALLOCATOR_PREFIX)]
    extra = [k for k in _EXTRA if any(number(r.get(k)) for _, r in data.steps)]
    return [p for p in (("Process memory (peaks dotted)", process, True),
                        ("Node memory", node, True),
                        ("Host allocator: current (solid) and peak (dotted)", allocator, True),
                        ("Loss", extra, False)) if p[1]]


def steplog_chart(go, make_subplots, data: Telemetry):
    """The figure, or None when the step log has nothing to plot."""
    if not data.steps:
        return None
    panels = _steplog_panels(data)
    if not panels:
        return None
    stems = sorted({stem for stem, _ in data.steps})
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True,
                        subplot_titles=[t for t, _, _ in panels], vertical_spacing=0.09)
    # one colour per key across panels; files of several ranks are told apart by dash
    palette = iter(RANK_COLORS * 10)
    color: dict[str, str] = {}
    for row, (title, columns, in_bytes) in enumerate(panels, start=1):
        if in_bytes:
            scale, unit = byte_scale(r.get(k) for _, r in data.steps for k in columns
                                     if number(r.get(k)))
        else:
            scale, unit = 1.0, ""
        for key in columns:
            color.setdefault(key, next(palette))
            for n, stem in enumerate(stems):
                _add_steplog_line(go, fig, data, key, stem, row=row, title=title, scale=scale,
                                  unit=unit, color=color[key], dash=DASHES[(2 * n) % len(DASHES)],
                                  several=len(stems) > 1)
        fig.update_yaxes(title_text=unit or None, row=row, col=1)
    fig.update_xaxes(title_text="step", row=len(panels), col=1)
    fig.update_layout(height=300 * len(panels) + 120)
    return fig


def _add_steplog_line(go, fig, data: Telemetry, key: str, stem: str, *, row: int, title: str,
                      scale: float, unit: str, color: str, dash: str, several: bool) -> None:
    """One key of one step-log file over step; a value that is not yet a level is a gap."""
    records = sorted((r for s, r in data.steps if s == stem and number(r.get(key))),
                     key=lambda r: r[_STEP])
    if not records:
        return
    name = key.replace(STEP_LOG_PREFIX, "").replace(STEP_LOG_ALLOCATOR_PART, "")
    row_kind = _STEP_KEYS.get(key)
    peak = row_kind is not None and row_kind.kind is Kind.HIGH_WATER_MARK
    fig.add_trace(go.Scatter(
        x=[r[_STEP] for r in records],
        y=[r[key] / scale if steplog_level(r, key) else None for r in records],
        mode="lines+markers", name=name + (f" · {stem}" if several else ""),
        line=dict(color=color, width=2, dash="dot" if peak else dash),
        marker=dict(size=5), connectgaps=False,
        legendgroup=f"steplog-{row}", legendgrouptitle=dict(text=title),
        hovertemplate=(f"{esc(key)}<br>step %{{x}}: %{{y:,.2f}} {unit}"
                       "<extra></extra>")), row=row, col=1)


def steplog_table(data: Telemetry, last: int = 10) -> str:
    """The last records, one column each (oldest first), one row per key."""
    if not data.steps:
        return ""
    records = sorted(data.steps, key=lambda item: (item[1].get(_TIME) or 0,
                                                   item[1][_STEP]))[-last:]
    keys: list[str] = []
    for _, record in records:
        for key in record:
            if key not in keys and key not in (_STEP, _TIME) and not key.endswith(_FLAG_SUFFIX):
                keys.append(key)
    head = "".join(f"<th>{r[_STEP]}</th>" for _, r in records)
    times = "".join(f"<td>{clock(r[_TIME]) if is_int(r.get(_TIME)) else '-'}</td>"
                    for _, r in records)
    body = [f"<tr><th>time (UTC)</th>{times}</tr>"]
    if len({stem for stem, _ in records}) > 1:
        body.append("<tr><th>file</th>" + "".join(f"<td>{esc(s)}</td>" for s, _ in records)
                    + "</tr>")
    for key in keys:
        body.append(f"<tr><th>{esc(key)}{_kind_note(key)}</th>" +
                    "".join(_cell(key, r.get(key), r) for _, r in records) + "</tr>")
    starred = any(not steplog_level(r, k) for _, r in records for k in keys if k in r)
    note = ("<p class=dim>* the allocator's <code>.freed</code> had not moved yet: this "
            "<code>.current</code> is the running total, not a level (not plotted).</p>"
            if starred else "")
    return (f"<section id='{STEPLOG_TABLE_ID}'><h2>Last {len(records)} step records</h2>"
            f"<div class=scroll><table class=steps><thead><tr><th>step</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>{note}</section>")


def _cell(key: str, value, record: dict) -> str:
    if value is None:
        return "<td class=dim>-</td>"
    if not steplog_level(record, key):
        return (f"<td class=dim title='.freed has not moved yet: this is the running "
                f"total, not a level'>{_cell_text(key, value)}*</td>")
    return f"<td>{_cell_text(key, value)}</td>"


def _cell_text(key: str, value) -> str:
    row = _STEP_KEYS.get(key)
    if number(value) and ((row is not None and row.unit == "By") or key.endswith("_bytes")):
        return human_bytes(value)
    if isinstance(value, float):
        return f"{value:,.4g}"
    if is_int(value):
        return f"{value:,}"
    return esc(value)[:60]


def _kind_note(key: str) -> str:
    row = _STEP_KEYS.get(key)
    return f" <span class=dim>({row.kind.value})</span>" if row is not None else ""
