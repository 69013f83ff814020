"""The demo's telemetry: the defaults it chooses for itself, set-up as `opentelemetry-instrument`
with yeto's distro would do it, the step log beside the telemetry files, and the final flush.

The OTel SDK and yeto's `otel` and `instrumentation` rooms are imported inside the functions:
`yeto-otel --help` and `yeto-otel census` load this module too and should not pay for them.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.environment_variables import (OTEL_METRIC_EXPORT_INTERVAL,
                                                     OTEL_SERVICE_NAME)
from opentelemetry.semconv.attributes.service_attributes import SERVICE_INSTANCE_ID, SERVICE_NAME

from ...settings import set_environment_defaults
from ._plan import Plan
from ._progress import Progress

__all__ = [
    "DEMO_DEFAULTS",
    "DEMO_SERVICE_NAME",
    "set_demo_defaults",
    "shutdown_telemetry",
    "start_telemetry",
    "step_log_path",
]

DEMO_SERVICE_NAME = "yeto-otel-demo"
# (variable, value, why): what the demo sets unless the user has; `--help` prints this table.
DEMO_DEFAULTS: tuple[tuple[str, str, str], ...] = (
    (OTEL_METRIC_EXPORT_INTERVAL, "1000", "census every second, not every 10 s"),
    ("YETO_DILOCO_HOST_MEM_CENSUS", "1", "the census in the step log"),
    (OTEL_SERVICE_NAME, DEMO_SERVICE_NAME, ""),
)


def set_demo_defaults(plan: Plan) -> None:
    """Environment the demo sets for itself before any setting is read (the user's wins;
    --rank / --world-size win over the user's RANK / WORLD_SIZE, as flags do)."""
    from ...otel import user_resource_attributes

    defaults = {name: value for name, value, _ in DEMO_DEFAULTS}
    # OTEL_SERVICE_NAME would override a service.name the user gave in
    # OTEL_RESOURCE_ATTRIBUTES, so the demo names itself only when the user has not.
    if SERVICE_NAME in user_resource_attributes():
        del defaults[OTEL_SERVICE_NAME]
    set_environment_defaults(defaults)
    flags = {"RANK": plan.rank, "WORLD_SIZE": plan.world_size}
    set_environment_defaults({name: str(value) for name, value in flags.items()
                              if value is not None}, override=True)


def start_telemetry(progress: Progress) -> str:
    """Configure the SDK, turn on the census and torch.load instrumentation; returns where the
    telemetry goes, in words."""
    from ...instrumentation import HostMemoryInstrumentor, TorchLoadInstrumentor
    from ...otel import configure_telemetry

    where = configure_telemetry()
    HostMemoryInstrumentor().instrument()
    TorchLoadInstrumentor().instrument()
    progress(f"telemetry: {where}")
    return where


def _instance_id() -> str:
    """This process's `service.instance.id`, as the configured resource says."""
    from opentelemetry import trace

    resource = getattr(trace.get_tracer_provider(), "resource", None)
    attributes = resource.attributes if resource is not None else {}
    return str(attributes.get(SERVICE_INSTANCE_ID, f"pid-{os.getpid()}"))


def step_log_path(local_dir: str) -> str:
    """<local dir>/steplog-<stem>.jsonl with the stem of this process's telemetry files when
    they are local (same rank, start and pid), else a fresh one, so `yeto-otel report` can
    pair the step log with the traces and metrics."""
    from ...otel import current_stem, local_file_stem

    stem = current_stem() or local_file_stem(_instance_id())
    return os.path.join(local_dir, f"steplog-{stem}.jsonl")


def shutdown_telemetry() -> None:
    """Export what is left and stop every provider, so the summary is printed after the data is
    out: the same bounded exit flush a stopping rank runs (YETO_OTEL_EXIT_FLUSH_TIMEOUT), so an
    unreachable collector delays the summary no longer than that. A failing exporter must not
    hide the summary: errors are the SDK's to log."""
    from ...otel import exit_flush

    flush = exit_flush()
    if flush is not None:
        flush.at_exit()
