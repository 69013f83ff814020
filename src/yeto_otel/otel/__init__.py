"""OpenTelemetry plumbing: the distro and configurator `opentelemetry-instrument` loads, the
rank's resource attributes, the embedded default (local OTLP JSON files) and the reader of
those files, and `configure_telemetry` for programs that set telemetry up in code."""

from ._configurator import YetoConfigurator
from ._distro import YetoDistro
from ._local_files import current_stem, local_exporter_args, local_file_stem
from ._otlp_json import (CUMULATIVE, DELTA, BadBatch, BadLine, LogRecord, MetricPoint, Span,
                         SpanEvent, log_records, metric_points, read_json_lines, spans)
from ._resource import (LOCAL_RANK_ATTRIBUTE, RANK_ATTRIBUTE, WORLD_SIZE_ATTRIBUTE,
                        YetoResourceDetector, rank_resource_attributes, user_resource_attributes)
from ._setup import configure_telemetry, destination

__all__ = [
    "CUMULATIVE",
    "DELTA",
    "LOCAL_RANK_ATTRIBUTE",
    "RANK_ATTRIBUTE",
    "WORLD_SIZE_ATTRIBUTE",
    "BadBatch",
    "BadLine",
    "LogRecord",
    "MetricPoint",
    "Span",
    "SpanEvent",
    "log_records",
    "metric_points",
    "read_json_lines",
    "spans",
    "YetoConfigurator",
    "YetoDistro",
    "YetoResourceDetector",
    "configure_telemetry",
    "current_stem",
    "destination",
    "local_exporter_args",
    "local_file_stem",
    "rank_resource_attributes",
    "user_resource_attributes",
]
