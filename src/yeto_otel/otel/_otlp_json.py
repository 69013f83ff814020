"""Reading OTLP JSON lines files (one export batch per line), as the local file exporters
write them, into plain records. Pure parsing: no OpenTelemetry SDK, no plotting.

Each reader takes one decoded batch (a dict) and yields records; a batch whose structure is
not OTLP JSON raises `BadBatch`, so the caller can skip that line and count it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

__all__ = [
    "BadBatch",
    "BadLine",
    "LogRecord",
    "MetricPoint",
    "Span",
    "SpanEvent",
    "any_value",
    "attributes",
    "log_records",
    "metric_points",
    "read_json_lines",
    "spans",
]

# OTLP AggregationTemporality
DELTA = 1
CUMULATIVE = 2


class BadBatch(ValueError):
    """A line that is JSON but not an OTLP export batch of the expected signal."""


@dataclass(frozen=True)
class BadLine:
    path: Path
    line: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: {self.reason}"


def read_json_lines(path: Path) -> tuple[list[tuple[int, object]], list[BadLine]]:
    """([(line number, decoded JSON value)], [bad lines]) of a JSON lines file. Blank lines are
    ignored; a line that is not valid UTF-8 JSON is a bad line (the rest are still read).
    Raises OSError when the file cannot be read."""
    good: list[tuple[int, object]] = []
    bad: list[BadLine] = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                good.append((number, json.loads(raw.decode("utf-8"))))
            except UnicodeDecodeError:
                bad.append(BadLine(path, number, "not UTF-8 text"))
            except ValueError as exc:  # json.JSONDecodeError
                msg, col = getattr(exc, "msg", str(exc)), getattr(exc, "colno", "?")
                bad.append(BadLine(path, number, f"not JSON ({msg} at column {col})"))
    return good, bad


def any_value(value: dict):
    """The Python value of an OTLP JSON AnyValue (64-bit ints arrive as strings)."""
    if not isinstance(value, dict):
        raise BadBatch(f"attribute value is not an object: {value!r:.60}")
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None  # an empty AnyValue


def attributes(items) -> dict:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise BadBatch("attributes is not a list")
    out = {}
    for item in items:
        if not isinstance(item, dict) or "key" not in item:
            raise BadBatch(f"attribute without a key: {item!r:.60}")
        out[item["key"]] = any_value(item.get("value") or {})
    return out


def _list(container: dict, key: str) -> list:
    value = container.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadBatch(f"{key} is not a list")
    return value


def _nanos(value, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadBatch(f"{what} is not a time in unix nanoseconds: {value!r:.40}") from None


def _resources(batch: object, key: str) -> Iterator[tuple[dict, dict]]:
    """(resource attributes, resource entry) for each entry of `batch[key]`."""
    if not isinstance(batch, dict) or key not in batch:
        raise BadBatch(f"not an OTLP JSON batch: no {key!r}")
    for entry in _list(batch, key):
        if not isinstance(entry, dict):
            raise BadBatch(f"{key} entry is not an object")
        yield attributes((entry.get("resource") or {}).get("attributes")), entry


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


def metric_points(batch: object) -> tuple[list[MetricPoint], list[str]]:
    """(number data points of one `resourceMetrics` batch, names of metrics of shapes not
    read: histograms, summaries)."""
    points: list[MetricPoint] = []
    other: list[str] = []
    for resource, entry in _resources(batch, "resourceMetrics"):
        for scope_metrics in _list(entry, "scopeMetrics"):
            scope = str((scope_metrics.get("scope") or {}).get("name", ""))
            for metric in _list(scope_metrics, "metrics"):
                if not isinstance(metric, dict) or "name" not in metric:
                    raise BadBatch("metric without a name")
                shape = "sum" if "sum" in metric else "gauge" if "gauge" in metric else None
                if shape is None:
                    other.append(str(metric["name"]))
                    continue
                data = metric[shape] or {}
                monotonic = bool(data.get("isMonotonic", False))
                temporality = int(data.get("aggregationTemporality", 0) or 0)
                for point in _list(data, "dataPoints"):
                    if "asInt" in point:
                        value = float(int(point["asInt"]))
                    elif "asDouble" in point:
                        value = float(point["asDouble"])
                    else:
                        continue  # no recorded value (flags: no recorded value)
                    time_ns = _nanos(point.get("timeUnixNano"), "timeUnixNano")
                    start_ns = _nanos(point.get("startTimeUnixNano", 0), "startTimeUnixNano")
                    points.append(MetricPoint(resource, scope, str(metric["name"]),
                                              str(metric.get("unit", "")), shape, monotonic,
                                              temporality, attributes(point.get("attributes")),
                                              start_ns, time_ns, value))
    return points, other


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


def spans(batch: object) -> list[Span]:
    out: list[Span] = []
    for resource, entry in _resources(batch, "resourceSpans"):
        for scope_spans in _list(entry, "scopeSpans"):
            scope = str((scope_spans.get("scope") or {}).get("name", ""))
            for span in _list(scope_spans, "spans"):
                if not isinstance(span, dict) or "name" not in span:
                    raise BadBatch("span without a name")
                events = tuple(
                    SpanEvent(str(e.get("name", "")), _nanos(e.get("timeUnixNano"), "event time"),
                              attributes(e.get("attributes")))
                    for e in _list(span, "events"))
                status = span.get("status") or {}
                code = status.get("code")
                error = None
                if code in (2, "STATUS_CODE_ERROR"):
                    error = str(status.get("message") or "error")
                out.append(Span(resource, scope, str(span["name"]), str(span.get("traceId", "")),
                                str(span.get("spanId", "")), str(span.get("parentSpanId", "")),
                                _nanos(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                                _nanos(span.get("endTimeUnixNano"), "endTimeUnixNano"),
                                attributes(span.get("attributes")), events, error))
    return out


# --- logs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogRecord:
    resource: dict
    time_ns: int
    severity: str
    severity_number: int
    body: str


def log_records(batch: object) -> list[LogRecord]:
    out: list[LogRecord] = []
    for resource, entry in _resources(batch, "resourceLogs"):
        for scope_logs in _list(entry, "scopeLogs"):
            for record in _list(scope_logs, "logRecords"):
                if not isinstance(record, dict):
                    raise BadBatch("log record is not an object")
                time_ns = _nanos(record.get("timeUnixNano") or
                                 record.get("observedTimeUnixNano") or 0, "timeUnixNano")
                body = record.get("body")
                text = any_value(body) if isinstance(body, dict) else body
                out.append(LogRecord(resource, time_ns, str(record.get("severityText", "")),
                                     int(record.get("severityNumber", 0) or 0),
                                     "" if text is None else str(text)))
    return out
