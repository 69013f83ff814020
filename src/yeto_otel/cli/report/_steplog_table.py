"""The last step records, one table per step-log file: each file is one process (a rank's
launch), so every column of a table holds what that process writes. Sorting the records of all
ranks together would leave most columns without the census, which a trainer adds on one rank
only; the files without it are listed folded."""

from __future__ import annotations

from ._format import clock, esc, human_bytes, is_int, number
from ._names import STEP_LOG_PREFIX
from ._roster import Roster
from ._steplog import STEP_KEYS, STEP_RECORD_FIELDS, step_log_files, steplog_level
from ._telemetry import Telemetry

__all__ = ["STEPLOG_TABLE_ID", "steplog_table"]

STEPLOG_TABLE_ID = "steplog-table"

_STEP, _TIME = STEP_RECORD_FIELDS
# The suffix of the flags that say whether an allocator `.current` is a level yet: shown in
# the table as a star on the value, not as a row of their own.
_FLAG_SUFFIX = "_is_gauge"
_STARRED = ("<p class=dim>* the allocator's <code>.freed</code> had not moved yet: this "
            "<code>.current</code> is the running total, not a level (not plotted).</p>")


def steplog_table(data: Telemetry, roster: Roster) -> str:
    """A section with, per step-log file (in rank and launch order), its last records (those
    the reading kept), one column each (oldest first), one row per key."""
    if not data.steps:
        return ""
    blocks = []
    starred = False
    last = data.steps.kept
    for stem, label in step_log_files(data, roster):
        found = data.steps.files[stem]
        block, stars = _file_table(label, stem, found.last(), found.count)
        blocks.append(block)
        starred = starred or stars
    return (f"<section id='{STEPLOG_TABLE_ID}'><h2>Last step records, per step-log file</h2>"
            f"<p class=what>One table per file (one process): its last {last} records. "
            f"Files without <code>{STEP_LOG_PREFIX}*</code> fields (the census is added on "
            f"one rank) are folded.</p>{''.join(blocks)}{_STARRED if starred else ''}"
            "</section>")


def _file_table(label: str, stem: str, shown: list[dict], count: int) -> tuple[str, bool]:
    """(a folding block with the file's table of its last records `shown`, of `count`, whether
    a value in it is starred)."""
    keys: list[str] = []
    for record in shown:
        for key in record:
            if key not in keys and key not in STEP_RECORD_FIELDS and \
                    not key.endswith(_FLAG_SUFFIX):
                keys.append(key)
    census = any(k.startswith(STEP_LOG_PREFIX) for k in keys)
    head = "".join(f"<th>{r[_STEP]}</th>" for r in shown)
    times = "".join(f"<td>{clock(r[_TIME]) if is_int(r.get(_TIME)) else '-'}</td>"
                    for r in shown)
    body = [f"<tr><th>time (UTC)</th>{times}</tr>"]
    for key in keys:
        body.append(f"<tr><th>{esc(key)}{_kind_note(key)}</th>" +
                    "".join(_cell(key, r.get(key), r) for r in shown) + "</tr>")
    starred = any(not steplog_level(r, k) for r in shown for k in keys if k in r)
    title = esc(label) if label.endswith(".jsonl") else \
        f"{esc(label)} <code class=dim>{esc(stem)}.jsonl</code>"
    return (f"<details class=steps{' open' if census else ''}><summary><b>{title}</b> "
            f"<span class=dim>last {len(shown)} of {count} records"
            f"{'' if census else ', no census fields'}</span></summary>"
            f"<div class=scroll><table class=steps><thead><tr><th>step</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div></details>", starred)


def _cell(key: str, value, record: dict) -> str:
    if value is None:
        return "<td class=dim>-</td>"
    if not steplog_level(record, key):
        return (f"<td class=dim title='.freed has not moved yet: this is the running "
                f"total, not a level'>{_cell_text(key, value)}*</td>")
    return f"<td>{_cell_text(key, value)}</td>"


def _cell_text(key: str, value) -> str:
    row = STEP_KEYS.get(key)
    if number(value) and ((row is not None and row.unit == "By") or key.endswith("_bytes")):
        return human_bytes(value)
    if isinstance(value, float):
        return f"{value:,.4g}"
    if is_int(value):
        return f"{value:,}"
    if isinstance(value, (dict, list)):  # never spelled out: it may be nested past repr's reach
        return "{…}" if isinstance(value, dict) else "[…]"
    return esc(value)[:60]


def _kind_note(key: str) -> str:
    row = STEP_KEYS.get(key)
    return f" <span class=dim>({row.kind.value})</span>" if row is not None else ""
