"""The configurator `opentelemetry-instrument` loads for yeto-otel (entry point `yeto`).

It is the SDK's own, given the rank's identity as resource attributes; the user's
OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME still win over ours. When the local files are
the destination, the exporters are pointed at this process's files. Only a process that
reports (see `_process`) gets an SDK at all: a launcher or a child is left with the API's
no-op providers, and the exporters of one that does report send only from that process.
"""

from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry._logs import get_logger_provider
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ..settings import load_settings, local_exporters_selected
from ._exit_flush import install_exit_flush
from ._local_files import local_exporter_args
from ._owner_only import OwnerOnlyLogExporter, OwnerOnlySpanExporter, guard_metric_readers
from ._process import claim
from ._resource import rank_resource_attributes, user_resource_attributes

__all__ = ["YetoConfigurator", "rank_attributes"]

# The resource attributes this process reports under, once configured (a DataLoader worker
# builds its own identity from them).
_rank_attributes: dict | None = None


def rank_attributes() -> dict | None:
    return _rank_attributes


def _span_processor(exporter):
    return BatchSpanProcessor(OwnerOnlySpanExporter(exporter))


def _log_processor(exporter):
    return BatchLogRecordProcessor(OwnerOnlyLogExporter(exporter))


class YetoConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        global _rank_attributes
        settings = load_settings()
        if not claim(settings).reports:
            return  # a launcher or a child: silent, the API stays no-op here
        attributes = rank_resource_attributes(settings)
        attributes.update(user_resource_attributes())
        attributes.update(kwargs.pop("resource_attributes", None) or {})
        if local_exporters_selected():
            args, _ = local_exporter_args(settings.local_dir,
                                          str(attributes[SERVICE_INSTANCE_ID]))
            kwargs["exporter_args_map"] = {**args, **(kwargs.get("exporter_args_map") or {})}
        kwargs.setdefault("export_span_processor", _span_processor)
        kwargs.setdefault("export_log_record_processor", _log_processor)
        super()._configure(resource_attributes=attributes, **kwargs)
        guard_metric_readers(metrics.get_meter_provider())
        # Its last collection and ended spans go out when it stops, SIGTERM included.
        install_exit_flush((metrics.get_meter_provider(), trace.get_tracer_provider(),
                            get_logger_provider()), settings.exit_flush_timeout_ms)
        _rank_attributes = dict(attributes)
