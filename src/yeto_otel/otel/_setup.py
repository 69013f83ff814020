"""Telemetry set up in code, exactly as `opentelemetry-instrument` would with yeto's distro,
for programs not started under it (the demo, a trainer that configures itself)."""

from __future__ import annotations

import os

from ..settings import (current_settings, exporter_choices, local_exporters_selected,
                        otlp_endpoint)
from ._configurator import YetoConfigurator

__all__ = ["configure_telemetry", "destination"]


def destination() -> str:
    """Where this process's telemetry goes, in words (after the defaults are applied)."""
    if local_exporters_selected():
        return f"local OTLP JSON files in {os.path.abspath(current_settings().local_dir)}"
    endpoint = otlp_endpoint() or "the OTLP default endpoint"
    exporters = ", ".join(f"{signal}={value}" for signal, value in exporter_choices().items())
    return f"{exporters} (OTLP endpoint: {endpoint})"


def configure_telemetry() -> str:
    """Set up the SDK in this process as `opentelemetry-instrument` would with yeto's distro:
    validated settings, the rank's resource attributes, local files when no collector is
    configured. Returns `destination()`. (The configurator decides the process's role first,
    as the distro does under `opentelemetry-instrument`: see `_start`.)"""
    YetoConfigurator().configure()
    return destination()
