"""The configurator `opentelemetry-instrument` loads for yeto-otel (entry point `yeto`).

It is the SDK's own, given the rank's identity as resource attributes; the user's
OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME still win over ours. When the local files are
the destination, the exporters are pointed at this process's files. Only a process that
reports (see `_process`, `_start`) gets an SDK at all: a launcher or a child is left with the
API's no-op providers, and the exporters of one that does report send only from that process.
It installs no signal handler unless YETO_OTEL_EXIT_FLUSH_ON_SIGNALS=on (see `_exit_flush`).
"""

from __future__ import annotations

import os

from opentelemetry import metrics, trace
from opentelemetry._logs import get_logger_provider
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ..settings import Settings, current_settings, local_exporters_selected
from ._exit_flush import STOP_SIGNALS, install_exit_flush
from ._local_files import local_exporter_args
from ._late_rank import adopted_attributes, await_rank
from ._owner_only import OwnerOnlyLogExporter, OwnerOnlySpanExporter, guard_metric_readers
from ._pipeline import start_process_pipeline
from ._resource import reported_attributes
from ._start import start_process

__all__ = ["YetoConfigurator", "configurator_ran", "rank_attributes", "start_own_pipeline"]

# The resource attributes this process reports under, once configured (a DataLoader worker
# builds its own identity from them).
_rank_attributes: dict | None = None
# The process whose configurator step was ours, whatever it decided (see `_foreign`).
_ran_in: int | None = None


def rank_attributes() -> dict | None:
    """The identity this process reports under now (a plain process's rank once it appears)."""
    return adopted_attributes() or _rank_attributes


def configurator_ran() -> bool:
    """Whether yeto-otel's configurator ran in this process (a forked copy's did not)."""
    return _ran_in == os.getpid()


def _span_processor(exporter):
    return BatchSpanProcessor(OwnerOnlySpanExporter(exporter))


def _log_processor(exporter):
    return BatchLogRecordProcessor(OwnerOnlyLogExporter(exporter))


def _identity(settings: Settings, extra: dict | None = None) -> dict:
    attributes = reported_attributes(settings)
    attributes.update(extra or {})
    return attributes


def _exit_signals(settings: Settings) -> tuple:
    return STOP_SIGNALS if settings.exit_flush_on_signals else ()


class YetoConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        global _rank_attributes, _ran_in
        _ran_in = os.getpid()
        role = start_process()  # the distro decided already, unless another distro ran
        if role is None or not role.reports:
            return  # the SDK is disabled, or a launcher or a child: the API stays no-op here
        settings = current_settings()
        attributes = _identity(settings, kwargs.pop("resource_attributes", None))
        if local_exporters_selected():
            args, _ = local_exporter_args(settings.local_dir,
                                          str(attributes[SERVICE_INSTANCE_ID]))
            kwargs["exporter_args_map"] = {**args, **(kwargs.get("exporter_args_map") or {})}
        kwargs.setdefault("export_span_processor", _span_processor)
        kwargs.setdefault("export_log_record_processor", _log_processor)
        super()._configure(resource_attributes=attributes, **kwargs)
        guard_metric_readers(metrics.get_meter_provider())
        # Its last collection and ended spans go out when it exits (on SIGTERM too, opt-in).
        install_exit_flush((metrics.get_meter_provider(), trace.get_tracer_provider(),
                            get_logger_provider()), settings.exit_flush_timeout_ms,
                           signals=_exit_signals(settings))
        _rank_attributes = dict(attributes)
        await_rank(settings)


def start_own_pipeline(settings: Settings) -> str:
    """yeto-otel's telemetry on a pipeline of this process's own, where another configurator
    set up the global providers (see `_foreign`); returns the identity it reports under."""
    global _rank_attributes
    attributes = _identity(settings)
    pipeline = start_process_pipeline(attributes, settings)
    install_exit_flush((pipeline.meter_provider, pipeline.tracer_provider),
                       settings.exit_flush_timeout_ms, signals=_exit_signals(settings))
    _rank_attributes = dict(attributes)
    await_rank(settings)
    return str(attributes[SERVICE_INSTANCE_ID])
