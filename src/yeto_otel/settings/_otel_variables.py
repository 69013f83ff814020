"""The standard OpenTelemetry SDK variables yeto-otel reads or sets: where telemetry goes (the
embedded default when nothing says), the defaults the distro fills in, the SDK's own durations
and sizes checked at start, and the identity owner a reporting process records for its
children. With `_load`, the only code that reads or writes the environment.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import Mapping

from ._values import IDENTITY_OWNER, OTLP_EXPORTER_BY_PROTOCOL, SDK_VARIABLES, SettingsError

__all__ = ["EXPORT_VARIABLES", "LOCAL_EXPORTER", "OTEL_DEFAULTS", "SIGNALS", "apply_otel_defaults",
           "check_sdk_variables", "choose_configurator", "claim_identity", "exporter_choices",
           "exports_locally", "local_exporters_only", "local_exporters_selected", "local_rank_now",
           "otlp_endpoint",
           "otlp_exporter_variables", "sdk_disabled", "service_name_set",
           "set_environment_defaults"]


# Standard SDK variables that say where telemetry goes. With none of them set, yeto's distro
# writes to local files (the embedded default) instead of sending OTLP to a collector that is
# not there.
EXPORT_VARIABLES = (
    "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)
LOCAL_EXPORTER = "otlp_json_file"  # the exporters' entry-point name


def exports_locally(environ: Mapping[str, str] | None = None) -> bool:
    """True when nothing says where telemetry goes (before the distro's defaults apply)."""
    env = os.environ if environ is None else environ
    return not any(env.get(name, "").strip() for name in EXPORT_VARIABLES)


SIGNALS = ("traces", "metrics", "logs")


def exporter_choices(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """signal -> the value of its OTEL_<SIGNAL>_EXPORTER ("" when unset)."""
    env = os.environ if environ is None else environ
    return {signal: env.get(f"OTEL_{signal.upper()}_EXPORTER", "") for signal in SIGNALS}


def local_exporters_selected(environ: Mapping[str, str] | None = None) -> bool:
    """Whether any signal goes to the local files (after the distro's defaults apply)."""
    return any(LOCAL_EXPORTER in value for value in exporter_choices(environ).values())


def local_exporters_only(environ: Mapping[str, str] | None = None) -> bool:
    """Whether every signal that is exported goes to the local files, and none to a
    collector (after the distro's defaults apply)."""
    named = [part.strip() for value in exporter_choices(environ).values()
             for part in value.split(",") if part.strip() not in ("", "none")]
    return bool(named) and all(name == LOCAL_EXPORTER for name in named)


def otlp_endpoint(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None


def otlp_exporter_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The standard `OTEL_EXPORTER_OTLP_*` variables that are set (empty means unset), for a
    command that sends OTLP itself (`yeto-otel replay`) and resolves them as the exporters do."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items()
            if name.startswith("OTEL_EXPORTER_OTLP_") and value.strip()}


# Standard SDK variables that yeto's distro sets when the user has not. Without an endpoint
# or exporter setting, every signal goes to local files; with one, over OTLP as the upstream
# distro does. The census is collected every 10 s either way.
OTEL_DEFAULTS: dict[str, str] = {
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_METRICS_EXPORTER": "otlp",
    "OTEL_LOGS_EXPORTER": "otlp",
    "OTEL_METRIC_EXPORT_INTERVAL": "10000",
}


def set_environment_defaults(values: Mapping[str, str], *, override: bool = False,
                             environ: dict | None = None) -> None:
    """Set variables for this process before anything reads them (a tool such as the demo
    choosing its own defaults): where unset, or always with `override`. The one place besides
    `apply_otel_defaults` that writes the environment."""
    env = os.environ if environ is None else environ
    for name, value in values.items():
        if override:
            env[name] = value
        else:
            env.setdefault(name, value)


def service_name_set(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the user named the service (OTEL_SERVICE_NAME, or service.name in
    OTEL_RESOURCE_ATTRIBUTES): without, every process is `unknown_service`."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SERVICE_NAME", "").strip():
        return True
    pairs = (pair.partition("=") for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","))
    return any(key.strip() == "service.name" and value.strip() for key, _, value in pairs)


def local_rank_now(environ: Mapping[str, str] | None = None) -> int | None:
    """LOCAL_RANK as the environment says now (Lightning sets it in its rank 0's own environment
    after that started); None where unset or not a rank."""
    env = os.environ if environ is None else environ
    value = env.get("LOCAL_RANK", "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else None


def claim_identity(key: int | str | None, pid: int, environ: dict | None = None) -> None:
    """Record in the environment that process `pid` reports under the identity `key` (a rank,
    `local-<L>` while the rank is pending, None for a plain process); children inherit it:
    see YETO_OTEL_IDENTITY_OWNER."""
    env = os.environ if environ is None else environ
    env[IDENTITY_OWNER] = f"{'-' if key is None else key}:{pid}"


def apply_otel_defaults(environ: dict | None = None) -> None:
    """Fill in the SDK variables where unset, before the SDK configurator reads them."""
    env = os.environ if environ is None else environ
    local = exports_locally(env)
    for name, value in OTEL_DEFAULTS.items():
        if local and name.endswith("_EXPORTER"):
            value = LOCAL_EXPORTER
        env.setdefault(name, value)
    _bound_span_batch_delay(env)


def _bound_span_batch_delay(env: dict) -> None:
    # A process that dies without an exit flush (SIGKILL, os._exit) loses what it has not yet
    # exported: the last metric interval, and the spans ended since the last batch export.
    # Keep the span batch delay (the SDK's default: 5000 ms) within the metric interval, so
    # that one interval bounds both.
    try:
        interval = int(float(env.get("OTEL_METRIC_EXPORT_INTERVAL", "")))
    except (ValueError, OverflowError):
        return  # not ours to judge here: the start-up checks name it
    if 0 < interval < 5000:
        env.setdefault("OTEL_BSP_SCHEDULE_DELAY", str(interval))


def check_sdk_variables(environ: Mapping[str, str] | None = None) -> None:
    """Check the standard SDK variables the distro relies on, as our own settings are checked:
    durations and sizes the SDK could not use, and exporters that are not installed, raise
    `SettingsError` here instead of a traceback while the SDK sets up. Empty means unset."""
    env = os.environ if environ is None else environ
    for name, (accepted, parse) in SDK_VARIABLES.items():
        raw = env.get(name, "").strip()
        if raw:
            try:
                parse(raw)
            except ValueError as exc:
                raise SettingsError(name, raw, accepted, str(exc)) from None
    for signal, value in exporter_choices(env).items():
        _check_exporters(signal, value, env)


def _check_exporters(signal: str, value: str, env: Mapping[str, str]) -> None:
    name = f"OTEL_{signal.upper()}_EXPORTER"
    if value.strip().lower() in ("", "none"):
        return
    installed = {ep.name for ep in entry_points(group=f"opentelemetry_{signal}_exporter")}
    accepted = ", ".join(["none", *sorted(installed)]) + " (comma-separated)"
    for exporter in (part.strip() for part in value.split(",")):
        if exporter == "otlp":  # the SDK picks the protocol's exporter, as it does here
            protocol_name = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
            if not env.get(protocol_name):
                protocol_name = "OTEL_EXPORTER_OTLP_PROTOCOL"
            protocol = env.get(protocol_name, "").strip()
            if protocol and protocol not in OTLP_EXPORTER_BY_PROTOCOL:
                raise SettingsError(protocol_name, protocol,
                                    ", ".join(OTLP_EXPORTER_BY_PROTOCOL), "not supported")
            exporter = OTLP_EXPORTER_BY_PROTOCOL.get(protocol, exporter)
        if exporter not in installed:
            raise SettingsError(name, value, accepted,
                                f"no {signal} exporter named {exporter!r} is installed")


def sdk_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """OTEL_SDK_DISABLED=true (read as the SDK reads it): nothing of ours may run then."""
    env = os.environ if environ is None else environ
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def choose_configurator(name: str, environ: dict | None = None) -> bool:
    """Select the configurator `opentelemetry-instrument` loads next, unless the user chose one
    (OTEL_PYTHON_CONFIGURATOR); True when it is now `name`."""
    env = os.environ if environ is None else environ
    return env.setdefault("OTEL_PYTHON_CONFIGURATOR", name) == name
