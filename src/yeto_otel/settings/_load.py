"""Reading the settings: the `Settings` a process runs with, read from the environment against
the table (`_table`), validated, and kept for the life of the process.

`load_settings(environ)` reads and validates every setting (start-up, tools, tests);
`current_settings()` is the process's own copy, read once at first use, for the paths that run
often (the step log), which must not pay for a walk over the environment on every call.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from typing import Mapping

from ._job import JobPlace, job_place
from ._launchers import LaunchPlace, launch_place
from ._table import SETTINGS
from ._values import IDENTITY_OWNER, SettingsError

__all__ = ["RoleInputs", "Settings", "current_settings", "forget_current_settings",
           "load_settings", "parse_setting", "role_inputs"]

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
    exit_flush_on_signals: bool = False
    worker_load_spans: bool = False
    exit_records: bool = True
    identity_owner: tuple[int | str | None, int] | None = None
    # Which launcher's variables named the rank (settings/_launchers.py), and whether the
    # environment says this is a rank without saying which (torch.distributed will).
    rank_source: str | None = None
    rank_pending: bool = False
    job_id: str | None = None  # YETO_OTEL_JOB_ID
    job: JobPlace = JobPlace()  # the job, from that or the launcher's variables

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


@dataclass(frozen=True)
class RoleInputs:
    """What deciding a process's role reads (`yeto_otel.otel.claim`), without the rest."""

    rank: int | None = None
    local_rank: int | None = None
    identity_owner: tuple[int | str | None, int] | None = None
    rank_source: str | None = None
    rank_pending: bool = False


def role_inputs(environ: Mapping[str, str] | None = None) -> RoleInputs:
    """The rank (from the launcher's variables) and the identity owner, each None where unset
    or not valid: a process whose other settings are bad must still learn that it is a
    launcher or a child, which never fail."""
    env = os.environ if environ is None else environ
    try:
        place = launch_place(env)
    except SettingsError:
        place = LaunchPlace()
    try:
        owner = parse_setting(IDENTITY_OWNER, env.get(IDENTITY_OWNER, ""))
    except SettingsError:
        owner = None
    return RoleInputs(place.rank, place.local_rank, owner, place.source, place.rank_pending)


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
    "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "exit_flush_on_signals",
    "YETO_OTEL_WORKER_LOAD_SPANS": "worker_load_spans",
    "YETO_OTEL_EXIT_RECORDS": "exit_records",
    IDENTITY_OWNER: "identity_owner",
    "YETO_OTEL_JOB_ID": "job_id",
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
    # RANK >= WORLD_SIZE (a job torch.distributed refuses) is checked with every launcher's
    # variables by launch_place.
    settings = replace(settings, job=job_place(env, settings.job_id))
    place = launch_place(env)
    if place.source is not None:  # RANK's own, or another launcher's variables
        settings = replace(settings, rank=place.rank, local_rank=place.local_rank,
                           world_size=place.world_size, rank_source=place.source,
                           rank_pending=place.rank_pending)
    return settings


# The process's settings, read at first use: (Settings, None) or (None, the error). A forked
# child has its parent's environment, so the copy holds there too.
_current: tuple[Settings | None, SettingsError | None] | None = None
_current_lock = threading.Lock()


def current_settings() -> Settings:
    """This process's settings, read from the environment once, at the first call; a bad value
    raises the same `SettingsError` at every call. Settings are read at start: changing the
    environment later does not change them (`forget_current_settings` for tests)."""
    current = _current
    if current is None:
        current = _read_current()
    settings, error = current
    if error is not None:
        raise error
    return settings


def _read_current() -> tuple[Settings | None, SettingsError | None]:
    global _current
    with _current_lock:
        if _current is None:
            try:
                _current = (load_settings(), None)
            except SettingsError as exc:
                _current = (None, exc)
        return _current


def forget_current_settings() -> None:
    """Read the environment again at the next `current_settings()` (tests that change it)."""
    global _current
    with _current_lock:
        _current = None
