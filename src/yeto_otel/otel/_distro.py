"""The distro `opentelemetry-instrument` loads for yeto-otel (entry point `yeto`).

It decides the process's role first and acts only in a process that reports (see `_start`):
settings validated before the trainer starts, the SDK's defaults filled in where the user set
none (`settings.apply_otel_defaults`), the local telemetry directory made when no exporter or
endpoint is configured. Where another configurator is installed too (opentelemetry-distro's,
say), it selects yeto's for the configurator step that follows, unless the user chose one
with OTEL_PYTHON_CONFIGURATOR; `_foreign` covers the case where another distro ran instead.
"""

from __future__ import annotations

from opentelemetry.instrumentation.distro import BaseDistro

from ..settings import choose_configurator
from ._foreign import other_configurators
from ._start import start_process

__all__ = ["CONFIGURATOR_NAME", "YetoDistro"]

CONFIGURATOR_NAME = "yeto"  # our `opentelemetry_configurator` entry point


class YetoDistro(BaseDistro):
    def _configure(self, **kwargs):
        if start_process() is None:
            return  # OTEL_SDK_DISABLED: nothing of ours runs
        if other_configurators():
            # opentelemetry-instrument loads the first configurator it finds unless one is
            # named: ours must be the one, also in launchers and children (which it leaves
            # silent), or another would give them an SDK.
            choose_configurator(CONFIGURATOR_NAME)
