"""The checkpoint loads and saves the restart chart draws beside the anchor restarts: what
kind of span each is, which of its attributes are the bytes drawn as bars, and which spans
count.

A load is counted once, at its outermost span: a `torch.load` inside an anchor restart is the
restart's own read, and a load inside another load (safetensors reached through torch.load)
is part of that one. A save holds nothing of that kind: the `dcp.save` an `async_save` runs in
the background is drawn as well as the `dcp.async_save` call (the staged copy is the call's,
the bytes written the save's). DataLoader workers' loads stay on the timeline only: a
worker's memory is never drawn beside its rank's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import names
from ...otel import Span
from ._format import is_int
from ._names import RESTART_SPAN, SAVE_SPANS
from ._roster import Roster
from ._telemetry import Telemetry

__all__ = ["KINDS", "SLOTS", "LoadKind", "chart_loads", "children_of"]

# The bar slots, in bar order: (slot, colour). A measure keeps its slot and colour whatever
# the kind, so the bytes touched of a safetensors load stand where an anchor restart's do.
SLOTS = {"size": "#c6dbef", "mapped": "#6baed6", "touched": "#08519c",
         "anonymous": "#e6550d", "stored": "#74c476"}


@dataclass(frozen=True)
class LoadKind:
    span: str
    # The fill pattern tells the kinds apart (the colour is the measure); anchors are solid.
    pattern: str
    # (slot, legend name, attribute) of each bar the kind can have
    bars: tuple[tuple[str, str, str], ...]
    path: str | None = None
    # (what, attribute): the counts the hover text shows, "tensors" first
    counts: tuple[tuple[str, str], ...] = ()
    residency_error: str | None = None

    def value(self, span: Span, attribute: str) -> int | None:
        """A bar's number, or None (no bar) when the span has none: a measurement that was not
        taken never reads as a zero."""
        value = span.attributes.get(attribute)
        return value if is_int(value) else None


def _residency(mapped, touched, anonymous) -> tuple[tuple[str, str, str], ...]:
    return (("mapped", "bytes mapped", mapped.name), ("touched", "bytes touched", touched.name),
            ("anonymous", "anonymous delta", anonymous.name))


_SAFETENSORS_FILE = dict(
    path=names.SAFETENSORS_PATH.name,
    counts=(("tensors", names.SAFETENSORS_TENSOR_COUNT.name),
            ("tensors read", names.SAFETENSORS_TENSORS_READ.name),
            ("device", names.SAFETENSORS_DEVICE.name),
            ("backend", names.SAFETENSORS_BACKEND.name)),
    residency_error=names.SAFETENSORS_RESIDENCY_ERROR.name)
_SAFETENSORS_BARS = (("size", "file size", names.SAFETENSORS_FILE_SIZE.name),
                     *_residency(names.SAFETENSORS_BYTES_MAPPED,
                                 names.SAFETENSORS_BYTES_TOUCHED,
                                 names.SAFETENSORS_ANONYMOUS_DELTA))

# Every kind the chart draws, in legend order: the anchor restarts first.
KINDS: dict[str, LoadKind] = {k.span: k for k in (
    LoadKind(RESTART_SPAN, "", (("size", "file size", names.ANCHORS_FILE_SIZE.name),
                                *_residency(names.ANCHORS_BYTES_MAPPED,
                                            names.ANCHORS_BYTES_TOUCHED,
                                            names.ANCHORS_ANONYMOUS_DELTA)),
             path=names.ANCHORS_PATH.name,
             counts=(("tensors", names.ANCHORS_TENSOR_COUNT.name),),
             residency_error=names.ANCHORS_RESIDENCY_ERROR.name),
    LoadKind(names.SAFETENSORS_LOAD_FILE.name, "/", _SAFETENSORS_BARS, **_SAFETENSORS_FILE),
    LoadKind(names.SAFETENSORS_SAFE_OPEN.name, "\\", _SAFETENSORS_BARS, **_SAFETENSORS_FILE),
    LoadKind(names.SAFETENSORS_LOAD.name, "-",
             (("size", "data size", names.SAFETENSORS_DATA_SIZE.name),
              ("anonymous", "anonymous delta", names.SAFETENSORS_ANONYMOUS_DELTA.name)),
             counts=(("tensors", names.SAFETENSORS_TENSOR_COUNT.name),),
             residency_error=names.SAFETENSORS_RESIDENCY_ERROR.name),
    LoadKind(names.DCP_LOAD.name, "x",
             (("stored", "stored bytes read", names.DCP_BYTES_READ.name),
              ("anonymous", "anonymous delta", names.DCP_ANONYMOUS_DELTA.name)),
             path=names.DCP_PATH.name,
             counts=(("items read", names.DCP_ITEMS_READ.name),
                     ("files read", names.DCP_FILES_READ.name),
                     ("rank", names.DCP_RANK.name)),
             residency_error=names.DCP_RESIDENCY_ERROR.name),
    LoadKind(names.DCP_SAVE.name, "+",
             (("stored", "stored bytes written", names.DCP_BYTES_WRITTEN.name),
              ("anonymous", "anonymous delta", names.DCP_ANONYMOUS_DELTA.name)),
             path=names.DCP_PATH.name,
             counts=(("items written", names.DCP_ITEMS_WRITTEN.name),
                     ("files written", names.DCP_FILES_WRITTEN.name),
                     ("rank", names.DCP_RANK.name)),
             residency_error=names.DCP_RESIDENCY_ERROR.name),
    LoadKind(names.DCP_ASYNC_SAVE.name, "|",
             (("anonymous", "anonymous delta (staged copy)", names.DCP_ANONYMOUS_DELTA.name),),
             path=names.DCP_PATH.name, counts=(("rank", names.DCP_RANK.name),),
             residency_error=names.DCP_RESIDENCY_ERROR.name),
    LoadKind(names.TORCH_LOAD.name, ".",
             (("size", "file size", names.TORCH_LOAD_FILE_SIZE.name),
              ("mapped", "bytes mapped", names.TORCH_LOAD_BYTES_MAPPED.name)),
             path=names.TORCH_LOAD_PATH.name,
             counts=(("mmap", names.TORCH_LOAD_MMAP.name),)),
)}

# Deeper than this a parent chain is not a real one (a loop in damaged files): stop walking.
_MAX_DEPTH = 64


def children_of(data: Telemetry) -> dict[tuple[str, str], list[Span]]:
    """(instance, span id) -> the spans whose parent it is."""
    children: dict[tuple[str, str], list[Span]] = {}
    for inst, span in data.spans:
        if span.parent_span_id:
            children.setdefault((inst, span.parent_span_id), []).append(span)
    return children


def chart_loads(data: Telemetry, roster: Roster) -> list[tuple[str, Span, LoadKind]]:
    """(instance, span, kind) of every anchor restart, outermost checkpoint load and
    checkpoint save of a rank (or plain process), by rank then time."""
    by_id = {(inst, span.span_id): span for inst, span in data.spans}
    chosen = []
    for inst, span in data.spans:
        kind = KINDS.get(span.name)
        if kind is None or roster.is_worker(inst):
            continue
        if span.name == RESTART_SPAN or not _inside_a_load(by_id, inst, span):
            chosen.append((inst, span, kind))
    order = {rank: n for n, rank in enumerate(roster.ranks)}
    return sorted(chosen, key=lambda c: (order.get(c[0], len(order)), c[0], c[1].start_ns))


def _inside_a_load(by_id: dict, inst: str, span: Span) -> bool:
    parent_id = span.parent_span_id
    for _ in range(_MAX_DEPTH):
        parent = by_id.get((inst, parent_id)) if parent_id else None
        if parent is None:
            return False
        if parent.name in KINDS and parent.name not in SAVE_SPANS:
            return True
        parent_id = parent.parent_span_id
    return True
