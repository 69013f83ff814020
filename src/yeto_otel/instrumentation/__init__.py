"""OpenTelemetry instrumentors shipped by yeto-otel (loaded by `opentelemetry-instrument`)."""

from .host_memory import HostMemoryInstrumentor
from .torch_load import TorchLoadInstrumentor

__all__ = ["HostMemoryInstrumentor", "TorchLoadInstrumentor"]
