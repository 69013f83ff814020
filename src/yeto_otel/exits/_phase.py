"""The record's phase from the spans yeto-otel makes: the innermost one still open.

A span processor sees every span of the process start and end, on the thread that runs it; only
yeto's own spans (the span table, `yeto_otel.names.SPANS`, less the exit span itself and the
demo's steps) set the phase. Spans of other instrumentations never do: a phase is a name this
product documents.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ..names import DEMO_STEP, RANK_EXIT, SPANS
from ._process_exits import process_exits

__all__ = ["PHASE_SPANS", "PhaseSpanProcessor"]

PHASE_SPANS = frozenset(spec.name for spec in SPANS) - {RANK_EXIT.name, DEMO_STEP.name}


class PhaseSpanProcessor(SpanProcessor):
    def on_start(self, span: Span, parent_context=None) -> None:
        if span.name in PHASE_SPANS:
            exits = process_exits()
            if exits is not None:
                exits.recorder.span_started(span.context.span_id, span.name)

    def on_end(self, span: ReadableSpan) -> None:
        if span.name in PHASE_SPANS:
            exits = process_exits()
            if exits is not None:
                exits.recorder.span_ended(span.context.span_id)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
