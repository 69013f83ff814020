"""A TracerProvider whose span processor raises when a span starts, or when one ends: what a
trainer's own (or a vendor's) processor can do, and what our wrappers must never pass on."""

from __future__ import annotations

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


class BrokenProcessor(SpanProcessor):
    def __init__(self, when: str):
        self.when = when

    def on_start(self, span, parent_context=None) -> None:
        if self.when == "start":
            raise RuntimeError("span processor broke on start")

    def on_end(self, span) -> None:
        if self.when == "end":
            raise RuntimeError("span processor broke on end")


def broken_provider(exporter, when: str) -> TracerProvider:
    """Spans reach `exporter` first (those that start), then the broken processor raises."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(BrokenProcessor(when))
    return provider
