"""Census quantities that know what kind of number they are.

A running total (bytes ever allocated) and a gauge (bytes held now) are both "bytes", but
subtracting one from the other yields a number that drifts for the life of the process and
means nothing. Host-cache release logic was once driven by exactly that difference and
never fired. Quantities refuse such arithmetic with a `TypeError` that says why.
"""

from __future__ import annotations

import enum
from numbers import Real

__all__ = ["Kind", "Quantity"]


class Kind(enum.Enum):
    GAUGE = "gauge"
    """A level that rises and falls (bytes resident now)."""
    RUNNING_TOTAL = "running total"
    """Only ever rises until reset (bytes ever allocated)."""
    HIGH_WATER_MARK = "high-water mark"
    """The largest level seen so far; a gauge that only a reset lowers."""
    AGE = "age"
    """How long ago a value read within a budget was read (seconds): rises between reads,
    falls at each. A property of one process's reading: adding ages up means nothing."""


# Levels that may be combined with each other: a peak minus the current level is headroom.
_LEVELS = (Kind.GAUGE, Kind.HIGH_WATER_MARK)


class Quantity:
    """A value with its name, kind and unit. Immutable by convention: a plain slotted class,
    because the census builds a few dozen per collection and a frozen dataclass costs several
    times more to construct."""

    __slots__ = ("name", "value", "kind", "unit")

    def __init__(self, name: str, value: int | float, kind: Kind, unit: str):
        self.name = name
        self.value = value
        self.kind = kind
        self.unit = unit

    def __repr__(self) -> str:
        return f"Quantity({self.name!r}, {self.value!r}, {self.kind}, {self.unit!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return (self.name, self.value, self.kind, self.unit) == \
            (other.name, other.value, other.kind, other.unit)

    def __hash__(self) -> int:
        return hash((self.name, self.value, self.kind, self.unit))

    def _combine(self, other: object, op: str, sign: int) -> "Quantity":
        if isinstance(other, Quantity):
            if other.unit != self.unit:
                raise TypeError(
                    f"cannot combine {self.name} ({self.unit}) {op} {other.name} ({other.unit}): "
                    "units differ"
                )
            mixes_total = (self.kind is Kind.RUNNING_TOTAL) != (other.kind is Kind.RUNNING_TOTAL)
            if mixes_total:
                total, level = (self, other) if self.kind is Kind.RUNNING_TOTAL else (other, self)
                raise TypeError(
                    f"refusing {self.name} {op} {other.name}: {total.name} is a running total "
                    f"(it only rises; its frees are not reflected) and {level.name} is a "
                    f"{level.kind.value}. The result drifts without bound and can go negative and "
                    "stay there; compute with gauges only."
                )
            kind = self.kind if self.kind is other.kind else Kind.GAUGE
            return Quantity(f"({self.name} {op} {other.name})", self.value + sign * other.value,
                            kind, self.unit)
        if isinstance(other, Real):
            return Quantity(self.name, self.value + sign * other, self.kind, self.unit)
        return NotImplemented

    def __add__(self, other: object) -> "Quantity":
        return self._combine(other, "+", 1)

    def __sub__(self, other: object) -> "Quantity":
        return self._combine(other, "-", -1)

    def __radd__(self, other: object) -> "Quantity":
        return self._combine(other, "+", 1)

    def _comparable(self, other: object) -> int | float:
        if isinstance(other, Quantity):
            # Comparing a running total with a level is the same mistake as subtracting them.
            self._combine(other, "compared with", -1)
            return other.value
        if isinstance(other, Real):
            return other
        raise TypeError(f"cannot compare {self.name} with {type(other).__name__}")

    def __lt__(self, other: object) -> bool:
        return self.value < self._comparable(other)

    def __le__(self, other: object) -> bool:
        return self.value <= self._comparable(other)

    def __gt__(self, other: object) -> bool:
        return self.value > self._comparable(other)

    def __ge__(self, other: object) -> bool:
        return self.value >= self._comparable(other)

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)
