"""The configurator `opentelemetry-instrument` loads for yeto-otel (entry point `yeto`).

It is the SDK's own, given the rank's identity as resource attributes; the user's
OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME still win over ours. When the local files are
the destination, the exporters are pointed at this process's files.
"""

from __future__ import annotations

from opentelemetry.sdk._configuration import _OTelSDKConfigurator

from ..settings import load_settings, local_exporters_selected
from ._local_files import local_exporter_args
from ._resource import rank_resource_attributes, user_resource_attributes

__all__ = ["YetoConfigurator"]


class YetoConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        settings = load_settings()
        attributes = rank_resource_attributes(settings)
        attributes.update(user_resource_attributes())
        attributes.update(kwargs.pop("resource_attributes", None) or {})
        if local_exporters_selected():
            args, _ = local_exporter_args(settings.local_dir,
                                          str(attributes["service.instance.id"]))
            kwargs["exporter_args_map"] = {**args, **(kwargs.get("exporter_args_map") or {})}
        super()._configure(resource_attributes=attributes, **kwargs)
