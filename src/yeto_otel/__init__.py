"""yeto-otel: OpenTelemetry host-memory census and resume-anchor spans for PyTorch trainers."""

from .quantity import Kind, Quantity
from .settings import Settings, SettingsError, load_settings
from .step_log import add_census_to_step_log
from .version import __version__

__all__ = [
    "Kind",
    "Quantity",
    "Settings",
    "SettingsError",
    "__version__",
    "add_census_to_step_log",
    "load_settings",
]
