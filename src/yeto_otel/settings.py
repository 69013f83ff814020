"""Every setting yeto-otel reads, read and validated in one place.

This is the only module that reads (or writes) the environment. Every other module receives
values: internal code is given a `Settings` or plain arguments, and the public entry points
(the instrumentors, `add_census_to_step_log`, `save_resume_anchors`, `load_resume_anchors`,
the distro and the command line) take their values as arguments and fall back to
`load_settings()` only when an argument is not given. The settings themselves are one table
(`setting_table`, parsers in `setting_values`), also the source of `docs/settings.md`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Mapping

__all__ = [
    "ANCHOR_DTYPES",
    "EXPORT_VARIABLES",
    "HOST_ALLOCATOR_ACCEPTED",
    "HOST_ALLOCATOR_CHOICES",
    "LOCAL_EXPORTER",
    "OTEL_DEFAULTS",
    "SETTINGS",
    "SIGNALS",
    "Setting",
    "Settings",
    "SettingsError",
    "IDENTITY_OWNER",
    "apply_otel_defaults",
    "check_sdk_variables",
    "claim_identity",
    "exporter_choices",
    "exports_locally",
    "load_settings",
    "local_exporters_selected",
    "otlp_endpoint",
    "otlp_exporter_variables",
    "parse_setting",
    "set_environment_defaults",
]


from .setting_values import (
    ANCHOR_DTYPES, HOST_ALLOCATOR_ACCEPTED, HOST_ALLOCATOR_CHOICES, IDENTITY_OWNER,
    OTLP_EXPORTER_BY_PROTOCOL, SDK_VARIABLES, Setting, SettingsError,
)
from .setting_table import SETTINGS

_BY_NAME = {setting.name: setting for setting in SETTINGS}


@dataclass(frozen=True)
class Settings:
    host_allocator: str = "auto"
    allocator_timeout_ms: int = 100
    node_metrics: str = "auto"
    lock_dir: str = "/dev/shm"
    step_log_census: bool = False
    local_dir: str = "yeto-telemetry"
    anchor_dtype: str | None = None
    resume_anchor_mmap: bool = True
    resume_anchor_readahead: str = "anchor"
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    dataloader_workers: bool = True
    smaps_budget_percent: float = 0.1
    semconv_metrics: bool = True
    exit_flush_timeout_ms: int = 3000
    identity_owner: tuple[int | None, int] | None = None

    @property
    def reports_node_metrics(self) -> bool:
        """Whether this process may observe node metrics: under `auto` only while it holds the
        host's node duty (census `NodeDuty`), under `on` always."""
        return self.node_metrics != "off"

    @property
    def node_fallback(self) -> bool:
        """Whether this process observes node metrics under `auto` when the node duty's lock
        cannot be used at all: the launcher's first local rank, or a plain process."""
        return self.local_rank in (None, 0)


_FIELDS = {
    "YETO_OTEL_HOST_ALLOCATOR": "host_allocator",
    "YETO_OTEL_ALLOCATOR_TIMEOUT": "allocator_timeout_ms",
    "YETO_OTEL_NODE_METRICS": "node_metrics",
    "YETO_OTEL_LOCK_DIR": "lock_dir",
    "YETO_OTEL_LOCAL_DIR": "local_dir",
    "YETO_DILOCO_HOST_MEM_CENSUS": "step_log_census",
    "YETO_DILOCO_ANCHOR_DTYPE": "anchor_dtype",
    "YETO_DILOCO_RESUME_ANCHOR_MMAP": "resume_anchor_mmap",
    "YETO_DILOCO_RESUME_ANCHOR_READAHEAD": "resume_anchor_readahead",
    "RANK": "rank",
    "LOCAL_RANK": "local_rank",
    "WORLD_SIZE": "world_size",
    "YETO_OTEL_DATALOADER_WORKERS": "dataloader_workers",
    "YETO_OTEL_SMAPS_BUDGET": "smaps_budget_percent",
    "YETO_OTEL_SEMCONV_METRICS": "semconv_metrics",
    "YETO_OTEL_EXIT_FLUSH_TIMEOUT": "exit_flush_timeout_ms",
    IDENTITY_OWNER: "identity_owner",
}


def parse_setting(name: str, raw: str) -> object:
    """Parse one setting's raw text, raising `SettingsError` that names it."""
    setting = _BY_NAME[name]
    try:
        return setting.parse(raw.strip())
    except ValueError as exc:
        raise SettingsError(name, raw, setting.accepted, str(exc)) from None


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate every setting; the first bad one raises `SettingsError`."""
    env = os.environ if environ is None else environ
    values = {}
    for setting in SETTINGS:
        raw = env.get(setting.name)
        if raw is None:
            raw = setting.default
        if raw is None:
            continue
        values[_FIELDS[setting.name]] = parse_setting(setting.name, raw)
    settings = Settings(**values)
    _check_rank_in_world(settings)
    return settings


def _check_rank_in_world(settings: Settings) -> None:
    # A launcher sets both; RANK >= WORLD_SIZE is a job torch.distributed refuses, and every
    # resource would name a rank that does not exist. LOCAL_WORLD_SIZE is not read by us, so
    # LOCAL_RANK is only bounded by itself.
    rank, world = settings.rank, settings.world_size
    if rank is not None and world is not None and rank >= world:
        raise SettingsError("RANK", str(rank), _BY_NAME["RANK"].accepted,
                            f"WORLD_SIZE is {world}, so ranks go from 0 to {world - 1}")


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


def claim_identity(rank: int | None, pid: int, environ: dict | None = None) -> None:
    """Record in the environment that process `pid` reports under rank `rank`'s identity
    (children inherit it: see YETO_OTEL_IDENTITY_OWNER)."""
    env = os.environ if environ is None else environ
    env[IDENTITY_OWNER] = f"{'-' if rank is None else rank}:{pid}"


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
