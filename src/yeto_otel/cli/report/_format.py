"""How values look on the page: times, durations, bytes, units, and the colours and dashes
every chart shares."""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone

from ...units import format_bytes
from ._names import SHORT_PREFIXES

__all__ = ["DASHES", "RANK_COLORS", "byte_scale", "clock", "duration", "esc", "human_bytes",
           "is_int", "number", "rank_colors", "short", "unit_name", "when"]

# One colour per rank, the same rank the same colour in every chart (plotly's default cycle).
RANK_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf")
# Within a panel the colour is the rank, so metrics are told apart by dash.
DASHES = ("solid", "dot", "dash", "dashdot", "longdash", "longdashdot")


def rank_colors(instances: list[str]) -> dict[str, str]:
    return {inst: RANK_COLORS[i % len(RANK_COLORS)] for i, inst in enumerate(instances)}


def when(ns: int) -> str:
    """Unix nanos as a naive UTC time string plotly reads (microseconds kept)."""
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def clock(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%H:%M:%S")


def duration(ns: int) -> str:
    seconds = ns / 1e9
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def human_bytes(value: float | None) -> str:
    return "-" if value is None else format_bytes(value)


def byte_scale(values) -> tuple[float, str]:
    """(divisor, unit) for an axis of byte values: GiB only from 4 GiB up, so a few GiB still
    show their MiB steps."""
    top = max((abs(v) for v in values if v is not None), default=0)
    if top >= 4 * 2**30:
        return 2.0**30, "GiB"
    if top >= 2**20:
        return 2.0**20, "MiB"
    return 2.0**10, "KiB"


def unit_name(unit: str) -> str:
    """An OTel unit for an axis: `{call}` reads as `call`, no unit as `1`."""
    return unit.strip("{}") or "1"


def short(metric: str) -> str:
    """A metric name without its namespace, for panel titles."""
    for prefix in SHORT_PREFIXES:
        if metric.startswith(prefix):
            return metric[len(prefix):]
    return metric


def esc(text) -> str:
    return html.escape(str(text))


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)
