"""The distro and configurator `opentelemetry-instrument` loads for yeto-otel.

The configurator is the SDK's own, given the rank's identity as resource attributes. The
user's OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME still win over ours. With no exporter or
endpoint configured, telemetry goes to local OTLP JSON files (see `local_files`). Where another
distro is installed too, select ours with OTEL_PYTHON_DISTRO=yeto OTEL_PYTHON_CONFIGURATOR=yeto.
"""

from __future__ import annotations

import os
import sys

from opentelemetry.instrumentation.distro import BaseDistro
from opentelemetry.sdk._configuration import _OTelSDKConfigurator

from .local_files import local_exporter_args
from .resource import rank_resource_attributes, user_resource_attributes
from .settings import LOCAL_EXPORTER, SettingsError, apply_otel_defaults, load_settings

__all__ = ["YetoConfigurator", "YetoDistro", "configure_telemetry", "destination"]


def _local_exporters_selected() -> bool:
    return any(LOCAL_EXPORTER in os.environ.get(f"OTEL_{signal}_EXPORTER", "")
               for signal in ("TRACES", "METRICS", "LOGS"))


class YetoConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        settings = load_settings()
        attributes = rank_resource_attributes(settings)
        attributes.update(user_resource_attributes())
        attributes.update(kwargs.pop("resource_attributes", None) or {})
        if _local_exporters_selected():
            args, _ = local_exporter_args(settings.local_dir,
                                          str(attributes["service.instance.id"]))
            kwargs["exporter_args_map"] = {**args, **(kwargs.get("exporter_args_map") or {})}
        super()._configure(resource_attributes=attributes, **kwargs)


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
            apply_otel_defaults()
            if _local_exporters_selected():
                local_exporter_args(settings.local_dir, "probe")  # creates and checks the dir
        except SettingsError as exc:
            _fail_fast(str(exc))
        except OSError as exc:
            _fail_fast(f"YETO_OTEL_LOCAL_DIR={load_settings().local_dir!r} cannot be used: {exc}")


def destination() -> str:
    """Where this process's telemetry goes, in words (after the defaults are applied)."""
    if _local_exporters_selected():
        return f"local OTLP JSON files in {os.path.abspath(load_settings().local_dir)}"
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "the OTLP default endpoint"
    exporters = ", ".join(f"{s.lower()}={os.environ.get(f'OTEL_{s}_EXPORTER', '')}"
                          for s in ("TRACES", "METRICS", "LOGS"))
    return f"{exporters} (OTLP endpoint: {endpoint})"


def configure_telemetry() -> str:
    """Set up the SDK in this process as `opentelemetry-instrument` would with yeto's distro
    (for tools such as `yeto-otel demo` that are not started under it). Returns destination()."""
    YetoDistro().configure()
    YetoConfigurator().configure()
    return destination()
