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
import re
from dataclasses import dataclass
from typing import Callable, Mapping

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


class SettingsError(ValueError):
    """A setting has a value we cannot use. The message names it, the value and what is accepted."""

    def __init__(self, name: str, value: str, accepted: str, why: str | None = None):
        self.name = name
        self.value = value
        self.accepted = accepted
        detail = f" ({why})" if why else ""
        super().__init__(f"{name}={value!r} is not valid{detail}; accepted: {accepted}")


@dataclass(frozen=True)
class Setting:
    name: str
    default: str | None
    accepted: str
    description: str
    parse: Callable[[str], object]


def _parse_switch(value: str) -> bool:
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError("expected 0 or 1")


_CALLABLE_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

# The named sources of YETO_OTEL_HOST_ALLOCATOR; anything else must be `module:function`.
HOST_ALLOCATOR_CHOICES = ("auto", "cuda", "npu", "none")
HOST_ALLOCATOR_ACCEPTED = ", ".join(f"`{c}`" for c in HOST_ALLOCATOR_CHOICES) + \
    ", or `module:function`"


def _parse_allocator(value: str) -> str:
    if value in HOST_ALLOCATOR_CHOICES or _CALLABLE_REF.match(value):
        return value
    raise ValueError("expected " + HOST_ALLOCATOR_ACCEPTED.replace("`", ""))


# Floating dtypes an anchor may be stored in, by torch's own names (torch.float32 -> "float32").
ANCHOR_DTYPES = ("float32", "bfloat16", "float16", "float64")


def _parse_anchor_dtype(value: str) -> str | None:
    if value == "":
        return None
    if value in ANCHOR_DTYPES:
        return value
    raise ValueError("not an anchor dtype")


def _parse_directory(value: str) -> str:
    if not value:
        raise ValueError("expected a directory path")
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def _parse_node_metrics(value: str) -> str:
    if value in ("auto", "on", "off"):
        return value
    raise ValueError("expected auto, on or off")


def _parse_rank(value: str) -> int | None:
    if value == "":
        return None
    if not (value.isascii() and value.isdigit()):
        raise ValueError("expected a non-negative integer")
    return int(value)


def _parse_positive_rank(value: str) -> int | None:
    number = _parse_rank(value)
    if number == 0:
        raise ValueError("must be at least 1")
    return number


def _parse_on_off(value: str) -> bool:
    if value in ("on", "off"):
        return value == "on"
    raise ValueError("expected on or off")


IDENTITY_OWNER = "YETO_OTEL_IDENTITY_OWNER"


def _parse_identity_owner(value: str) -> tuple[int | None, int] | None:
    """`<RANK>:<pid>` (`-:<pid>` without RANK): the process that reports under the identity."""
    if value == "":
        return None
    rank, sep, pid = value.partition(":")
    if not sep or not pid.isdigit() or not (rank == "-" or rank.isdigit()):
        raise ValueError("expected <RANK>:<pid> or -:<pid>, as yeto-otel writes it")
    return (None if rank == "-" else int(rank)), int(pid)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "YETO_OTEL_HOST_ALLOCATOR",
        "auto",
        HOST_ALLOCATOR_ACCEPTED,
        "Where the accelerator host (pinned) allocator's counters come from. `auto` uses CUDA "
        "when torch is imported and CUDA is initialised, else torch_npu when it is imported, else "
        "nothing; it never imports torch itself. `module:function` names a callable returning "
        "the flat stats dict (other accelerators, tests).",
        _parse_allocator,
    ),
    Setting(
        "YETO_OTEL_NODE_METRICS",
        "auto",
        "`auto`, `on`, `off`",
        "Whether this process observes the node-wide `yeto.node.*` metrics. `auto`: only the "
        "process whose `LOCAL_RANK` is 0 (or unset), so 8 ranks on a host do not report node "
        "memory 8 times.",
        _parse_node_metrics,
    ),
    Setting(
        "YETO_OTEL_DATALOADER_WORKERS",
        "on",
        "`on`, `off`",
        "`on`: each DataLoader worker of a rank reports its own process census (and its "
        "`torch.load` spans) as `<host>/rank-<RANK>/worker-<K>`, `K` the worker id, reused "
        "across epochs. `off`: workers are silent, like every other child process.",
        _parse_on_off,
    ),
    Setting(
        "YETO_OTEL_LOCAL_DIR",
        "yeto-telemetry",
        "a directory path (created if missing)",
        "Where telemetry goes when no exporter endpoint is configured (no `OTEL_EXPORTER_OTLP_*"
        "ENDPOINT`, no `OTEL_*_EXPORTER`): OTLP JSON lines files, one per signal and process, "
        "that `yeto-otel report` reads. Relative paths are from the working directory.",
        _parse_directory,
    ),
    Setting(
        "YETO_DILOCO_HOST_MEM_CENSUS",
        "0",
        "`0` or `1`",
        "`1`: `add_census_to_step_log` adds the host-memory census to the step log record on "
        "sync rank 0. Unset or `0`: the record is left exactly as it was.",
        _parse_switch,
    ),
    Setting(
        "YETO_DILOCO_ANCHOR_DTYPE",
        None,
        ", ".join(f"`{name}`" for name in ANCHOR_DTYPES),
        "dtype `save_resume_anchors` stores anchors in when its `dtype` argument is not given. "
        "Unset: the tensors' own dtype (the broadcast dtype, FP32 for an int4/int8 push "
        "session). `bfloat16` halves resident anchors but rounds `local - anchor` and the "
        "resume's `global_new + (local - anchor_old)`: opt in knowingly.",
        _parse_anchor_dtype,
    ),
    Setting(
        "YETO_DILOCO_RESUME_ANCHOR_MMAP",
        "1",
        "`0` or `1`",
        "`1`: `load_resume_anchors` maps the anchor file (`torch.load(mmap=True)`), so shards the "
        "resume never reads stay out of memory. `0`: read the whole file eagerly, as before.",
        _parse_switch,
    ),
    Setting(
        "RANK",
        None,
        "an integer >= 0",
        "Global rank set by the launcher (torchrun). Becomes the `yeto.rank` resource attribute "
        "and part of `service.instance.id`.",
        _parse_rank,
    ),
    Setting(
        "LOCAL_RANK",
        None,
        "an integer >= 0",
        "Rank within the host, set by the launcher. Becomes `yeto.local_rank`; decides which "
        "process reports node metrics under `YETO_OTEL_NODE_METRICS=auto`.",
        _parse_rank,
    ),
    Setting(
        "WORLD_SIZE",
        None,
        "an integer >= 1",
        "Number of ranks, set by the launcher. Becomes `yeto.world_size`.",
        _parse_positive_rank,
    ),
    Setting(
        IDENTITY_OWNER,
        None,
        "set by yeto-otel",
        "Not a setting for people: the process that reports under an identity (a rank) writes "
        "`<RANK>:<pid>` here, so the children that inherit its environment (spawned DataLoader "
        "workers, multiprocessing helpers) know they are not it and stay silent.",
        _parse_identity_owner,
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
