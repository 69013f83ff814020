"""Reading the local telemetry files into series (one per rank, metric and attributes), spans,
log records and step records, and what a series is plotted as: values or rates."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ...census import CENSUS, CENSUS_ERRORS, CGROUP_EVENTS, Kind
from ...errors import UserFacingError
from ...otel import (CUMULATIVE, DELTA, LOCAL_FILE_PATTERNS, BadBatch, BadLine, LogRecord, Span,
                     iter_json_lines, log_records, spans)
from ._format import is_int
from ._metric_fold import MetricFolder
from ._names import HOST_NAME, RANK_ATTRIBUTE, SERVICE_INSTANCE_ID
from ._progress import Progress
from ._steplog_fold import STEP_FIELD, TIME_FIELD, StepLog

__all__ = ["PATTERNS", "STEP_FIELD", "TIME_FIELD", "Point", "Series", "Telemetry", "kind_of",
           "load_telemetry", "plotted", "process_key", "rates", "stepped"]

PATTERNS = LOCAL_FILE_PATTERNS  # the files the report reads, by kind

_KIND_OF = {m.name: m.kind for m in CENSUS + (CENSUS_ERRORS,)}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_MAX_NANOS = (1 << 64) - 1
_KEPT_BAD_LINES = 100  # the page lists 20; the count is complete
_PROGRESS_EVERY = 256  # lines between looks at the clock


class Point(NamedTuple):  # a tuple: the page holds up to `PAGE_POINTS` of them
    start_ns: int
    time_ns: int
    value: float
    source: str = ""  # the file (process) it came from: a new one starts a new line segment
    segment: int = 0  # so does a new segment of one file (a running total that was reset)
    # A value read within a budget: drawn at the time it was read, and this is how long before
    # the collection that first exported it that was (seconds); None for any other value.
    age_s: float | None = None


@dataclass
class Series:
    """One metric stream of one rank: (instance, metric, data point attributes).

    Read from files, `points` are what the page draws, downsampled (`_metric_fold`): the
    values of a level, and for a running total its rates per second (`rated`), taken from the
    raw points before they were downsampled. `read` counts the raw points; `nonzero` says
    whether any of them was not 0. `changes`: see `stepped`."""
    instance: str
    metric: str
    attributes: tuple
    kind: Kind
    unit: str
    temporality: int = CUMULATIVE
    points: list[Point] = field(default_factory=list)
    rated: bool = False
    read: int = 0
    nonzero: bool = False
    # For a running total whose every step is drawn (`stepped`): the raw (time, value, file)
    # points where it moved or another file began, and how many were past the bound.
    changes: list[tuple[int, float, str]] = field(default_factory=list)
    changes_dropped: int = 0

    @property
    def label(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.attributes)
        return f"{self.metric} ({extra})" if extra else self.metric


def stepped(name: str, attributes: tuple) -> bool:
    """Whether a series keeps its raw steps besides its rates: the cgroup's OOM-kill count,
    drawn as one marker per kill, and diffed across the processes that observed it in turn."""
    return name == CGROUP_EVENTS.name and \
        (CGROUP_EVENTS.attribute, CGROUP_EVENTS.step_log_point) in attributes


def kind_of(name: str, shape: str, monotonic: bool) -> Kind:
    """What a metric is, from what was exported: a monotonic sum is a running total (rated);
    anything else is a level, a high-water mark where the census table says so."""
    if shape == "sum" and monotonic:
        return Kind.RUNNING_TOTAL
    kind = _KIND_OF.get(name, Kind.GAUGE)
    return Kind.GAUGE if kind is Kind.RUNNING_TOTAL else kind


def rates(series: Series) -> list[tuple[int, float | None]]:
    """(time, per-second rate) of a running total, one per interval between consecutive points
    of one process (cumulative), or per point (delta temporality). A reset (another process, a
    new start time, a value that went back) gives (time, None): a gap in the line.

    A gauge or a high-water mark has no rate: asking for one raises TypeError."""
    if series.kind is not Kind.RUNNING_TOTAL:
        raise TypeError(f"{series.metric} is a {series.kind.value}, not a running total: "
                        "it is plotted as values, never as a rate")
    if series.rated:
        return _segments(series)
    points = sorted(series.points, key=lambda p: p.time_ns)
    out: list[tuple[int, float | None]] = []
    if series.temporality == DELTA:
        for p in points:
            if p.time_ns > p.start_ns > 0:
                out.append((p.time_ns, p.value / ((p.time_ns - p.start_ns) / 1e9)))
        return out
    previous: Point | None = None
    for p in points:
        if previous is not None:
            same_process = (p.source == previous.source and p.start_ns == previous.start_ns
                            and p.value >= previous.value)
            if not same_process:
                out.append((p.time_ns, None))
            elif p.time_ns > previous.time_ns:
                out.append((p.time_ns, (p.value - previous.value) /
                            ((p.time_ns - previous.time_ns) / 1e9)))
        previous = p
    return out


def plotted(series: Series) -> list[tuple[int, float | None]]:
    """What the page draws for a series: rates for running totals, the values themselves for
    gauges and high-water marks (with a gap where another process of the rank takes over)."""
    if series.kind is Kind.RUNNING_TOTAL:
        return rates(series)
    return _segments(series)


def _segments(series: Series) -> list[tuple[int, float | None]]:
    """The points' values in time order, with a gap where another process (or a segment of
    one: a reset running total) begins."""
    out: list[tuple[int, float | None]] = []
    previous: Point | None = None
    for p in sorted(series.points, key=lambda p: p.time_ns):
        if previous is not None and (p.source, p.segment) != (previous.source,
                                                              previous.segment):
            out.append((p.time_ns, None))
        out.append((p.time_ns, p.value))
        previous = p
    return out


@dataclass
class Telemetry:
    directory: Path
    files: dict[str, list[Path]]
    empty_files: list[Path] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    # the first corrupt lines (the page lists a few), how many there were, and in which files
    bad_lines: list[BadLine] = field(default_factory=list)
    bad_line_count: int = 0
    bad_files: set[str] = field(default_factory=set)
    # records skipped for one bad value, in lines that were read: reason -> [count, where the
    # first was (file:line)]
    skipped: dict[str, list] = field(default_factory=dict)
    series: dict[tuple, Series] = field(default_factory=dict)
    resources: dict[str, dict] = field(default_factory=dict)  # instance -> resource attributes
    spans: list[tuple[str, Span]] = field(default_factory=list)  # (instance, span)
    logs: list[tuple[str, LogRecord]] = field(default_factory=list)
    # the step records, folded as read: per file its count and last records, per file and
    # key a downsampled series over step (`len` is the number of records)
    steps: StepLog = field(default_factory=StepLog)
    not_plotted: dict[str, int] = field(default_factory=dict)  # what was read but not drawn
    lines: dict[Path, int] = field(default_factory=dict)  # usable lines per file
    # (instance, process key) -> [first, last] record time: one entry per process (launch,
    # worker epoch), keyed by its files' common stem (see `process_key`)
    extents: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return bool(self.series or self.spans or self.steps)

    def instances(self) -> list[str]:
        found = set(self.resources)
        found.update(s.instance for s in self.series.values())
        found.update(i for i, _ in self.spans)
        return sorted(found, key=self.rank_order)

    def rank_order(self, instance: str):
        # Ranks by their number when the resource says it, then by name with numbers compared
        # as numbers (rank-10 after rank-9).
        rank = self.resources.get(instance, {}).get(RANK_ATTRIBUTE)
        numbers = [int(n) for n in re.findall(r"\d+", instance)]
        return (0 if isinstance(rank, int) else 1, rank if isinstance(rank, int) else 0,
                re.sub(r"\d+", "", instance), numbers)

    def time_range(self) -> tuple[int, int] | None:
        times = [p.time_ns for s in self.series.values() for p in s.points]
        for _, span in self.spans:
            times += [span.start_ns, span.end_ns]
        times = [t for t in times if t > 0]
        return (min(times), max(times)) if times else None


@functools.lru_cache(maxsize=4096)
def process_key(file_name: str) -> str:
    """The process a file belongs to: its name without the signal and the extension
    (`metrics-vm_rank-0-20261203T141946-26071.jsonl` -> `vm_rank-0-20261203T141946-26071`), the
    same for the traces, metrics, logs and step log of one process."""
    return Path(file_name).stem.split("-", 1)[-1]


def _note(data: Telemetry, instance: str, path: Path, *times: int) -> None:
    """Widen the extent of the process `path` belongs to by `times`."""
    extent = data.extents.setdefault((instance, process_key(path.name)), [0, 0])
    for t in times:
        if t > 0:
            extent[0] = min(extent[0], t) if extent[0] else t
            extent[1] = max(extent[1], t)


def _instance(resource: dict, path: Path) -> str:
    """The rank a record belongs to: its `service.instance.id`, else its host, else the name
    the file was given by the process that wrote it."""
    found = resource.get(SERVICE_INSTANCE_ID)
    if found:
        return str(found)
    stem = path.stem.split("-", 1)[-1]
    return str(resource.get(HOST_NAME) or stem)


def _bad(data: Telemetry, bad: BadLine) -> None:
    data.bad_line_count += 1
    data.bad_files.add(bad.path.name)
    if len(data.bad_lines) < _KEPT_BAD_LINES:
        data.bad_lines.append(bad)


def _read(path: Path, data: Telemetry, progress: Progress | None):
    """(line number, JSON value) of each good line of `path`, one at a time; bad lines are
    counted in `data`, an unreadable file noted there."""
    read = 0
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
        for number, value, bad in iter_json_lines(path):
            read += 1
            if bad is not None:
                _bad(data, bad)
            else:
                yield number, value
            if progress is not None and read % _PROGRESS_EVERY == 0:
                progress.at(path, read, size)
    except OSError as exc:
        data.unreadable.append(f"{path.name}: {exc.strerror or exc}")
        return
    if progress is not None:
        progress.done(size)
    if not read:
        data.empty_files.append(path)


# What a JSON value that is not an OTLP batch raises in the parsers: the line is skipped.
_PARSE_ERRORS = (BadBatch, ValueError, TypeError, AttributeError, KeyError, OverflowError,
                 RecursionError)


def _skip(data: Telemetry, reason: str, path: Path, number: int) -> None:
    found = data.skipped.setdefault(reason, [0, f"{path.name}:{number}"])
    found[0] += 1


def _batches(data: Telemetry, signal: str, parse, progress: Progress | None):
    """(path, parse(batch, skipped)) for every line of the signal's files that parses; the
    others are counted as bad lines and skipped. A record with one bad value is skipped alone
    and counted in `data.skipped`."""
    for path in data.files[signal]:
        for number, batch in _read(path, data, progress):
            skipped: list[str] = []
            try:
                parsed = parse(batch, path, skipped)
            except _PARSE_ERRORS as exc:
                _bad(data, BadLine(path, number, f"not an OTLP {signal} batch: {exc}"))
                continue
            for reason in skipped:
                _skip(data, reason, path, number)
            data.lines[path] = data.lines.get(path, 0) + 1
            yield path, parsed


def load_telemetry(directory: Path, progress: Progress | None = None) -> Telemetry:
    """Read every telemetry file of `directory` (already checked to be a readable directory),
    a line at a time: memory holds the series' buckets, the spans and the step log's folds,
    not the files. Corrupt lines are counted in `bad_lines`, never raised. `progress` hears how
    far the reading is."""
    try:
        files = {signal: sorted(directory.glob(pattern)) for signal, pattern in PATTERNS.items()}
    except OSError as exc:
        raise UserFacingError(f"cannot list {directory}: {exc.strerror or exc}") from None
    data = Telemetry(directory, {s: [p for p in f if p.is_file()] for s, f in files.items()})
    if progress is not None:
        progress.start([p for paths in data.files.values() for p in paths])
    _load_metrics(data, progress)
    for path, found in _batches(data, "traces", lambda b, _, s: spans(b, s), progress):
        for span in found:
            instance = _instance(span.resource, path)
            data.resources.setdefault(instance, span.resource)
            data.spans.append((instance, span))
            _note(data, instance, path, span.start_ns, span.end_ns)
    for path, found in _batches(data, "logs", lambda b, _, s: log_records(b, s), progress):
        for record in found:
            instance = _instance(record.resource, path)
            data.logs.append((instance, record))
            _note(data, instance, path, record.time_ns)
    _load_steps(data, progress)
    data.spans.sort(key=lambda item: item[1].start_ns)
    if progress is not None:
        progress.finish()
    return data


def _load_metrics(data: Telemetry, progress: Progress | None) -> None:
    def new_series(instance, name, key, shape, monotonic, unit, temporality) -> Series:
        return Series(instance, name, key, kind_of(name, shape, monotonic), unit, temporality)

    def instance_of(resource: dict, path: Path) -> str:
        instance = _instance(resource, path)
        data.resources.setdefault(instance, resource)
        return instance

    folder = MetricFolder(data.series, new_series, instance_of, stepped)
    for path, (times, other) in _batches(data, "metrics", folder.fold_line, progress):
        for name in other:
            what = f"metric {name} (histogram or summary)"
            data.not_plotted[what] = data.not_plotted.get(what, 0) + 1
        for instance, (first, last) in times.items():
            _note(data, instance, path, first, last)
    folder.finish(lambda t, v, source, segment, age=None: Point(0, t, v, source, segment, age))


def _load_steps(data: Telemetry, progress: Progress | None) -> None:
    for path in data.files["steplog"]:
        for number, record in _read(path, data, progress):
            if not isinstance(record, dict) or not is_int(record.get(STEP_FIELD)):
                _bad(data, BadLine(path, number,
                                   "not a step record (an object with an int 'step')"))
                continue
            data.lines[path] = data.lines.get(path, 0) + 1
            reason = _bad_step_value(record)
            if reason is not None:
                _skip(data, f"step record: {reason}", path, number)
                continue
            data.steps.add(path.stem, record)
    data.steps.finish()
    if data.steps.dropped_keys:
        what = f"step-log keys past the first {len(data.steps.keys)}"
        data.not_plotted[what] = len(data.steps.dropped_keys)


def _bad_step_value(record: dict) -> str | None:
    """Why a step record cannot be drawn (its step or time out of range, an integer no chart
    can hold), or None. NaN and infinite floats stay: a NaN loss is worth seeing in the table,
    and the charts leave non-finite values out."""
    if not _INT64[0] <= record[STEP_FIELD] <= _INT64[1]:
        return f"{STEP_FIELD} is outside the 64-bit integer range"
    if TIME_FIELD in record and not (is_int(record[TIME_FIELD]) and
                                     0 <= record[TIME_FIELD] <= _MAX_NANOS):
        return f"{TIME_FIELD} is not a time in unix nanoseconds (0 to 2^64-1)"
    if any(is_int(v) and not _INT64[0] <= v <= _INT64[1] for v in record.values()):
        return "a value is outside the 64-bit integer range"
    return None
