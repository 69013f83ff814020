"""The distro `opentelemetry-instrument` loads for yeto-otel (entry point `yeto`).

It validates every setting before the trainer starts, fills in the SDK's defaults where the
user set none (see `settings.apply_otel_defaults`), and, when no exporter or endpoint is
configured, makes sure the local telemetry directory is usable. Where another distro is
installed too, select ours with OTEL_PYTHON_DISTRO=yeto OTEL_PYTHON_CONFIGURATOR=yeto.
"""

from __future__ import annotations

import os
import sys

from opentelemetry.instrumentation.distro import BaseDistro

from ..census import resolve_allocator
from ..settings import (SettingsError, apply_otel_defaults, check_sdk_variables, load_settings,
                        local_exporters_selected)
from ._local_files import local_exporter_args

__all__ = ["YetoDistro"]


def _fail_fast(message: str) -> None:
    # A bad setting stops the process here, before the trainer does any work, with one line.
    # Raising would not do: opentelemetry-instrument logs an Exception with a traceback and
    # runs on without telemetry, and SystemExit inside sitecustomize is a fatal interpreter
    # error. Nothing has started yet, so there is nothing for atexit handlers to flush.
    sys.stderr.write(f"yeto-otel: {message}\n")
    sys.stderr.flush()
    os._exit(2)


class YetoDistro(BaseDistro):
    def _configure(self, **kwargs):
        try:
            settings = load_settings()
            resolve_allocator(settings.host_allocator)  # imports and looks it up now, not later
            apply_otel_defaults()
            check_sdk_variables()
            if local_exporters_selected():
                local_exporter_args(settings.local_dir, "probe")  # creates and checks the dir
        except SettingsError as exc:
            _fail_fast(str(exc))
        except OSError as exc:
            _fail_fast(f"YETO_OTEL_LOCAL_DIR={load_settings().local_dir!r} cannot be used: {exc}")
