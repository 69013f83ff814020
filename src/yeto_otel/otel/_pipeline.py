"""An SDK pipeline of a process's own, beside the global providers: for a DataLoader worker,
and for a rank whose global providers another configurator set up (see `_foreign`).

A forked worker inherited its rank's global providers (which export nothing in it, see
`_owner_only`), and a spawned one has none (it is a child, see `_process`); neither may report
through them. The worker gets providers of its own instead, with its own resource and the
exporters the environment names, exactly as the configurator would pick them; they send only
from this process and are flushed by `shutdown()` when it exits, within a bound of the
caller's (a worker's is short: the end of an epoch waits for its workers to exit).
The SDK's own unbounded atexit hooks are not registered for them: `shutdown()` is their exit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from opentelemetry.sdk._configuration import _get_exporter_names, _import_exporters
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ..settings import Settings, local_exporters_selected
from ._exit_flush import ProviderFlusher, flush_providers
from ._local_files import local_exporter_args
from ._owner_only import OwnerOnlyMetricExporter, OwnerOnlySpanExporter

__all__ = ["ProcessPipeline", "process_pipeline", "start_process_pipeline"]


@dataclass
class ProcessPipeline:
    pid: int
    resource: Resource
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exit_flush_timeout_ms: int = Settings.exit_flush_timeout_ms
    trace_loads: bool = True  # whether the load instrumentors give this process's loads spans

    def shutdown(self) -> bool:
        """Export what is pending (a last collection of every metric) and stop, within the
        exit flush bound; True when everything went out in time. Never raises: it runs at
        process exit, where telemetry must not fail the worker."""
        flushers = [ProviderFlusher(provider)
                    for provider in (self.meter_provider, self.tracer_provider)]
        return flush_providers(flushers, self.exit_flush_timeout_ms / 1000, final=True)


_pipeline: ProcessPipeline | None = None


def process_pipeline() -> ProcessPipeline | None:
    """This process's own pipeline, if it started one (a forked copy of another's is not)."""
    return _pipeline if _pipeline is not None and _pipeline.pid == os.getpid() else None


def _metric_readers(classes: dict, args: dict) -> list[MetricReader]:
    readers = []
    for cls in classes.values():
        if issubclass(cls, MetricReader):
            readers.append(cls(**args.get(cls, {})))
        else:
            readers.append(PeriodicExportingMetricReader(
                OwnerOnlyMetricExporter(cls(**args.get(cls, {})))))
    return readers


def start_process_pipeline(attributes: dict, settings: Settings, *,
                           exit_flush_timeout_ms: int | None = None,
                           trace_loads: bool = True) -> ProcessPipeline:
    """Providers for this process under `attributes` (traces and metrics: yeto-otel has no log
    records of its own there), or the one already started here. `shutdown()` waits at most
    `exit_flush_timeout_ms` (YETO_OTEL_EXIT_FLUSH_TIMEOUT when not given)."""
    global _pipeline
    existing = process_pipeline()
    if existing is not None:
        return existing
    resource = Resource.create(attributes)
    span_classes, metric_classes, _ = _import_exporters(
        _get_exporter_names("traces"), _get_exporter_names("metrics"), [])
    args: dict = {}
    if local_exporters_selected():
        args, _ = local_exporter_args(settings.local_dir, str(attributes[SERVICE_INSTANCE_ID]))
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for cls in span_classes.values():
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OwnerOnlySpanExporter(cls(**args.get(cls, {})))))
    meter_provider = MeterProvider(resource=resource, shutdown_on_exit=False,
                                   metric_readers=_metric_readers(metric_classes, args))
    if exit_flush_timeout_ms is None:
        exit_flush_timeout_ms = settings.exit_flush_timeout_ms
    _pipeline = ProcessPipeline(os.getpid(), resource, tracer_provider, meter_provider,
                                exit_flush_timeout_ms, trace_loads)
    return _pipeline
