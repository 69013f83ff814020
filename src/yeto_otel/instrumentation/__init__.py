"""OpenTelemetry instrumentors shipped by yeto-otel (loaded by `opentelemetry-instrument`)."""

from .host_memory import HostMemoryInstrumentor

__all__ = ["HostMemoryInstrumentor"]
