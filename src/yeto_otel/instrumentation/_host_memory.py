"""`HostMemoryInstrumentor`: the host-memory census as observable instruments.

    HostMemoryInstrumentor().instrument(meter_provider=provider)

or, with no code change, `opentelemetry-instrument python train.py` (entry point
`yeto_host_memory`; `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=yeto_host_memory` turns it off).

The census is the instrumenting process's own: a launcher or a child (see
`yeto_otel.otel.Role`) registers nothing, and a forked child's copy observes nothing.
"""

from __future__ import annotations

from typing import Any, Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.metrics import get_meter

from ..census import CensusInstruments, CensusReader
from ..otel import current_role, process_pipeline
from ..settings import current_settings
from ..version import __version__

__all__ = ["HostMemoryInstrumentor"]

METER_NAME = "yeto_otel.host_memory"


class HostMemoryInstrumentor(BaseInstrumentor):
    _census: CensusInstruments | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # reads the kernel; torch is optional and looked up lazily

    def _instrument(self, **kwargs: Any) -> None:
        """Keyword arguments: `meter_provider`; `settings` and `proc_root` (for tests)."""
        role = current_role()
        if role is not None and not role.reports:
            return  # a launcher or a child: it has no census of its own, and no settings to read
        settings = kwargs.get("settings") or current_settings()  # a bad value raises here, at start
        reader = CensusReader.from_settings(settings, proc_root=kwargs.get("proc_root", "/proc"))
        # A process whose global providers another configurator set up reports the census on
        # a pipeline of its own (yeto_otel.otel's `take_charge`).
        pipeline = process_pipeline()
        meter_provider = kwargs.get("meter_provider") or (
            pipeline.meter_provider if pipeline is not None else None)
        meter = get_meter(METER_NAME, __version__, meter_provider)
        self._census = CensusInstruments(meter, reader)

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._census is not None:
            self._census.stop()
            self._census = None

    @property
    def census(self) -> CensusInstruments | None:
        return self._census
