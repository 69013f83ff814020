"""How values look on the page: times, durations, bytes, units, and the colours, dashes and
markers every chart shares."""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone

from ...units import format_bytes
from ._names import SHORT_PREFIXES

__all__ = ["DASHES", "LAUNCH_GLYPHS", "LAUNCH_SYMBOLS", "RANK_COLORS", "byte_scale", "clock",
           "duration", "esc", "human_bytes", "is_int", "launch_symbol", "number", "shade",
           "short", "unit_name", "when"]

# One colour per rank, the same rank the same colour in every chart (plotly's default cycle).
RANK_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf")
# Within a panel the colour is the rank, so metrics are told apart by dash.
DASHES = ("solid", "dot", "dash", "dashdot", "longdash", "longdashdot")
# A rank's launches (a restart is a new process under the same identity) keep its colour and
# are told apart by marker: launch 1 dots, launch 2 open squares, ... (and their own legend
# entry), since within a panel the dash already tells the metrics apart.
LAUNCH_SYMBOLS = ("circle", "square-open", "diamond-open", "triangle-up-open", "x-open",
                  "star-open")
LAUNCH_GLYPHS = ("●", "□", "◇", "△", "⊠", "☆")


def launch_symbol(launch: int) -> str:
    return LAUNCH_SYMBOLS[(launch - 1) % len(LAUNCH_SYMBOLS)]


def shade(color: str, index: int) -> str:
    """The `index`-th shade of a `#rrggbb` colour, for the DataLoader workers of a rank: the
    colour itself, then lighter and darker by turns, a little further each time."""
    if index <= 0:
        return color
    towards = 255 if index % 2 else 0
    amount = min(0.3 + 0.15 * ((index - 1) // 2), 0.75)
    channels = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (towards - c) * amount):02x}" for c in channels)


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
