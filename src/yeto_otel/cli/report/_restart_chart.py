"""The restarts and checkpoint loads side by side: for every `yeto.resume.anchors` span (one
restart of one rank) and every checkpoint load or save of a rank (safetensors, DCP, a
`torch.load` outside a restart; see `_loads`), the file's size, the bytes mapped, the bytes
the load really touched, the growth of anonymous memory and the stored bytes read or written,
as grouped bars. A measure keeps its colour whatever the kind; the kind is the bar's pattern,
its legend group and its x label."""

from __future__ import annotations

from ... import names
from ...otel import Span
from ._format import byte_scale, duration, esc, human_bytes, is_int, when
from ._loads import KINDS, SLOTS, LoadKind, chart_loads, children_of
from ._names import RESTART_SPAN
from ._roster import Roster
from ._telemetry import Telemetry

__all__ = ["restart_chart"]

# The load call a restart span holds.
_RESTART_LOADS = (names.RESUME_ANCHORS_LOAD.name, names.TORCH_LOAD.name)
# Past this many restarts and loads the bars are too narrow for their value labels.
_MAX_LABELLED = 8


def restart_chart(go, data: Telemetry, roster: Roster):
    """The figure, or None when no restart or load has a number to draw."""
    loads = chart_loads(data, roster)
    if not loads:
        return None
    children = children_of(data)
    labels = _labels([(roster.label(inst), span) for inst, span, _ in loads])
    hovers = [_hover(inst, span, children.get((inst, span.span_id), []))
              if kind.span == RESTART_SPAN else _load_hover(inst, span, kind, children)
              for inst, span, kind in loads]
    scale, unit = byte_scale(kind.value(span, attr) for _, span, kind in loads
                             for _, _, attr in kind.bars)
    kinds = [k for k in KINDS.values() if any(kind is k for _, _, kind in loads)]
    fig = go.Figure()
    for kind in kinds:
        mine = [n for n, (_, _, k) in enumerate(loads) if k is kind]
        for slot, legend, attr in kind.bars:
            values = [kind.value(loads[n][1], attr) for n in mine]
            if all(v is None for v in values):
                continue  # no bar at all rather than a row of zeros nobody measured
            fig.add_trace(go.Bar(
                x=[labels[n] for n in mine], y=[None if v is None else v / scale for v in values],
                name=legend, legendgroup=kind.span, offsetgroup=slot,
                legendgrouptitle=dict(text=kind.span) if len(kinds) > 1 else None,
                marker=dict(color=SLOTS[slot], pattern=dict(shape=kind.pattern,
                                                              fillmode="overlay")),
                hovertext=[hovers[n] for n in mine], hoverinfo="text",
                text=[human_bytes(v) if v is not None else "" for v in values],
                textposition="outside" if len(loads) <= _MAX_LABELLED else "none",
                cliponaxis=False))
    if not fig.data:
        return None  # loads, but not one number among them: nothing to draw
    legend = (dict(orientation="h", y=1.12, x=0) if len(kinds) == 1 else
              dict(orientation="v", x=1.02, y=1, groupclick="toggleitem", tracegroupgap=12))
    # tall enough for the grouped legend to stand without a scroll bar
    height = max(430, 200 + 21 * len(fig.data) + 36 * len(kinds)) if len(kinds) > 1 else 430
    fig.update_layout(barmode="group", height=height, yaxis_title=unit, margin=dict(r=40),
                      legend=legend)
    # one group per restart or load, by rank then time, whichever kinds it holds
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    return fig


def _labels(loads: list[tuple[str, Span]]) -> list[str]:
    """One x label per restart or load: rank, time and the anchors' load mode or the load's
    kind, numbered when two would be equal."""
    labels: list[str] = []
    for rank, span in loads:
        kind = (span.attributes.get(names.ANCHORS_LOAD_MODE.name, "")
                if span.name == RESTART_SPAN else span.name)
        label = base = f"{rank}<br>{when(span.start_ns)[11:23]} {kind}".rstrip()
        n = 2
        while label in labels:  # every restart its own group, even at the same millisecond
            label, n = f"{base} #{n}", n + 1
        labels.append(label)
    return labels


def _hover(inst: str, span: Span, children: list[Span]) -> str:
    a = span.attributes
    # the load call under a restart span (`yeto.resume.anchors.load`, or `torch.load` itself)
    load = [c for c in children if c.name in _RESTART_LOADS]
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


def _load_hover(inst: str, span: Span, kind: LoadKind, children: dict) -> str:
    a = span.attributes
    values = {slot: (legend, a.get(attr)) for slot, legend, attr in kind.bars}
    mapped, touched = values.get("mapped", ("", None))[1], values.get("touched", ("", None))[1]
    share = (f" ({100 * touched / mapped:.0f}% of mapped)"
             if is_int(mapped) and is_int(touched) and mapped > 0 else "")
    sized = [f"{legend} {_bytes(value)}" + (share if slot == "touched" else "")
             for slot, (legend, value) in values.items()]
    counts = [f"{what}: {esc(a[attr])}" for what, attr in kind.counts if attr in a]
    phases = [f"{esc(c.name)} {duration(c.end_ns - c.start_ns)}"
              for c in sorted(children.get((inst, span.span_id), []), key=lambda c: c.start_ns)]
    error = a.get(kind.residency_error) if kind.residency_error else None
    return "<br>".join(filter(None, [
        f"<b>{esc(inst)}</b> — {esc(span.name)} at {when(span.start_ns)[11:23]} UTC",
        f"duration {duration(span.end_ns - span.start_ns)}" +
        (f" ({', '.join(phases[:4])})" if phases else ""),
        ", ".join(counts), ", ".join(sized[:2]), ", ".join(sized[2:]),
        f"path: {esc(a.get(kind.path, '?'))}" if kind.path else "",
        f"<b>ERROR</b>: {esc(span.error)}" if span.error else "",
        f"residency not measured: {esc(error)}" if error is not None else ""]))
