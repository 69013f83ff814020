"""The trainer's step log as OTLP log records: one record per step-log line.

    timeUnixNano, observedTimeUnixNano   the record's `time_unix_nano` (left out when it has
                                         none, or one that is not a time in nanoseconds)
    severityNumber / severityText        9 / INFO
    body                                 the line as the trainer wrote it (a string)
    attributes                           each top-level field but `time_unix_nano`: `step`,
                                         `loss`, the `host_mem.*` census keys, ... typed
                                         (bool, int, double, string); an integer beyond 64
                                         bits, a NaN or infinity and a nested value only in
                                         the body; plus `log.file.name`: the step log's name
    resource                             the resource of the process that wrote it: the first
                                         resource of `traces-`, `metrics-` or `logs-<stem>`
                                         beside it (same rank, start and pid); none when no
                                         such file has a complete line
    scope                                `yeto_otel.steplog`, this package's version

A line that is not a JSON object is rejected locally and reported like a collector rejection.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from opentelemetry.semconv._incubating.attributes.log_attributes import LOG_FILE_NAME

from ...version import __version__
from ._files import ReplayFile, complete_lines

__all__ = ["SCOPE_NAME", "log_record", "resource_of", "steplog_request"]

SCOPE_NAME = "yeto_otel.steplog"
_TIME_FIELD = "time_unix_nano"
_INT64 = (-(1 << 63), (1 << 63) - 1)
_SEVERITY_INFO = 9


def _value(value: object) -> dict | None:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)} if _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, float):
        return {"doubleValue": value} if math.isfinite(value) else None
    if isinstance(value, str):
        return {"stringValue": value}
    return None


def log_record(record: dict, raw: bytes, file_name: str) -> dict:
    """The OTLP JSON log record of one step-log record (`raw`: its line as written)."""
    out: dict = {"severityNumber": _SEVERITY_INFO, "severityText": "INFO",
                 "body": {"stringValue": raw.decode("utf-8").rstrip("\n")}}
    when = record.get(_TIME_FIELD)
    if isinstance(when, int) and not isinstance(when, bool) and 0 < when < 1 << 64:
        out["timeUnixNano"] = out["observedTimeUnixNano"] = str(when)
    attributes = [{"key": LOG_FILE_NAME, "value": {"stringValue": file_name}}]
    for key, value in record.items():
        typed = _value(value) if key != _TIME_FIELD else None
        if typed is not None:
            attributes.append({"key": str(key), "value": typed})
    out["attributes"] = attributes
    return out


def resource_of(steplog: ReplayFile) -> dict:
    """The OTLP resource of the process that wrote `steplog`, or {} when none is found."""
    for kind in ("traces", "metrics", "logs"):
        path: Path = steplog.path.with_name(f"{kind}-{steplog.stem}.jsonl")
        try:
            first = next(iter(complete_lines(path)), None)
        except OSError:
            continue
        if first is None or first.raw is None:
            continue
        try:
            batch = json.loads(first.raw)
            key = {"traces": "resourceSpans", "metrics": "resourceMetrics",
                   "logs": "resourceLogs"}[kind]
            resource = batch[key][0].get("resource")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            continue
        if isinstance(resource, dict):
            return resource
    return {}


def steplog_request(resource: dict, records: list[dict]) -> dict:
    """One `resourceLogs` request holding `records`."""
    return {"resourceLogs": [{"resource": resource, "scopeLogs": [
        {"scope": {"name": SCOPE_NAME, "version": __version__}, "logRecords": records}]}]}
