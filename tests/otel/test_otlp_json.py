"""OTLP JSON batches into records: one bad value skips the record it is in (point, span, log
record), with a reason that names the field, and the rest of the batch is read."""

from __future__ import annotations

import copy

import pytest

from yeto_otel.otel import BadBatch, BadValue, log_records, metric_points, spans

_RESOURCE = {"attributes": [{"key": "service.instance.id", "value": {"stringValue": "h/rank-0"}}]}


def _point(**fields) -> dict:
    point = {"startTimeUnixNano": "1", "timeUnixNano": "1796231796209307059", "asInt": "5"}
    point.update(fields)
    return {k: v for k, v in point.items() if v is not None}


def _metrics(*points: dict) -> dict:
    return {"resourceMetrics": [{"resource": _RESOURCE, "scopeMetrics": [{"metrics": [
        {"name": "m", "unit": "By", "gauge": {"dataPoints": list(points)}}]}]}]}


def _span(**fields) -> dict:
    span = {"name": "s", "traceId": "t", "spanId": "a", "startTimeUnixNano": "10",
            "endTimeUnixNano": "20", "attributes": [], "events": []}
    span.update(fields)
    return span


def _spans(*items: dict) -> dict:
    return {"resourceSpans": [{"resource": _RESOURCE, "scopeSpans": [{"spans": list(items)}]}]}


def _deep(levels: int) -> dict:
    value: dict = {"intValue": "1"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


@pytest.mark.parametrize("bad, reason", [
    (_point(timeUnixNano="soon"), "timeUnixNano is not a time in unix nanoseconds"),
    (_point(timeUnixNano=str(10**25)), "timeUnixNano is not a time in unix nanoseconds"),
    (_point(timeUnixNano=None), "timeUnixNano is not a time in unix nanoseconds"),
    (_point(startTimeUnixNano=-1), "startTimeUnixNano is not a time in unix nanoseconds"),
    (_point(asInt="9" * 400), "asInt is outside the 64-bit integer range"),
    (_point(asInt="1" * 5000), "asInt is not an integer"),
    (_point(asInt=None, asDouble=float("inf")), "asDouble is not a finite number"),  # 1e400
    (_point(asInt=None, asDouble="Infinity"), "asDouble is not a finite number"),
    (_point(asInt=None, asDouble=10**400), "asDouble is beyond the range of a double"),
    (_point(asInt=None, asDouble={"x": 1}), "asDouble is not a number"),
    (_point(attributes=[{"key": "k", "value": {"intValue": "9" * 400}}]),
     "an attribute's intValue is outside the 64-bit integer range"),
    (_point(attributes=[{"key": "k", "value": _deep(40)}]),
     "an attribute value is nested deeper than 32 levels"),
    ("not an object", "a data point is not an object"),
])
def test_a_bad_metric_value_skips_its_point_only(bad, reason):
    skipped: list[str] = []
    points, _ = metric_points(_metrics(_point(), bad, _point(asInt="7")), skipped)
    assert [p.value for p in points] == [5.0, 7.0]
    assert len(skipped) == 1 and skipped[0].startswith(f"metric point: {reason}")
    with pytest.raises(BadValue):  # without a list to note it in, nothing is dropped silently
        metric_points(_metrics(bad))


def test_a_bad_value_never_names_the_value():
    # the reasons add up on the page: the same fault in many points is one line
    skipped: list[str] = []
    metric_points(_metrics(_point(asInt="9" * 400), _point(asInt="8" * 400)), skipped)
    assert skipped[0] == skipped[1] and "999" not in skipped[0]


@pytest.mark.parametrize("bad, reason", [
    (_span(startTimeUnixNano="x"), "startTimeUnixNano is not a time"),
    (_span(endTimeUnixNano=str(10**25)), "endTimeUnixNano is not a time"),
    (_span(events=[{"name": "e", "timeUnixNano": "later"}]), "an event's time is not a time"),
    (_span(attributes=[{"key": "yeto.anchors.file_size", "value": {"intValue": "big"}}]),
     "an attribute's intValue is not an integer"),
    (_span(attributes=[{"key": ["not", "a", "key"], "value": {}}]), "an attribute has no key"),
    ({"spanId": "no name"}, "a span has no name"),
])
def test_a_bad_span_value_skips_that_span_only(bad, reason):
    skipped: list[str] = []
    found = spans(_spans(_span(name="before"), bad, _span(name="after")), skipped)
    assert [s.name for s in found] == ["before", "after"]
    assert len(skipped) == 1 and skipped[0].startswith(f"span: {reason}")


def test_a_string_where_bytes_are_expected_is_kept_as_the_string():
    # typed by its AnyValue: the page shows it as it came, never sizes it
    found = spans(_spans(_span(attributes=[{"key": "yeto.anchors.file_size",
                                            "value": {"stringValue": "big"}}])), [])
    assert found[0].attributes == {"yeto.anchors.file_size": "big"}


def test_a_bad_log_record_is_skipped_alone():
    batch = {"resourceLogs": [{"resource": _RESOURCE, "scopeLogs": [{"logRecords": [
        {"timeUnixNano": "5", "body": {"stringValue": "kept"}},
        {"timeUnixNano": str(2**64), "body": {"stringValue": "skipped"}},
        {"timeUnixNano": "6", "severityNumber": "9" * 30, "body": {"stringValue": "skipped"}},
    ]}]}]}
    skipped: list[str] = []
    assert [r.body for r in log_records(batch, skipped)] == ["kept"]
    assert skipped == ["log record: timeUnixNano is not a time in unix nanoseconds (0 to 2^64-1)",
                       "log record: severityNumber is outside the 64-bit integer range"]


def test_a_bad_resource_is_a_bad_batch():
    # whose records they are cannot be told: the whole line goes, counted by the caller
    batch = copy.deepcopy(_metrics(_point()))
    batch["resourceMetrics"][0]["resource"]["attributes"].append(
        {"key": "yeto.rank", "value": {"intValue": "9" * 400}})
    with pytest.raises(BadBatch, match="resource: an attribute's intValue is outside"):
        metric_points(batch, [])


def test_times_at_the_edges_of_the_range_are_read():
    skipped: list[str] = []
    points, _ = metric_points(_metrics(_point(timeUnixNano=str(2**64 - 1)),
                                       _point(timeUnixNano=0, startTimeUnixNano=0)), skipped)
    assert [p.time_ns for p in points] == [2**64 - 1, 0] and skipped == []
