"""What a span, an event and an attribute of the span table are made of."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Attr", "EventSpec", "SpanSpec"]


@dataclass(frozen=True)
class Attr:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class EventSpec:
    name: str
    description: str
    attributes: tuple[Attr, ...]


@dataclass(frozen=True)
class SpanSpec:
    name: str
    description: str
    attributes: tuple[Attr, ...]
    events: tuple[EventSpec, ...] = ()
