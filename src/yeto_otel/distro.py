"""The distro and configurator `opentelemetry-instrument` loads for yeto-otel.

The configurator is the SDK's own, given the rank's identity as resource attributes. The
user's OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME still win over ours. Where another distro
is installed too, select ours with OTEL_PYTHON_DISTRO=yeto OTEL_PYTHON_CONFIGURATOR=yeto.
"""

from __future__ import annotations

import os
import sys

from opentelemetry.instrumentation.distro import BaseDistro
from opentelemetry.sdk._configuration import _OTelSDKConfigurator

from .resource import rank_resource_attributes, user_resource_attributes
from .settings import SettingsError, apply_otel_defaults, load_settings

__all__ = ["YetoConfigurator", "YetoDistro"]


class YetoConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        attributes = rank_resource_attributes(load_settings())
        attributes.update(user_resource_attributes())
        attributes.update(kwargs.pop("resource_attributes", None) or {})
        super()._configure(resource_attributes=attributes, **kwargs)


class YetoDistro(BaseDistro):
    def _configure(self, **kwargs):
        # Settings are validated before anything else starts. A bad value stops the process
        # here, before the trainer does any work, with one line naming it. Raising would not
        # do: opentelemetry-instrument logs an Exception with a traceback and runs on without
        # telemetry, and SystemExit inside sitecustomize is a fatal interpreter error. Nothing
        # has started yet, so there is nothing for atexit handlers to flush.
        try:
            load_settings()
        except SettingsError as exc:
            sys.stderr.write(f"yeto-otel: {exc}\n")
            sys.stderr.flush()
            os._exit(2)
        apply_otel_defaults()
