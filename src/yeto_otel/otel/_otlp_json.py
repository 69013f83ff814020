"""OTLP JSON export batches (one line of the local files each, read by `_json_lines`) into
plain records. Pure parsing: no OpenTelemetry SDK, no plotting.

What a crash, a full disk or another writer can leave is read around, never trusted:
- a batch whose structure is not OTLP JSON raises `BadBatch` (the caller skips the line);
- one bad value (a time out of range, an integer beyond 64 bits, a number that is not finite)
  raises `BadValue`; given a `skipped` list, the readers skip only the record it is in (the
  point, span or log record), note why there and read on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, TypeVar

__all__ = [
    "BadBatch",
    "BadValue",
    "LogRecord",
    "MetricPoint",
    "Span",
    "SpanEvent",
    "any_value",
    "attributes",
    "log_records",
    "metric_points",
    "spans",
]

# OTLP AggregationTemporality
DELTA = 1
CUMULATIVE = 2
_TEMPORALITY_NAMES = {"AGGREGATION_TEMPORALITY_DELTA": DELTA,
                      "AGGREGATION_TEMPORALITY_CUMULATIVE": CUMULATIVE}

_INT64 = (-(1 << 63), (1 << 63) - 1)  # intValue, asInt: sfixed64 / int64
_MAX_NANOS = (1 << 64) - 1  # *TimeUnixNano: fixed64
_MAX_DEPTH = 32  # nested arrayValue / kvlistValue levels in one attribute value


class BadBatch(ValueError):
    """A line that is JSON but not an OTLP export batch of the expected signal."""


class BadValue(BadBatch):
    """One value of a record that cannot be what OTLP says it is. The message names the field
    and what was expected, never the value, so that many of them add up to one reason."""


# --- values --------------------------------------------------------------------------------

_T = TypeVar("_T")


def _kept(skipped: list[str] | None, what: str, make: Callable[[], _T]) -> _T | None:
    """make(), or None when it raises BadValue and `skipped` is given: the reason goes there
    (`<what>: <reason>`) and the caller reads on without that record."""
    try:
        return make()
    except BadValue as exc:
        if skipped is None:
            raise
        skipped.append(f"{what}: {exc}")
        return None


def _int64(value, what: str) -> int:
    """An OTLP JSON 64-bit integer (a number or, as exporters write them, a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadValue(f"{what} is not an integer")
    try:
        number = int(value)
    except ValueError:  # not digits, or more digits than Python converts
        raise BadValue(f"{what} is not an integer") from None
    if not _INT64[0] <= number <= _INT64[1]:
        raise BadValue(f"{what} is outside the 64-bit integer range")
    return number


def _double(value, what: str, *, finite: bool) -> float:
    """An OTLP JSON double (a number, or a string such as "NaN" or "Infinity")."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadValue(f"{what} is not a number")
    try:
        number = float(value)
    except ValueError:
        raise BadValue(f"{what} is not a number") from None
    except OverflowError:  # an integer beyond any float
        raise BadValue(f"{what} is beyond the range of a double") from None
    if finite and not math.isfinite(number):
        raise BadValue(f"{what} is not a finite number")
    return number


def _nanos(value, what: str) -> int:
    """A time in unix nanoseconds: an integer from 0 to 2^64-1 (year 2554; a later time is
    not one any clock wrote, and no date type shows it)."""
    if isinstance(value, float) and value.is_integer():  # False for inf and NaN
        value = int(value)
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            pass
    if number is None or not 0 <= number <= _MAX_NANOS:
        raise BadValue(f"{what} is not a time in unix nanoseconds (0 to 2^64-1)")
    return number


def any_value(value: dict, depth: int = 0):
    """The Python value of an OTLP JSON AnyValue (64-bit ints arrive as strings)."""
    if not isinstance(value, dict):
        raise BadValue("an attribute value is not an object")
    if depth > _MAX_DEPTH:
        raise BadValue(f"an attribute value is nested deeper than {_MAX_DEPTH} levels")
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return _int64(value["intValue"], "an attribute's intValue")
    if "doubleValue" in value:  # NaN and infinities are values an attribute may hold
        return _double(value["doubleValue"], "an attribute's doubleValue", finite=False)
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [any_value(v, depth + 1)
                for v in _list(value["arrayValue"] or {}, "values", BadValue)]
    if "kvlistValue" in value:
        return attributes(_list(value["kvlistValue"] or {}, "values", BadValue), depth + 1)
    if "bytesValue" in value:
        return value["bytesValue"]
    return None  # an empty AnyValue


def attributes(items, depth: int = 0) -> dict:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise BadValue("attributes is not a list")
    out = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise BadValue("an attribute has no key")
        out[item["key"]] = any_value(item.get("value") or {}, depth)
    return out


def _list(container, key: str, error: type[BadBatch] = BadBatch) -> list:
    if not isinstance(container, dict):
        raise error(f"what holds {key} is not an object")
    value = container.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise error(f"{key} is not a list")
    return value


def _scope_name(scope_entry) -> str:
    if not isinstance(scope_entry, dict):
        raise BadBatch("a scope entry is not an object")
    scope = scope_entry.get("scope") or {}
    return str(scope.get("name", "")) if isinstance(scope, dict) else ""


def _resources(batch: object, key: str) -> Iterator[tuple[dict, dict]]:
    """(resource attributes, resource entry) for each entry of `batch[key]`. A bad resource
    attribute is a bad batch: its records cannot be told whose they are."""
    if not isinstance(batch, dict) or key not in batch:
        raise BadBatch(f"not an OTLP JSON batch: no {key!r}")
    for entry in _list(batch, key):
        if not isinstance(entry, dict):
            raise BadBatch(f"{key} entry is not an object")
        resource = entry.get("resource") or {}
        if not isinstance(resource, dict):
            raise BadBatch("resource is not an object")
        try:
            found = attributes(resource.get("attributes"))
        except BadValue as exc:
            raise BadBatch(f"resource: {exc}") from None
        yield found, entry


# --- metrics -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricPoint:
    resource: dict
    scope: str
    name: str
    unit: str
    shape: str  # "sum", "gauge" (histograms and summaries are not read)
    monotonic: bool
    temporality: int  # DELTA, CUMULATIVE, or 0 for gauges
    attributes: dict
    start_ns: int
    time_ns: int
    value: float


def metric_points(batch: object, skipped: list[str] | None = None
                  ) -> tuple[list[MetricPoint], list[str]]:
    """(number data points of one `resourceMetrics` batch, names of metrics of shapes not
    read: histograms, summaries). With `skipped`, a point with a bad value is left out and
    the reason added there; without, it raises BadValue."""
    points: list[MetricPoint] = []
    other: list[str] = []
    for resource, entry in _resources(batch, "resourceMetrics"):
        for scope_metrics in _list(entry, "scopeMetrics"):
            scope = _scope_name(scope_metrics)
            for metric in _list(scope_metrics, "metrics"):
                if not isinstance(metric, dict) or "name" not in metric:
                    raise BadBatch("metric without a name")
                shape = "sum" if "sum" in metric else "gauge" if "gauge" in metric else None
                if shape is None:
                    other.append(str(metric["name"]))
                    continue
                head = _kept(skipped, "metric", lambda: _metric_head(resource, scope, metric,
                                                                     shape))
                for point in _list(metric[shape] or {}, "dataPoints") if head else ():
                    found = _kept(skipped, "metric point", lambda: _point(head, point))
                    if found is not None:
                        points.append(found)
    return points, other


def _metric_head(resource: dict, scope: str, metric: dict, shape: str) -> MetricPoint:
    """A point of the metric with what all its points share (value and times still 0)."""
    data = metric[shape] or {}
    if not isinstance(data, dict):
        raise BadValue(f"{shape} is not an object")
    temporality = data.get("aggregationTemporality", 0) or 0
    if isinstance(temporality, str) and temporality in _TEMPORALITY_NAMES:
        temporality = _TEMPORALITY_NAMES[temporality]
    temporality = _int64(temporality, "aggregationTemporality")
    return MetricPoint(resource, scope, str(metric["name"]), str(metric.get("unit", "")), shape,
                       bool(data.get("isMonotonic", False)), temporality, {}, 0, 0, 0.0)


def _point(head: MetricPoint, point) -> MetricPoint | None:
    """One data point, or None when it has no recorded value (flags: no recorded value)."""
    if not isinstance(point, dict):
        raise BadValue("a data point is not an object")
    if "asInt" in point:
        value = float(_int64(point["asInt"], "asInt"))
    elif "asDouble" in point:
        value = _double(point["asDouble"], "asDouble", finite=True)
    else:
        return None
    return MetricPoint(head.resource, head.scope, head.name, head.unit, head.shape,
                       head.monotonic, head.temporality, attributes(point.get("attributes")),
                       _nanos(point.get("startTimeUnixNano", 0), "startTimeUnixNano"),
                       _nanos(point.get("timeUnixNano"), "timeUnixNano"), value)


# --- traces ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict


@dataclass(frozen=True)
class Span:
    resource: dict
    scope: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict
    events: tuple[SpanEvent, ...] = field(default=())
    error: str | None = None  # the status message when the status code is ERROR

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9


def spans(batch: object, skipped: list[str] | None = None) -> list[Span]:
    """The spans of one `resourceSpans` batch; a span with a bad value (in its events too) is
    left out with its reason in `skipped`, or raises BadValue without it."""
    out: list[Span] = []
    for resource, entry in _resources(batch, "resourceSpans"):
        for scope_spans in _list(entry, "scopeSpans"):
            scope = _scope_name(scope_spans)
            for span in _list(scope_spans, "spans"):
                found = _kept(skipped, "span", lambda: _span(resource, scope, span))
                if found is not None:
                    out.append(found)
    return out


def _span(resource: dict, scope: str, span) -> Span:
    if not isinstance(span, dict) or "name" not in span:
        raise BadValue("a span has no name")
    events = tuple(
        SpanEvent(str(e.get("name", "")), _nanos(e.get("timeUnixNano"), "an event's time"),
                  attributes(e.get("attributes")))
        for e in _list(span, "events", BadValue) if _is_object(e, "an event"))
    status = span.get("status") or {}
    code = status.get("code") if isinstance(status, dict) else None
    error = None
    if code in (2, "STATUS_CODE_ERROR"):
        error = str(status.get("message") or "error")
    return Span(resource, scope, str(span["name"]), str(span.get("traceId", "")),
                str(span.get("spanId", "")), str(span.get("parentSpanId", "")),
                _nanos(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                _nanos(span.get("endTimeUnixNano"), "endTimeUnixNano"),
                attributes(span.get("attributes")), events, error)


def _is_object(value, what: str) -> bool:
    if not isinstance(value, dict):
        raise BadValue(f"{what} is not an object")
    return True


# --- logs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogRecord:
    resource: dict
    time_ns: int
    severity: str
    severity_number: int
    body: str


def log_records(batch: object, skipped: list[str] | None = None) -> list[LogRecord]:
    """The log records of one `resourceLogs` batch; one with a bad value is left out with its
    reason in `skipped`, or raises BadValue without it."""
    out: list[LogRecord] = []
    for resource, entry in _resources(batch, "resourceLogs"):
        for scope_logs in _list(entry, "scopeLogs"):
            for record in _list(scope_logs, "logRecords"):
                found = _kept(skipped, "log record", lambda: _log_record(resource, record))
                if found is not None:
                    out.append(found)
    return out


def _log_record(resource: dict, record) -> LogRecord:
    _is_object(record, "a log record")
    time_ns = _nanos(record.get("timeUnixNano") or record.get("observedTimeUnixNano") or 0,
                     "timeUnixNano")
    body = record.get("body")
    text = any_value(body) if isinstance(body, dict) else body
    return LogRecord(resource, time_ns, str(record.get("severityText", "")),
                     _int64(record.get("severityNumber", 0) or 0, "severityNumber"),
                     "" if text is None else _text(text))


def _text(value) -> str:
    try:
        return str(value)
    except RecursionError:  # a body nested as deep as JSON goes
        raise BadValue("the body is nested too deeply") from None
