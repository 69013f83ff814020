"""The trainer's step log: the host_mem.* levels over step, one line per key and step-log
file (each file is one process: a rank's launch when it pairs with its telemetry files); the
table of the last records is `_steplog_table`."""

from __future__ import annotations

from ...census import CENSUS, Kind
from ._format import DASHES, RANK_COLORS, byte_scale, esc
from ._names import (STEP_LOG_ALLOCATOR_PART, STEP_LOG_ALLOCATOR_PREFIX, STEP_LOG_NODE_PREFIX,
                     STEP_LOG_PREFIX)
from ._roster import Roster
from ._steplog_fold import CHARTED_EXTRA, STEP_FIELD, TIME_FIELD, steplog_level
from ._telemetry import Telemetry

__all__ = ["STEP_KEYS", "STEP_RECORD_FIELDS", "step_log_files", "steplog_chart", "steplog_level"]

STEP_KEYS = {m.step_log_key: m for m in CENSUS if m.step_log_key}
_READ_HOVER = ("<br>read during this step, %{customdata[0]:.2f} s before the record of step "
               "%{customdata[1]} (re-read only within its CPU budget)")
# A step record's own fields (not census keys).
STEP_RECORD_FIELDS = STEP_FIELD, TIME_FIELD


def _is_level(key: str) -> bool:
    """Whether a step-log key holds bytes that are a level (plotted), from the census table or,
    for keys it does not know, by the `_bytes` naming convention."""
    row = STEP_KEYS.get(key)
    if row is not None:
        return row.kind is not Kind.RUNNING_TOTAL and row.unit == "By"
    return key.endswith("_bytes")


def _steplog_panels(data: Telemetry) -> list[tuple[str, list[str], bool]]:
    """[(title, keys, in bytes)] of the panels that have data, in page order."""
    keys = [k for k in data.steps.keys if k.startswith(STEP_LOG_PREFIX)]
    levels = [k for k in keys if _is_level(k)]
    process = [k for k in levels if not k.startswith(STEP_LOG_ALLOCATOR_PREFIX)
               and not k.startswith(STEP_LOG_NODE_PREFIX)]
    node = [k for k in levels if k.startswith(STEP_LOG_NODE_PREFIX)]
    allocator = [k for k in levels if k.startswith(STEP_LOG_ALLOCATOR_PREFIX)]
    extra = [k for k in CHARTED_EXTRA if data.steps.has_values(k)]
    return [p for p in (("Process memory (peaks dotted)", process, True),
                        ("Node memory", node, True),
                        ("Host allocator: current (solid) and peak (dotted)", allocator, True),
                        ("Loss", extra, False)) if p[1]]


def step_log_files(data: Telemetry, roster: Roster) -> list[tuple[str, str]]:
    """(file stem, what it is) of the step-log files, in rank and launch order: `rank 0
    (launch 2, 14:20:02)` for one that pairs with a process's telemetry files
    (`steplog-<their stem>.jsonl`), else its file name."""
    found = []
    for stem in data.steps.stems():
        owner = roster.step_log_owner(stem)
        if owner is None:
            found.append(((len(roster.ranks), 0), 0, stem, f"{stem}.jsonl"))
        else:
            instance, launch = owner
            found.append((roster.position(instance), launch.number, stem,
                          roster.trace_name(instance, launch)))
    return [(stem, label) for *_, stem, label in sorted(found)]


def steplog_chart(go, make_subplots, data: Telemetry, roster: Roster):
    """The figure, or None when the step log has nothing to plot."""
    if not data.steps:
        return None
    panels = _steplog_panels(data)
    if not panels:
        return None
    files = step_log_files(data, roster)
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True,
                        subplot_titles=[t for t, _, _ in panels], vertical_spacing=0.09)
    # one colour per key across panels; files of several ranks are told apart by dash
    palette = iter(RANK_COLORS * 10)
    color: dict[str, str] = {}
    for row, (title, columns, in_bytes) in enumerate(panels, start=1):
        if in_bytes:
            scale, unit = byte_scale(data.steps.values(columns))
        else:
            scale, unit = 1.0, ""
        for key in columns:
            color.setdefault(key, next(palette))
            for n, (stem, label) in enumerate(files):
                _add_steplog_line(go, fig, data, key, stem, row=row, title=title, scale=scale,
                                  unit=unit, color=color[key], dash=DASHES[(2 * n) % len(DASHES)],
                                  label=label if len(files) > 1 else None)
        fig.update_yaxes(title_text=unit or None, row=row, col=1)
    fig.update_xaxes(title_text="step", row=len(panels), col=1)
    fig.update_layout(height=300 * len(panels) + 120)
    return fig


def _add_steplog_line(go, fig, data: Telemetry, key: str, stem: str, *, row: int, title: str,
                      scale: float, unit: str, color: str, dash: str, label: str | None) -> None:
    """One key of one step-log file over step (downsampled, every bucket's extremes kept); a
    value that is not yet a level is a gap."""
    points = data.steps.line(stem, key)
    if not points:
        return
    name = key.replace(STEP_LOG_PREFIX, "").replace(STEP_LOG_ALLOCATOR_PART, "")
    row_kind = STEP_KEYS.get(key)
    peak = row_kind is not None and row_kind.kind is Kind.HIGH_WATER_MARK
    # A value read within a budget: one point per read, at the step it was read, its age shown.
    ages = data.steps.read_ages(stem, key)
    read = any(ages)
    fig.add_trace(go.Scatter(
        x=[step for step, _ in points],
        y=[None if value is None else value / scale for _, value in points],
        mode="lines+markers", name=name + (f" · {label}" if label else ""),
        line=dict(color=color, width=2, dash="dot" if peak else dash),
        marker=dict(size=5), connectgaps=False,
        customdata=[list(a) if a else [None, None] for a in ages] if read else None,
        legendgroup=f"steplog-{row}", legendgrouptitle=dict(text=title),
        hovertemplate=(f"{esc(key)}{f' · {esc(label)}' if label else ''}<br>"
                       f"step %{{x}}: %{{y:,.2f}} {unit}"
                       + (_READ_HOVER if read else "") + "<extra></extra>")), row=row, col=1)
