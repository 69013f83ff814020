"""Metric points folded into their series as the lines stream in, so that memory and the page
stay bounded whatever the amount read: each series keeps min/max-preserving time buckets
(`_buckets`) of what the page draws. Running totals are rated first (per second between
consecutive points of one process, on the raw points), and the rates are what is bucketed: a
rate is never taken between two downsampled points.

A census batch has one shape in practice, so a line is first read by a direct walk that checks
every value as the full parser does (`otel.metric_points`); anything it does not expect (a
string temporality, an array attribute, a value out of range) hands the whole line to the full
parser, which skips and counts bad records. Either way a line is folded only once it was read
whole.

A value read within a budget (smaps_rollup's) is exported again at every collection until the
next read, beside its age (`yeto.process.memory.smaps_rollup.age`): its points are moved to the
time they were read (the collection's time minus the age in the same line) and folded once per
read, with the age, so a value read once is not drawn as ten fresh ones.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...census import Kind
from ...otel import CUMULATIVE, DELTA, attributes, metric_points
from ._buckets import MAX_BUCKETS, TimeBuckets, page_share
from ._read_times import AGE_OF, NOTED, SAME_READ_NS, LineReads

__all__ = ["MAX_CHANGES", "MetricFolder", "PAGE_POINTS"]

# The points all series of a page hold together at most (4 per bucket at most; x and y of a
# point take about 23 bytes of the page): about 3 MB beside plotly.js's 4.8 MB.
PAGE_POINTS = 120_000
# The raw steps a running total whose every step is drawn keeps at most (an OOM kill is one
# step: a job with more than this has bigger problems than the page can show).
MAX_CHANGES = 2048
_CHUNK = 256  # points of one series folded in at a time
_INT64 = (-(1 << 63), (1 << 63) - 1)
_I64 = 1 << 63
_MAX_NANOS = (1 << 64) - 1


class _Unexpected(Exception):
    """The line is not in the shape the direct walk reads: the full parser reads it."""


def _double(value) -> float:
    if type(value) is not float and type(value) is not int:
        raise _Unexpected
    value = float(value)
    if not math.isfinite(value):
        raise _Unexpected
    return value


def _int(value, low: int, high: int) -> int:
    kind = type(value)
    if kind is str:
        try:
            value = int(value)
        except ValueError:
            raise _Unexpected from None
    elif kind is not int:
        raise _Unexpected
    if not low <= value <= high:
        raise _Unexpected
    return value


def _widen_times(times: dict, instance: str, found: list, since: int) -> None:
    """Widen `times[instance]` ([first, last]) by the times of found[since:]."""
    if since >= len(found):
        return
    stamps = [item[2] for item in found[since:]]
    span = times.get(instance)
    low, high = min(stamps), max(stamps)
    if span is None:
        times[instance] = [low, high]
    else:
        span[0], span[1] = min(span[0], low), max(span[1], high)


class _Fold(TimeBuckets):
    """One series being read: its buckets, the points of one file not yet folded in (folded a
    chunk at a time: a tight loop costs less than a call per point), and the last raw point
    of a running total."""
    __slots__ = ("series", "rated", "delta", "file", "pending", "segment", "last", "read",
                 "nonzero", "changes", "aged", "last_read")

    def __init__(self, series, rated: bool, delta: bool, changes: bool = False):
        super().__init__(MAX_BUCKETS)
        self.series = series
        self.rated, self.delta = rated, delta
        # A value read within a budget: its pending points may carry their age (a fifth item),
        # and the last read folded, (file, read time, value), tells a read exported again.
        self.aged = not rated and series.metric in AGE_OF
        self.last_read: tuple | None = None
        self.file = self.last = None
        self.pending: list = []  # (anything, start, time, value) of `file`
        self.segment = self.read = 0
        self.nonzero = False
        # The raw (time, value, file) points where the value moved or another file began,
        # for a running total whose steps are drawn themselves (an OOM-kill count): kept
        # apart from the buckets, up to `MAX_CHANGES`.
        self.changes: list | None = [] if changes else None

    def flush(self) -> None:
        """Fold the pending points in (values, or the rates of a running total)."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        self.read += len(pending)
        if not self.nonzero:
            self.nonzero = any(item[3] for item in pending)
        if self.changes is not None:
            self._note_changes(pending)
        source = (self.file, self.segment)
        if self.aged:  # the age rides along in the source, to the page's hover
            self.add_many([(item[2], item[3], (*source, item[4]) if len(item) > 4 else source)
                           for item in pending])
        elif not self.rated:
            self.add_many([(t, v, source) for _, _, t, v in pending])
        elif self.delta:
            self.add_many([(t, v / ((t - start) / 1e9), source)
                           for _, start, t, v in pending if t > start > 0])
        else:
            self.add_many(self._rates(pending))

    def _note_changes(self, pending: list) -> None:
        changes, file = self.changes, self.file
        for _, _, t, v in pending:
            if len(changes) >= MAX_CHANGES:
                self.series.changes_dropped += 1
            elif not changes or changes[-1][2] is not file or changes[-1][1] != v:
                changes.append((t, v, file))

    def _rates(self, pending: list) -> list:
        """(time, per-second rate, source) between consecutive points of one process; a reset
        (a new start time, a value that went back) starts a new segment: a gap."""
        out = []
        last, source = self.last, (self.file, self.segment)
        for _, start, t, v in pending:
            if last is not None and last[0] == start and v >= last[2]:
                if t <= last[1]:
                    continue  # the same export again, or one out of order: nothing to rate
                out.append((t, (v - last[2]) / ((t - last[1]) / 1e9), source))
            elif last is not None:
                self.segment += 1
                source = (self.file, self.segment)
            last = (start, t, v)
        self.last = last
        return out

    def switch(self, file: str) -> None:
        """Points of another file (process) follow: a new segment, nothing rated across."""
        self.flush()
        self.file, self.last = file, None
        self.segment += 1

    def read_again(self, file: str, read_ns: int, value: float) -> bool:
        """Whether this point is the read last folded, exported again; else it is noted as
        the last read."""
        last = self.last_read
        if last is not None and last[0] is file and last[2] == value and \
                abs(read_ns - last[1]) <= SAME_READ_NS:
            self.read += 1  # read from the file all the same
            return True
        self.last_read = (file, read_ns, value)
        return False


class MetricFolder:
    """Folds metric batches into `series` (the reader's series table). `make_series(instance,
    name, attributes key, shape, monotonic, unit, temporality)` makes a new series;
    `instance_of(resource, path)` names a resource's rank; `stepped(name, attributes key)`
    says whether a series also keeps its raw steps (`Series.changes`)."""

    def __init__(self, series: dict, make_series, instance_of, stepped=None):
        self.series = series
        self._make, self._instance_of = make_series, instance_of
        self._stepped = stepped
        self._folds: list[_Fold] = []
        self._slots: dict[tuple, dict] = {}  # (instance, metric) -> {attributes key: fold}
        self._heads: dict[tuple, tuple] = {}  # a metric as a line has it -> (head, its slots)
        self._times: dict[str, int] = {}  # within one line: time string -> nanoseconds
        self._resource = (None, None, None)  # (resource, its instance, path): last seen
        self._attributes: dict[tuple, tuple] = {}
        self._files: dict[str, str] = {}
        self._raw_resource: tuple | None = None
        self._reads = LineReads()  # the line's values read within a budget, and their ages

    def fold_line(self, batch, path: Path, skipped: list[str]):
        """Fold one line; returns ({instance: [first, last] time}, [names of metrics not
        read: histograms, summaries]). Raises what `otel.metric_points` raises on a line that is
        not a metrics batch."""
        times: dict[str, list[int]] = {}
        self._times.clear()
        reads = self._reads
        reads.clear()
        try:
            found, other = self._walk(batch, path, times)
        except (_Unexpected, KeyError, TypeError, AttributeError, ValueError):
            times.clear()
            reads.clear()
            found, other = self._parse(batch, path, skipped, times)
        file = self._files.setdefault(path.name, path.name)
        if reads.places and reads.ages:
            found = reads.at_read_times(found, file, lambda head: self._fold(*head))
        for item in found:
            fold = item[0]
            if type(fold) is tuple:  # a series this line is the first to have
                fold = self._fold(*fold)
            if fold.file is not file:  # the file names are interned: one object per file
                fold.switch(file)
            pending = fold.pending
            pending.append(item)
            if len(pending) >= _CHUNK:
                fold.flush()
        return times, other

    def _fold(self, head: tuple, key: tuple) -> _Fold:
        """The fold of a series (made when it is new): head is (instance, name, shape,
        monotonic, unit, temporality)."""
        instance, name, shape, monotonic, unit, temporality = head
        slots = self._slots.setdefault((instance, name), {})
        fold = slots.get(key)
        if fold is None:
            series = self.series[(instance, name, key)] = self._make(
                instance, name, key, shape, monotonic, unit, temporality or CUMULATIVE)
            fold = slots[key] = _Fold(series, series.kind is Kind.RUNNING_TOTAL,
                                      series.temporality == DELTA,
                                      bool(self._stepped and self._stepped(name, key)))
            self._folds.append(fold)
        return fold

    def _instance(self, resource: dict, path: Path) -> str:
        last = self._resource
        if last[0] is resource and last[2] is path:
            return last[1]
        instance = self._instance_of(resource, path)
        self._resource = (resource, instance, path)
        return instance

    # --- reading a line ---------------------------------------------------------------------

    def _walk(self, batch, path: Path, times: dict) -> tuple[list, list[str]]:
        """The direct walk: [(fold, or what makes one, start, time, value)] and the names of
        metrics of other shapes; each instance's first and last time into `times`."""
        found: list = []
        other: list[str] = []
        for entry in batch["resourceMetrics"]:
            instance = self._instance(self._resource_of(entry.get("resource") or {}), path)
            count = len(found)
            for scope in entry["scopeMetrics"] or ():
                for metric in scope["metrics"] or ():
                    name = metric["name"]
                    if type(name) is not str:
                        raise _Unexpected
                    shape = "sum" if "sum" in metric else "gauge" if "gauge" in metric else None
                    if shape is None:
                        other.append(name)
                        continue
                    self._walk_metric(found, instance, name, shape, metric)
            _widen_times(times, instance, found, count)
        return found, other

    def _walk_metric(self, found: list, instance: str, name: str, shape: str, metric) -> None:
        data = metric[shape] or {}
        spec = (instance, name, shape, data.get("aggregationTemporality"),
                data.get("isMonotonic"), metric.get("unit", ""))
        found_head = self._heads.get(spec)
        if found_head is None:
            found_head = self._heads[spec] = self._head(*spec)
        head, slots = found_head
        first = len(found)
        times = self._times  # a batch's points share their times: each string read once
        for point in data.get("dataPoints") or ():
            value = point.get("asInt")  # (not a dict: AttributeError, the full parser reads it)
            if type(value) is str:
                value = int(value)
                if not -_I64 <= value < _I64:
                    raise _Unexpected
                value = float(value)
            elif value is not None or "asInt" in point:
                value = float(_int(value, *_INT64))
            elif "asDouble" in point:
                value = _double(point["asDouble"])
            else:
                continue  # no recorded value
            raw = point["timeUnixNano"]
            time_ns = times.get(raw) if type(raw) is str else None
            if time_ns is None:
                time_ns = times[raw] = _int(raw, 0, _MAX_NANOS)
            raw = point.get("startTimeUnixNano")
            if raw is None:
                if "startTimeUnixNano" in point:
                    raise _Unexpected  # null: the full parser skips the point
                start = 0
            else:
                start = times.get(raw) if type(raw) is str else None
                if start is None:
                    start = times[raw] = _int(raw, 0, _MAX_NANOS)
            items = point.get("attributes")
            key = self._key(items) if items else ()
            found.append((slots.get(key) or (head, key), start, time_ns, value))
        if name in NOTED:
            self._reads.note(found, first, instance, name)

    def _head(self, instance: str, name: str, shape: str, temporality, monotonic, unit):
        """(what a new series of this metric is made with, its series by attributes key)."""
        head = (instance, name, shape, bool(monotonic), str(unit),
                _int(temporality or 0, *_INT64))
        return head, self._slots.setdefault((instance, name), {})

    def _resource_of(self, raw) -> dict:
        """A resource's attributes, parsed once per run of lines that share it."""
        if type(raw) is not dict:
            raise _Unexpected
        last = self._raw_resource
        if last is not None and (last[0] is raw or last[0] == raw):
            return last[1]
        parsed = attributes(raw.get("attributes"))
        self._raw_resource = (raw, parsed)
        return parsed

    def _key(self, items) -> tuple:
        """A point's attributes as the series key holds them: sorted (name, str(value))."""
        if not items:
            return ()
        try:
            fingerprint = tuple((item["key"], *item["value"].items()) for item in items)
            found = self._attributes.get(fingerprint)
        except (TypeError, KeyError, AttributeError):  # an unhashable or odd value
            raise _Unexpected from None
        if found is None:
            found = self._attributes[fingerprint] = tuple(sorted(
                (k, str(v)) for k, v in attributes(items).items()))
        return found

    def _parse(self, batch, path: Path, skipped: list[str], times: dict
               ) -> tuple[list, list[str]]:
        """The full parser, for a line the walk does not read."""
        points, other = metric_points(batch, skipped)
        found = []
        for p in points:
            instance = self._instance(p.resource, path)
            key = tuple(sorted((k, str(v)) for k, v in p.attributes.items()))
            found.append((((instance, p.name, p.shape, p.monotonic, p.unit, p.temporality),
                           key), p.start_ns, p.time_ns, p.value))
            _widen_times(times, instance, found, len(found) - 1)
            if p.name in NOTED:
                self._reads.note(found, len(found) - 1, instance, p.name)
        return found, other

    # --- the end ----------------------------------------------------------------------------

    def finish(self, make_point) -> None:
        """Fold every series to its share of the page and hand it its points
        (`make_point(time, value, source file, segment[, age in seconds])`: the age for a
        value read within a budget, at the time it was read)."""
        limit = page_share(PAGE_POINTS, len(self._folds))
        for fold in self._folds:
            fold.flush()
            fold.shrink(limit)
            series = fold.series
            series.points = [make_point(t, v, *source) for t, v, source in fold.points()]
            series.read, series.nonzero, series.rated = fold.read, fold.nonzero, fold.rated
            if fold.changes is not None:
                series.changes = fold.changes
        self._folds.clear()

