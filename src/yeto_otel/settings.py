"""Every setting yeto-otel reads, in one table, read and validated in one place.

This is the only module that reads (or writes) the environment. Every other module receives
values: internal code is given a `Settings` or plain arguments, and the public entry points
(the instrumentors, `add_census_to_step_log`, `save_resume_anchors`, `load_resume_anchors`,
the distro and the command line) take their values as arguments and fall back to
`load_settings()` only when an argument is not given. The table is also the source of
`docs/settings.md`, so a setting cannot exist without being documented.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
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
    "claim_identity",
    "exporter_choices",
    "exports_locally",
    "load_settings",
    "local_exporters_selected",
    "otlp_endpoint",
    "parse_setting",
    "set_environment_defaults",
]


from .setting_values import (
    ANCHOR_DTYPES, HOST_ALLOCATOR_ACCEPTED, HOST_ALLOCATOR_CHOICES, IDENTITY_OWNER,
    Setting, SettingsError, parse_allocator,
    parse_anchor_dtype, parse_directory, parse_identity_owner, parse_node_metrics,
    parse_on_off, parse_positive_rank, parse_rank, parse_switch,
)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "YETO_OTEL_HOST_ALLOCATOR",
        "auto",
        HOST_ALLOCATOR_ACCEPTED,
        "Where the accelerator host (pinned) allocator's counters come from. `auto` uses CUDA "
        "when torch is imported and CUDA is initialised, else torch_npu when it is imported, else "
        "nothing; it never imports torch itself. `module:function` names a callable returning "
        "the flat stats dict (other accelerators, tests).",
        parse_allocator,
    ),
    Setting(
        "YETO_OTEL_NODE_METRICS",
        "auto",
        "`auto`, `on`, `off`",
        "Whether this process observes the node-wide `yeto.node.*` metrics. `auto`: only the "
        "process whose `LOCAL_RANK` is 0 (or unset), so 8 ranks on a host do not report node "
        "memory 8 times.",
        parse_node_metrics,
    ),
    Setting(
        "YETO_OTEL_DATALOADER_WORKERS",
        "on",
        "`on`, `off`",
        "`on`: each DataLoader worker of a rank reports its own process census (and its "
        "`torch.load` spans) as `<host>/rank-<RANK>/worker-<K>`, `K` the worker id, reused "
        "across epochs. `off`: workers are silent, like every other child process.",
        parse_on_off,
    ),
    Setting(
        "YETO_OTEL_LOCAL_DIR",
        "yeto-telemetry",
        "a directory path (created if missing)",
        "Where telemetry goes when no exporter endpoint is configured (no `OTEL_EXPORTER_OTLP_*"
        "ENDPOINT`, no `OTEL_*_EXPORTER`): OTLP JSON lines files, one per signal and process, "
        "that `yeto-otel report` reads. Relative paths are from the working directory.",
        parse_directory,
    ),
    Setting(
        "YETO_DILOCO_HOST_MEM_CENSUS",
        "0",
        "`0` or `1`",
        "`1`: `add_census_to_step_log` adds the host-memory census to the step log record on "
        "sync rank 0. Unset or `0`: the record is left exactly as it was.",
        parse_switch,
    ),
    Setting(
        "YETO_DILOCO_ANCHOR_DTYPE",
        None,
        ", ".join(f"`{name}`" for name in ANCHOR_DTYPES),
        "dtype `save_resume_anchors` stores anchors in when its `dtype` argument is not given. "
        "Unset: the tensors' own dtype (the broadcast dtype, FP32 for an int4/int8 push "
        "session). `bfloat16` halves resident anchors but rounds `local - anchor` and the "
        "resume's `global_new + (local - anchor_old)`: opt in knowingly.",
        parse_anchor_dtype,
    ),
    Setting(
        "YETO_DILOCO_RESUME_ANCHOR_MMAP",
        "1",
        "`0` or `1`",
        "`1`: `load_resume_anchors` maps the anchor file (`torch.load(mmap=True)`), so shards the "
        "resume never reads stay out of memory. `0`: read the whole file eagerly, as before.",
        parse_switch,
    ),
    Setting(
        "RANK",
        None,
        "an integer >= 0",
        "Global rank set by the launcher (torchrun). Becomes the `yeto.rank` resource attribute "
        "and part of `service.instance.id`.",
        parse_rank,
    ),
    Setting(
        "LOCAL_RANK",
        None,
        "an integer >= 0",
        "Rank within the host, set by the launcher. Becomes `yeto.local_rank`; decides which "
        "process reports node metrics under `YETO_OTEL_NODE_METRICS=auto`.",
        parse_rank,
    ),
    Setting(
        "WORLD_SIZE",
        None,
        "an integer >= 1",
        "Number of ranks, set by the launcher. Becomes `yeto.world_size`.",
        parse_positive_rank,
    ),
    Setting(
        IDENTITY_OWNER,
        None,
        "set by yeto-otel",
        "Not a setting for people: the process that reports under an identity (a rank) writes "
        "`<RANK>:<pid>` here, so the children that inherit its environment (spawned DataLoader "
        "workers, multiprocessing helpers) know they are not it and stay silent.",
        parse_identity_owner,
    ),
)

_BY_NAME = {setting.name: setting for setting in SETTINGS}


@dataclass(frozen=True)
class Settings:
    host_allocator: str = "auto"
    node_metrics: str = "auto"
    step_log_census: bool = False
    local_dir: str = "yeto-telemetry"
    anchor_dtype: str | None = None
    resume_anchor_mmap: bool = True
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    dataloader_workers: bool = True
    identity_owner: tuple[int | None, int] | None = None

    @property
    def reports_node_metrics(self) -> bool:
        if self.node_metrics == "auto":
            return self.local_rank in (None, 0)
        return self.node_metrics == "on"


_FIELDS = {
    "YETO_OTEL_HOST_ALLOCATOR": "host_allocator",
    "YETO_OTEL_NODE_METRICS": "node_metrics",
    "YETO_OTEL_LOCAL_DIR": "local_dir",
    "YETO_DILOCO_HOST_MEM_CENSUS": "step_log_census",
    "YETO_DILOCO_ANCHOR_DTYPE": "anchor_dtype",
    "YETO_DILOCO_RESUME_ANCHOR_MMAP": "resume_anchor_mmap",
    "RANK": "rank",
    "LOCAL_RANK": "local_rank",
    "WORLD_SIZE": "world_size",
    "YETO_OTEL_DATALOADER_WORKERS": "dataloader_workers",
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
    return Settings(**values)


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
