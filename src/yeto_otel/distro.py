"""The distro and configurator `opentelemetry-instrument` loads for yeto-otel.

The configurator is the SDK's own, given the rank's identity as resource attributes. The
user's OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME still win over ours. Where another distro
is installed too, select ours with OTEL_PYTHON_DISTRO=yeto OTEL_PYTHON_CONFIGURATOR=yeto.
"""

from __future__ import annotations

from opentelemetry.instrumentation.distro import BaseDistro
from opentelemetry.sdk._configuration import _OTelSDKConfigurator

from .resource import rank_resource_attributes, user_resource_attributes
from .settings import apply_otel_defaults, load_settings

__all__ = ["YetoConfigurator", "YetoDistro"]


class YetoConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        attributes = rank_resource_attributes(load_settings())
        attributes.update(user_resource_attributes())
        attributes.update(kwargs.pop("resource_attributes", None) or {})
        super()._configure(resource_attributes=attributes, **kwargs)


class YetoDistro(BaseDistro):
    def _configure(self, **kwargs):
        # Settings are validated before anything else starts: a bad value fails here, naming it.
        load_settings()
        apply_otel_defaults()
