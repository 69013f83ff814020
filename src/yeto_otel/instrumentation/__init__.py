"""OpenTelemetry instrumentors shipped by yeto-otel (loaded by `opentelemetry-instrument`
through the `opentelemetry_instrumentor` entry points `yeto_host_memory` and
`yeto_torch_load`), and the post-import hook that patches torch only once the program
imports it.
"""

from ._host_memory import METER_NAME, HostMemoryInstrumentor
from ._post_import import ImportWatch, when_imported
from ._torch_load import TorchLoadInstrumentor

__all__ = ["METER_NAME", "HostMemoryInstrumentor", "ImportWatch", "TorchLoadInstrumentor",
           "when_imported"]
