"""The span lanes under the process memory: one lane per rank with its restart spans and their
fragment_done events and its checkpoint loads and saves (safetensors, DCP with its phases,
torch.load), a ✖ where it died (a `yeto.rank.exit` span: on the dead rank's lane, whoever
reported it, naming the cause, phase and step), and under each rank a lane per DataLoader
worker that had spans (its loads), drawn in a colour of their own so a worker's load never
reads as its rank's."""

from __future__ import annotations

from ... import names
from ...otel import Span
from ._format import duration, esc, human_bytes, is_int, when
from ._names import FRAGMENT_EVENT, TIMELINE_SPANS, is_timeline_span
from ._roster import Roster
from ._telemetry import Telemetry

__all__ = ["add_timeline", "exit_spans", "timeline_height", "timeline_lanes", "timeline_spans",
           "timeline_title"]

# The restart's own spans in blues; safetensors loads in reds, DCP loads and their phases in
# purples, DCP saves in greys (an async save's call and upload in light blues).
_SPAN_COLORS = {
    names.RESUME_ANCHORS.name: "#9ecae1", names.RESUME_ANCHORS_LOAD.name: "#3182bd",
    names.TORCH_LOAD.name: "#08519c", names.SAFETENSORS_LOAD_FILE.name: "#d6616b",
    names.SAFETENSORS_SAFE_OPEN.name: "#e7969c", names.SAFETENSORS_LOAD.name: "#ad494a",
    names.DCP_LOAD.name: "#756bb1", names.DCP_LOAD_PLAN.name: "#bcbddc",
    names.DCP_LOAD_READ.name: "#9e9ac8", names.DCP_SAVE.name: "#636363",
    names.DCP_SAVE_PLAN.name: "#bdbdbd", names.DCP_SAVE_WRITE.name: "#969696",
    names.DCP_ASYNC_SAVE.name: "#2b8cbe", names.DCP_ASYNC_SAVE_UPLOAD.name: "#a6bddb"}
_OTHER_SPAN_COLORS = ("#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2")
_WORKER_SPAN_COLOR = "#74c476"
_IN_WORKERS = " in DataLoader workers"

# Attribute names whose integer values are bytes (shown as KiB/MiB/GiB in the hover text):
# suffixes, so the byte attributes of spans outside the table read the same way.
_BYTE_ATTRIBUTES = ("_bytes", "bytes_mapped", "bytes_touched", "bytes_read",
                    "bytes_written", "file_size", "data_size", "anonymous_delta")


def timeline_spans(data: Telemetry) -> list[tuple[str, Span]]:
    return [(i, s) for i, s in data.spans if is_timeline_span(s.name)]


def exit_spans(data: Telemetry) -> list[tuple[str, Span]]:
    """(the dead process's identity, its exit span): the dead one's lane, not its reporter's."""
    return [(str(s.attributes.get(names.EXIT_INSTANCE.name) or i), s) for i, s in data.spans
            if s.name == names.RANK_EXIT.name]


def timeline_lanes(data: Telemetry, roster: Roster) -> list[str]:
    """The lane names, top to bottom: every rank, each followed by its workers that had spans
    on the timeline."""
    with_spans = {i for i, _ in timeline_spans(data)}
    lanes = []
    for rank in roster.ranks:
        lanes.append(roster.label(rank))
        lanes += [roster.label(w) for w in roster.workers[rank] if w in with_spans]
    # a rank that died before its first export has no files of its own: a lane of its own
    return lanes + sorted({roster.label(i) for i, _ in exit_spans(data)} - set(lanes))


def timeline_title(roster: Roster) -> str:
    title = f"Restart and checkpoint spans (bars) and {FRAGMENT_EVENT} events (◆), per rank"
    return title + ("; its DataLoader workers' spans on lanes under it" if roster.parent else "")


def _bar_groups(data: Telemetry, roster: Roster) -> list[tuple[str, bool]]:
    """(span name, drawn for workers) of the bars: the restart's own names in their nesting
    order, then the rest; each name's worker bars right after its rank bars."""
    found = {(s.name, roster.is_worker(i)) for i, s in timeline_spans(data)}
    ordered = [n for n in TIMELINE_SPANS if any(n == name for name, _ in found)]
    ordered += sorted({name for name, _ in found} - set(TIMELINE_SPANS))
    return [(n, w) for n in ordered for w in (False, True) if (n, w) in found]


def timeline_height(data: Telemetry, roster: Roster, lanes: list[str]) -> int:
    return max(150, 28 * len(lanes) * max(1, len(_bar_groups(data, roster))) // 2 + 70)


def add_timeline(go, fig, data: Telemetry, row: int, roster: Roster, lanes: list[str]) -> None:
    spans_ = timeline_spans(data)
    others = iter(_OTHER_SPAN_COLORS * 10)
    for name, workers in _bar_groups(data, roster):
        chosen = [(i, s) for i, s in spans_ if s.name == name and roster.is_worker(i) == workers]
        color = _WORKER_SPAN_COLOR if workers else _SPAN_COLORS.get(name) or next(others)
        shown = name + (_IN_WORKERS if workers else "")
        fig.add_trace(go.Bar(
            orientation="h", base=[when(s.start_ns) for _, s in chosen],
            # at least half a millisecond, so a very short span still shows as a bar
            x=[max((s.end_ns - s.start_ns) / 1e6, 0.5) for _, s in chosen],
            y=[roster.label(i) for i, _ in chosen], name=shown, legendgroup="spans",
            legendgrouptitle=dict(text="spans"), offsetgroup=shown,
            marker=dict(color=color, line=dict(width=0.5, color="#08306b")),
            hovertext=[_span_hover(roster, i, s) for i, s in chosen], hoverinfo="text"),
            row=row, col=1)
    events = [(i, s, e) for i, s in spans_ for e in s.events if e.name == FRAGMENT_EVENT]
    if events:
        fig.add_trace(go.Scatter(
            x=[when(e.time_ns) for _, _, e in events], y=[roster.label(i) for i, _, _ in events],
            mode="markers", name=FRAGMENT_EVENT, legendgroup="spans",
            marker=dict(symbol="diamond", size=9, color="#e6550d",
                        line=dict(width=1, color="white")),
            hovertext=[_fragment_hover(roster, *item) for item in events], hoverinfo="text"),
            row=row, col=1)
    _add_exits(go, fig, exit_spans(data), row, roster)
    # lanes top to bottom in rank order (a category axis counts from the bottom)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=lanes[::-1],
                     row=row, col=1)


_EXIT_COLORS = {"oom_kill": "#cb181d"}  # the rest in dark grey


def _add_exits(go, fig, exits: list[tuple[str, Span]], row: int, roster: Roster) -> None:
    """A ✖ at each death's last record (when it was last seen alive), on its rank's lane."""
    if not exits:
        return
    fig.add_trace(go.Scatter(
        x=[when(s.start_ns) for _, s in exits], y=[roster.label(i) for i, _ in exits],
        mode="markers+text", name="rank exit", legendgroup="spans",
        text=[_exit_text(s) for _, s in exits], textposition="middle right",
        textfont=dict(size=10, color="#67000d"),
        marker=dict(symbol="x", size=13, line=dict(width=1, color="white"),
                    color=[_EXIT_COLORS.get(s.attributes.get(names.EXIT_CAUSE.name),
                                            "#525252") for _, s in exits]),
        hovertext=[_span_hover(roster, i, s) for i, s in exits], hoverinfo="text"),
        row=row, col=1)


def _exit_text(span: Span) -> str:
    """`oom_kill in dcp.save.write at step 4812`."""
    attributes = span.attributes
    step = attributes.get(names.EXIT_STEP.name)
    return (f"{attributes.get(names.EXIT_CAUSE.name, '?')} in "
            f"{attributes.get(names.EXIT_PHASE.name, '?')}"
            + (f" at step {step}" if step is not None else ""))


def _span_hover(roster: Roster, instance: str, span: Span) -> str:
    lines = [f"<b>{esc(span.name)}</b> — {esc(roster.label(instance))} "
             f"<span style='color:#6e7781'>{esc(instance)}</span>",
             f"{when(span.start_ns)[11:23]} UTC, {duration(span.end_ns - span.start_ns)}"]
    for key, value in sorted(span.attributes.items()):
        shown = human_bytes(value) if is_int(value) and key.endswith(_BYTE_ATTRIBUTES) \
            else value
        lines.append(f"{esc(key)}: {esc(shown)}")
    if span.events:
        lines.append(f"{len(span.events)} events")
    if span.error:
        lines.append(f"<b>ERROR</b>: {esc(span.error)}")
    return "<br>".join(lines)


def _fragment_hover(roster: Roster, instance: str, span: Span, event) -> str:
    touched = event.attributes.get(names.ANCHORS_BYTES_TOUCHED.name)
    fragment = event.attributes.get(names.FRAGMENT_ID.name, "?")
    return (f"<b>{FRAGMENT_EVENT}</b> — {esc(roster.label(instance))}<br>"
            f"fragment {esc(fragment)}"
            f"<br>{when(event.time_ns)[11:23]} UTC<br>bytes touched so far: "
            f"{human_bytes(touched) if is_int(touched) else '-'}")
