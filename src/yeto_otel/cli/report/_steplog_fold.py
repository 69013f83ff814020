"""The step log as it streams in, in bounded memory whatever its length: per file (one process)
its record count and its last records (what the table shows), and per file and charted key a
min/max-preserving downsampled series over the step number (what the charts draw), so a
day-long log at a step a second holds as much as a short one.

A value the census reads within a budget (Private_Dirty) is carried by every record until the
next read, with its age (the table's `step_log_age_key`): it is charted once per read, at the
step during which it was read (the last record made before the record's time minus the age),
with its age."""

from __future__ import annotations

import heapq
from collections import deque

from ...census import CENSUS
from ._buckets import MAX_BUCKETS, TimeBuckets, page_share
from ._format import number
from ._names import STEP_LOG_PREFIX, allocator_flag_key
from ._read_times import SAME_READ_NS

__all__ = ["CHARTED_EXTRA", "KEPT_RECORDS", "STEP_FIELD", "TIME_FIELD", "StepFile", "StepLog",
           "steplog_level"]

# A step record's own fields (the rest are the trainer's and the census's values).
STEP_FIELD, TIME_FIELD = "step", "time_unix_nano"
KEPT_RECORDS = 10  # the last records of a file that the table shows
# What the demo trainer adds to the census keys, charted beside them.
CHARTED_EXTRA = ("loss",)
# Distinct charted keys at most: a log that names a new key per record stays bounded too.
_MAX_KEYS = 256
# The points all step-log lines of a page hold together at most (4 per bucket at most).
_PAGE_POINTS = 40_000
# A key read within a budget -> the key of its age.
_AGE_KEYS = {m.step_log_key: m.step_log_age_key for m in CENSUS if m.step_log_age_key}
# The records of a file whose (time, step) are kept to find the step a value was read in: a
# read older than these is placed at the oldest (the budget's reads are caught up with within
# a few steps: the read is handed over when due and taken by the next record that finds it).
_RECENT_STEPS = 256


def steplog_level(record: dict, key: str) -> bool:
    """Whether `record[key]` is a level: an allocator `.current` is one only once `.freed` has
    moved (the step log's `<stat>.current_is_gauge` flag); until then it is the running total."""
    flag = allocator_flag_key(key)
    return flag is None or record.get(flag, True) is not False


def _charted(key: str) -> bool:
    return key.startswith(STEP_LOG_PREFIX) or key in CHARTED_EXTRA


def _step_buckets() -> TimeBuckets:
    buckets = TimeBuckets(MAX_BUCKETS)
    buckets.width = 1  # one step per bucket until the steps outnumber the buckets
    return buckets


class _KeySeries:
    """One key of one file over step: its levels, and apart from them (so that downsampling the
    levels never swallows them) the steps where it was not a level yet, drawn as gaps."""
    __slots__ = ("levels", "gaps")

    def __init__(self):
        self.levels, self.gaps = _step_buckets(), _step_buckets()

    def points(self) -> list[tuple[int, float, object, bool]]:
        """(step, value, order read, whether a gap) of both, by step then order read. The order
        of a value read within a budget is (order read, its age, the step of its record)."""
        kept = [(*p, False) for p in self.levels.points()]
        kept += [(*p, True) for p in self.gaps.points()]
        return sorted(kept, key=lambda p: (p[0], p[2] if type(p[2]) is int else p[2][0]))


class StepFile:
    """One step-log file: how many records it had, its last ones, its charted series; for the
    values read within a budget, its recent records' (time, step) and each key's last read."""
    __slots__ = ("count", "series", "_last", "_kept", "recent", "reads")

    def __init__(self, kept: int):
        self.count = 0
        self.series: dict[str, _KeySeries] = {}
        self._last: list[tuple] = []  # a heap of (time or 0, step, order read, record)
        self._kept = kept
        self.recent: deque = deque(maxlen=_RECENT_STEPS)
        self.reads: dict[str, tuple] = {}  # key -> (read time or None, value, age)

    def new_read(self, key: str, record: dict, value: float, age: float) -> int | None:
        """The step during which this value was read when it is a read not charted yet, else
        None (the same read, carried by another record)."""
        time_ns = record.get(TIME_FIELD)
        read_ns = time_ns - round(age * 1e9) if time_ns else None
        last = self.reads.get(key)
        if last is not None and last[1] == value and _same_read(last, read_ns, age):
            self.reads[key] = (last[0], value, age)  # its first record's read time stays
            return None
        self.reads[key] = (read_ns, value, age)
        if read_ns is None:
            return record[STEP_FIELD]
        before = [step for t, step in self.recent if t <= read_ns]
        return before[-1] if before else self.recent[0][1]

    def keep(self, record: dict, order: int) -> None:
        # The last records by time then step (a file written out of order still shows its
        # latest), ties in the order read.
        entry = (record.get(TIME_FIELD) or 0, record[STEP_FIELD], order, record)
        if len(self._last) < self._kept:
            heapq.heappush(self._last, entry)
        else:
            heapq.heappushpop(self._last, entry)

    def last(self) -> list[dict]:
        """The last records kept, oldest first."""
        return [entry[-1] for entry in sorted(self._last, key=lambda e: e[:3])]


def _same_read(last: tuple, read_ns: int | None, age: float) -> bool:
    """Whether a value equal to the last read's is that read: read at about the same time, or
    (records without times) no younger."""
    if read_ns is not None and last[0] is not None:
        return abs(read_ns - last[0]) <= SAME_READ_NS
    return age >= last[2]


class StepLog:
    """What the page needs of every step record read, folded as they are added."""

    def __init__(self, kept: int = KEPT_RECORDS):
        self.files: dict[str, StepFile] = {}
        # charted keys that held a number type in some record, first seen first
        self.keys: dict[str, None] = {}
        self.dropped_keys: set[str] = set()  # charted keys past `_MAX_KEYS` (not drawn)
        self.kept = kept  # last records kept per file
        self._read = 0

    def __len__(self) -> int:
        return sum(f.count for f in self.files.values())

    def __bool__(self) -> bool:
        return bool(self.files)

    def add(self, stem: str, record: dict) -> None:
        found = self.files.get(stem)
        if found is None:
            found = self.files[stem] = StepFile(self.kept)
        found.count += 1
        self._read += 1
        found.keep(record, self._read)
        step = record[STEP_FIELD]
        if record.get(TIME_FIELD):
            found.recent.append((record[TIME_FIELD], step))
        for key, value in record.items():
            if not _charted(key) or not isinstance(value, (int, float)) or \
                    isinstance(value, bool) or not self._known(key):
                continue
            if number(value):
                series = found.series.get(key)
                if series is None:
                    series = found.series[key] = _KeySeries()
                age = record.get(_AGE_KEYS.get(key))
                if number(age) and age >= 0:
                    read_step = found.new_read(key, record, value, age)
                    if read_step is not None:
                        series.levels.add(read_step, value, (self._read, age, step))
                    continue
                into = series.levels if steplog_level(record, key) else series.gaps
                into.add(step, value, self._read)

    def _known(self, key: str) -> bool:
        if key in self.keys:
            return True
        if len(self.keys) >= _MAX_KEYS:
            if len(self.dropped_keys) < _MAX_KEYS:
                self.dropped_keys.add(key)
            return False
        self.keys[key] = None
        return True

    def finish(self) -> None:
        """Fold every series further, to the share of the page's points it may draw."""
        folds = [b for f in self.files.values() for s in f.series.values()
                 for b in (s.levels, s.gaps) if len(b)]
        limit = page_share(_PAGE_POINTS, len(folds))
        for buckets in folds:
            buckets.shrink(limit)

    def stems(self) -> list[str]:
        return sorted(self.files)

    def line(self, stem: str, key: str) -> list[tuple[int, float | None]]:
        """(step, value) of `key` in the file `stem`, by step: None where it was not a level."""
        series = self.files[stem].series.get(key) if stem in self.files else None
        if series is None:
            return []
        return [(step, None if gap else value) for step, value, _, gap in series.points()]

    def read_ages(self, stem: str, key: str) -> list[tuple[float, int] | None]:
        """Beside each point of `line(stem, key)`: (age in seconds, step of the record that
        first carried it) for a value read within a budget, else None."""
        series = self.files[stem].series.get(key) if stem in self.files else None
        if series is None:
            return []
        return [None if type(order) is int else order[1:] for _, _, order, _ in series.points()]

    def values(self, keys) -> list[float]:
        """The kept values of `keys` in every file: the lowest and highest of each are there."""
        return [p[1] for f in self.files.values() for k in keys if k in f.series
                for p in f.series[k].points()]

    def has_values(self, key: str) -> bool:
        return any(key in f.series for f in self.files.values())

