"""Values the census reads within a budget (smaps_rollup's) are exported again at every
collection until the next read, each time with their age (the census table's `sample_age`
rows). The report draws such a value at the time it was read, once per read: this moves the
points of one metrics line there.
"""

from __future__ import annotations

from typing import Callable

from ...census import CENSUS

__all__ = ["AGES", "AGE_OF", "NOTED", "SAME_READ_NS", "LineReads"]

# A value read within a budget -> the metric of its age (a `sample_age` row gives the age of
# every value of its source).
AGE_OF = {m.name: age.name for age in CENSUS if age.sample_age
          for m in CENSUS if m.source is age.source and not m.sample_age}
AGES = frozenset(AGE_OF.values())
NOTED = AGES | frozenset(AGE_OF)  # the metrics `LineReads` notes
# Two collections carry the same read when they give the same value read within this of each
# other: the age is taken when the census is read and the collection's time a little later,
# a gap that varies by milliseconds between collections (more on a loaded machine), while two
# reads are seconds to minutes apart; two reads closer than this with the same value are
# drawn as one, which shows nothing less.
SAME_READ_NS = 1_000_000_000


class LineReads:
    """What one line being folded holds of values read within a budget: the places of their
    points in the line's list of points, and the ages exported beside them. Noted as the line
    is walked, so a line costs more only by its few such points."""
    __slots__ = ("ages", "places")

    def __init__(self):
        self.ages: dict[tuple, float] = {}  # (instance, age metric, time) -> age in seconds
        self.places: list[int] = []

    def clear(self) -> None:
        self.ages.clear()
        self.places.clear()

    def note(self, found: list, start: int, instance: str, name: str) -> None:
        """The points found[start:] of metric `name` were just found (any metric: only those
        read within a budget, or their ages, are noted)."""
        if name in AGES:
            for item in found[start:]:
                self.ages[(instance, name, item[2])] = item[3]
        elif name in AGE_OF:
            self.places.extend(range(start, len(found)))

    def at_read_times(self, found: list, file: str, fold_of: Callable[[tuple], object]) -> list:
        """The line's points (`(fold or what makes one, start, time, value)`) with each value
        read within a budget moved to the time it was read, its age in seconds as a fifth
        item, and left out when its series has folded that read already (`fold.read_again`).
        A value without its age in the line stays as it is, as does every other point.
        `fold_of(head)` makes the fold of a series the line is the first to have."""
        dropped = False
        for place in self.places:
            item = found[place]
            head = item[0]
            instance, name = _instance_and_name(head)
            age = self.ages.get((instance, AGE_OF[name], item[2]))
            fold = head if age is None or type(head) is not tuple else fold_of(head)
            if age is None or not fold.aged:
                continue
            read_ns = item[2] - round(age * 1e9)
            if fold.read_again(file, read_ns, item[3]):
                found[place], dropped = None, True
            else:
                found[place] = (fold, item[1], read_ns, item[3], age)
        return [item for item in found if item is not None] if dropped else found


def _instance_and_name(head) -> tuple[str, str]:
    """The rank and metric of a point: its fold's, or what a new fold is made with."""
    if type(head) is tuple:
        return head[0][0], head[0][1]
    return head.series.instance, head.series.metric
