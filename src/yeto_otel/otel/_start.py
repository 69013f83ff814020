"""What yeto-otel does first in every interpreter `opentelemetry-instrument` reaches: decide the
process's role, and only then, in a process that reports, act.

Under `opentelemetry-instrument` the distro runs in every Python process that inherits the
auto-instrumentation PYTHONPATH: the ranks, but also the launcher, DataLoader workers,
compile workers, `subprocess.run([sys.executable, ...])` helpers. Those must run exactly as
they would without yeto-otel. So the role comes first (see `_process`), decided from RANK and
the identity owner alone (a child whose other settings are bad is still a child), and:

- a launcher or a child gets nothing: no settings check, no exit, no directory, no file;
- a reporting process (a rank, a plain process) has its settings checked, the SDK's defaults
  filled in and its local directory made; what it cannot use ends it at once with one line
  (exit 2), before the trainer does any work;
- with OTEL_SDK_DISABLED=true nothing of ours runs at all.

Once per process (a forked child decides again: it is a child).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..census import resolve_allocator
from ..settings import (Settings, SettingsError, apply_otel_defaults, check_sdk_variables,
                        current_settings, local_exporters_selected, role_inputs, sdk_disabled,
                        service_name_set)
from ._local_files import local_exporter_args
from ._process import Role, claim

__all__ = ["start_process"]

_started: tuple[int, Role | None] | None = None


def start_process(argv: Sequence[str] | None = None) -> Role | None:
    """This process's role, decided once, and what a reporting process needs before the SDK
    is set up; None when the SDK is disabled."""
    global _started
    pid = os.getpid()
    if _started is not None and _started[0] == pid:
        return _started[1]
    role = None if sdk_disabled() else _decide_and_prepare(argv)
    _started = (pid, role)
    return role


def _decide_and_prepare(argv: Sequence[str] | None) -> Role:
    try:
        settings, problem = current_settings(), None
    except SettingsError as exc:
        settings, problem = role_inputs(), exc
    role = claim(settings, argv=argv)
    if role.reports:
        if problem is not None:
            _fail_fast(str(problem))
        _prepare_reporting(settings)
    return role


def _prepare_reporting(settings: Settings) -> None:
    try:
        resolve_allocator(settings.host_allocator)  # imports and looks it up now, not later
        apply_otel_defaults()
        check_sdk_variables()
        if local_exporters_selected():
            local_exporter_args(settings.local_dir, "probe")  # creates and checks the dir
        if not service_name_set():
            _say_unnamed(settings)
    except SettingsError as exc:
        _fail_fast(str(exc))
    except OSError as exc:
        _fail_fast(f"YETO_OTEL_LOCAL_DIR={settings.local_dir!r} cannot be used: {exc}")


def _say_unnamed(settings: Settings) -> None:
    # Once per process (start_process runs once): Prometheus' `job` is the service name, so
    # unnamed jobs on one host share it, and only the job in a rank's identity keeps their
    # ranks apart.
    job = settings.job.job_id
    if settings.rank is None:
        apart = ""
    elif job:
        apart = f"; its rank is told apart from other jobs' by the job in its identity ({job})"
    else:
        apart = ("; the rank of another unnamed job on this host would share its series "
                 "(or set YETO_OTEL_JOB_ID)")
    sys.stderr.write(f"yeto-otel: no service name (set OTEL_SERVICE_NAME): this process "
                     f"reports as unknown_service{apart}\n")
    sys.stderr.flush()


def _fail_fast(message: str) -> None:
    # A bad setting stops a reporting process here, before the trainer does any work, with one
    # line. Raising would not do: opentelemetry-instrument logs an Exception with a traceback
    # and runs on without telemetry, and SystemExit inside sitecustomize is a fatal interpreter
    # error. Nothing has started yet, so there is nothing for atexit handlers to flush.
    sys.stderr.write(f"yeto-otel: {message}\n")
    sys.stderr.flush()
    os._exit(2)
