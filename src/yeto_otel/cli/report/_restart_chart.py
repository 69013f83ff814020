"""The restarts side by side: for every `yeto.resume.anchors` span (one restart of one rank),
the anchor file's size, the bytes mapped, the bytes the restart really touched and the growth
of anonymous memory, as grouped bars."""

from __future__ import annotations

from collections import defaultdict

from ... import names
from ...otel import Span
from ._format import byte_scale, duration, esc, human_bytes, is_int, when
from ._names import RESTART_SPAN
from ._roster import Roster
from ._telemetry import Telemetry

__all__ = ["restart_chart"]

# (legend name, span attribute, colour), in bar order
_COLUMNS = (("file size", names.ANCHORS_FILE_SIZE.name, "#c6dbef"),
            ("bytes mapped", names.ANCHORS_BYTES_MAPPED.name, "#6baed6"),
            ("bytes touched", names.ANCHORS_BYTES_TOUCHED.name, "#08519c"),
            ("anonymous delta", names.ANCHORS_ANONYMOUS_DELTA.name, "#e6550d"))
# Past this many restarts the bars are too narrow for their value labels.
_MAX_LABELLED = 8
# The load call under a restart span (`yeto.resume.anchors.load` or `torch.load`).
_LOAD_SUFFIX = ".load"


def restart_chart(go, data: Telemetry, roster: Roster):
    """The figure, or None when there was no restart."""
    restarts = [(i, s) for i, s in data.spans if s.name == RESTART_SPAN]
    if not restarts:
        return None
    children = defaultdict(list)
    for inst, span in data.spans:
        children[(inst, span.parent_span_id)].append(span)
    values = {attr: [] for _, attr, _ in _COLUMNS}
    hovers = []
    for inst, span in restarts:
        a = span.attributes
        for _, attr, _ in _COLUMNS:
            values[attr].append(a.get(attr) if is_int(a.get(attr)) else None)
        load = [c for c in children[(inst, span.span_id)] if c.name.endswith(_LOAD_SUFFIX)]
        hovers.append(_hover(inst, span, load))
    labels = _labels([(roster.label(inst), span) for inst, span in restarts])
    scale, unit = byte_scale(v for col in values.values() for v in col)
    fig = go.Figure()
    for name, attr, color in _COLUMNS:
        ys = [None if v is None else v / scale for v in values[attr]]
        if all(y is None for y in ys):
            continue
        fig.add_trace(go.Bar(
            x=labels, y=ys, name=name, marker_color=color, hovertext=hovers, hoverinfo="text",
            text=[human_bytes(v) if v is not None else "" for v in values[attr]],
            textposition="outside" if len(restarts) <= _MAX_LABELLED else "none",
            cliponaxis=False))
    fig.update_layout(barmode="group", height=430, yaxis_title=unit, margin=dict(r=40),
                      legend=dict(orientation="h", y=1.12, x=0))
    return fig


def _labels(restarts: list[tuple[str, Span]]) -> list[str]:
    """One x label per restart: rank, time and load mode, numbered when two would be equal."""
    labels: list[str] = []
    for rank, span in restarts:
        mode = span.attributes.get(names.ANCHORS_LOAD_MODE.name, "")
        label = base = f"{rank}<br>{when(span.start_ns)[11:23]} {mode}".rstrip()
        n = 2
        while label in labels:  # every restart its own group, even at the same millisecond
            label, n = f"{base} #{n}", n + 1
        labels.append(label)
    return labels


def _hover(inst: str, span: Span, load: list[Span]) -> str:
    a = span.attributes
    mapped = a.get(names.ANCHORS_BYTES_MAPPED.name)
    touched = a.get(names.ANCHORS_BYTES_TOUCHED.name)
    share = (f" ({100 * touched / mapped:.0f}% of mapped)"
             if is_int(mapped) and is_int(touched) and mapped > 0 else "")
    residency_error = a.get(names.ANCHORS_RESIDENCY_ERROR.name)
    return "<br>".join(filter(None, [
        f"<b>{esc(inst)}</b> — restart at {when(span.start_ns)[11:23]} UTC",
        f"load mode: {esc(a.get(names.ANCHORS_LOAD_MODE.name, '?'))}, dtype "
        f"{esc(a.get(names.ANCHORS_DTYPE.name, '?'))}, "
        f"{esc(a.get(names.ANCHORS_TENSOR_COUNT.name, '?'))} tensors",
        f"window {duration(span.end_ns - span.start_ns)}" +
        (f", load {duration(load[0].end_ns - load[0].start_ns)}" if load else ""),
        f"file size {_bytes(a.get(names.ANCHORS_FILE_SIZE.name))}",
        f"mapped {_bytes(mapped)}, touched {_bytes(touched)}{share}",
        f"anonymous delta {_bytes(a.get(names.ANCHORS_ANONYMOUS_DELTA.name))}",
        f"fragments done: {esc(a.get(names.ANCHORS_FRAGMENTS_DONE.name, '-'))}",
        f"path: {esc(a.get(names.ANCHORS_PATH.name, '?'))}",
        f"<b>ERROR</b>: {esc(span.error)}" if span.error else "",
        f"residency not measured: {esc(residency_error)}"
        if names.ANCHORS_RESIDENCY_ERROR.name in a else ""]))


def _bytes(value) -> str:
    """An attribute that should hold bytes: sized when it is an integer, else shown as it came
    (another writer's string or double is not ours to guess at)."""
    if is_int(value):
        return human_bytes(value)
    return "-" if value is None else esc(value)[:40]
