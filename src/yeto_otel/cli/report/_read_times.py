"""Values the census reads within a budget (smaps_rollup's) are exported again at every
collection until the next read, each time with their age (the census table's `sample_age`
rows). The report draws such a value at the time it was read, once per read: this moves the
points of one metrics line there.
"""

from __future__ import annotations

from typing import Callable

from ...census import CENSUS

__all__ = ["AGES", "AGE_OF", "SAME_READ_NS", "at_read_times"]

# A value read within a budget -> the metric of its age (a `sample_age` row gives the age of
# every value of its source).
AGE_OF = {m.name: age.name for age in CENSUS if age.sample_age
          for m in CENSUS if m.source is age.source and not m.sample_age}
AGES = frozenset(AGE_OF.values())
# Two collections carry the same read when they give the same value read within this of each
# other: the age is taken when the census is read and the collection's time a little later,
# a gap that varies by milliseconds between collections (more on a loaded machine), while two
# reads are seconds to minutes apart; two reads closer than this with the same value are
# drawn as one, which shows nothing less.
SAME_READ_NS = 1_000_000_000


def at_read_times(found: list, file: str, fold_of: Callable[[tuple], object]) -> list:
    """The points of one line (`(fold or what makes one, start, time, value)`) with each value
    read within a budget moved to the time it was read, its age in seconds as a fifth item,
    and left out when its series has folded that read already (`fold.read_again`). A value
    without its age in the line stays as it is, as does every other point. `fold_of(head)`
    makes the fold of a series the line is the first to have."""
    ages = {}
    for item in found:
        instance, name = _instance_and_name(item[0])
        if name in AGES:
            ages[(instance, name, item[2])] = item[3]
    out = []
    for item in found:
        head = item[0]
        instance, name = _instance_and_name(head)
        age = ages.get((instance, AGE_OF.get(name), item[2]))
        fold = head if age is None or type(head) is not tuple else fold_of(head)
        if age is None or not fold.aged:
            out.append(item)
            continue
        read_ns = item[2] - round(age * 1e9)
        if not fold.read_again(file, read_ns, item[3]):
            out.append((fold, item[1], read_ns, item[3], age))
    return out


def _instance_and_name(head) -> tuple[str, str]:
    """The rank and metric of a point: its fold's, or what a new fold is made with."""
    if type(head) is tuple:
        return head[0][0], head[0][1]
    return head.series.instance, head.series.metric
