"""Min/max-preserving downsampling of one series as its points stream in: the time axis is cut
into buckets of one width, and each bucket keeps only its first, last, lowest and highest point
(M4), so whatever the number of points read, a series holds at most 4 points per bucket and
every peak and trough of the input is still on the page at any zoom down to one bucket.

The width adapts: it starts small and doubles (merging neighbouring buckets, which keeps each
merged bucket's extremes) whenever the series spans more buckets than allowed, so no first pass
over the files is needed to learn the time range. Buckets sit on one grid (multiples of the
width from the epoch), so two series folded to the same width line up.

A point is (time, value, source), source being whatever the caller uses to tell line segments
apart (a process, a reset of a running total): it rides along untouched.
"""

from __future__ import annotations

__all__ = ["MAX_BUCKETS", "TimeBuckets", "page_share"]

# How many buckets a series spans at most while it is read (4 points each at most).
MAX_BUCKETS = 512
_FIRST_WIDTH = 1 << 20  # ns (about a millisecond): finer than any export interval


class TimeBuckets:
    __slots__ = ("width", "limit", "buckets", "low", "high")  # subclasses add their own

    def __init__(self, limit: int = MAX_BUCKETS):
        self.width = _FIRST_WIDTH
        self.limit = max(1, limit)
        self.buckets: dict[int, list] = {}  # index -> [first, last, lowest, highest]
        self.low = self.high = None  # the lowest and highest index held

    def add(self, time_ns: int, value: float, source) -> None:
        self.add_many(((time_ns, value, source),))

    def add_many(self, points) -> None:
        """Fold (time, value, source) points in; in time order they cost the least (one
        bucket looked up per run of points that fall into it)."""
        width, buckets = self.width, self.buckets
        index = bucket = None
        for point in points:
            time_ns, value = point[0], point[1]
            if time_ns // width != index or bucket is None:
                index = time_ns // width
                bucket = buckets.get(index)
                if bucket is None:
                    buckets[index] = [point, point, point, point]
                    if self._extend(index):  # the buckets were merged into wider ones
                        width, buckets = self.width, self.buckets
                        index = bucket = None
                    continue
            if time_ns < bucket[0][0]:
                bucket[0] = point
            if time_ns >= bucket[1][0]:
                bucket[1] = point
            if value < bucket[2][1]:
                bucket[2] = point
            elif value > bucket[3][1]:
                bucket[3] = point

    def _extend(self, index: int) -> bool:
        """Note a new bucket's index; widen when the span passes the limit (True)."""
        if self.low is None:
            self.low = self.high = index
        elif index < self.low:
            self.low = index
        elif index > self.high:
            self.high = index
        if self.high - self.low >= self.limit:
            self._widen()
            return True
        return False

    def _widen(self) -> None:
        """Widen by the power of two that makes the span fit the limit, merging the buckets
        that fall into one (in one pass, however many doublings that is)."""
        shift = 1
        while (self.high >> shift) - (self.low >> shift) >= self.limit:
            shift += 1
        self.width <<= shift
        merged: dict[int, list] = {}
        for index, bucket in self.buckets.items():
            index >>= shift
            into = merged.get(index)
            if into is None:
                merged[index] = bucket
            else:
                _merge(into, bucket)
        self.buckets = merged
        self.low >>= shift
        self.high >>= shift

    def shrink(self, limit: int) -> None:
        """Fold further, to at most `limit` buckets (what a page can hold)."""
        self.limit = max(1, min(self.limit, limit))
        if self.low is not None and self.high - self.low >= self.limit:
            self._widen()

    def points(self) -> list[tuple[int, float, object]]:
        """The points kept, oldest first, each once."""
        kept = {point for bucket in self.buckets.values() for point in bucket}
        return sorted(kept, key=lambda p: p[0])

    def __len__(self) -> int:
        return len(self.buckets)


def page_share(page_points: int, series: int) -> int:
    """The buckets each of `series` series may keep so that together they hold at most
    `page_points` points (4 a bucket): the more series, the fewer buckets each, one at least."""
    return max(1, min(MAX_BUCKETS, page_points // 4 // max(1, series)))


def _merge(into: list, other: list) -> None:
    if other[0][0] < into[0][0]:
        into[0] = other[0]
    if other[1][0] >= into[1][0]:
        into[1] = other[1]
    if other[2][1] < into[2][1]:
        into[2] = other[2]
    if other[3][1] > into[3][1]:
        into[3] = other[3]
