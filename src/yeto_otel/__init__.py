"""yeto-otel: OpenTelemetry host-memory census and resume-anchor spans for PyTorch trainers.

The public API is what this module exports (`__all__`); docs/api.md shows each name with an
example. The subpackages are the product's rooms (proc, census, anchors, names, otel,
instrumentation, exits, settings, cli): their modules are private, and what one room offers the others may
change without notice. `yeto_otel.anchors`, `yeto_otel.instrumentation` and
`yeto_otel.testing` are public import paths too.

Names are resolved on first use, so `import yeto_otel` stays cheap: it loads neither torch
nor the OpenTelemetry SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .version import __version__

# public name -> the room that defines it
_FACES = {
    "HostMemoryInstrumentor": "instrumentation",
    "DataLoaderWorkerInstrumentor": "instrumentation",
    "TorchLoadInstrumentor": "instrumentation",
    "SafetensorsInstrumentor": "instrumentation",
    "DcpInstrumentor": "instrumentation",
    "RankExitInstrumentor": "instrumentation",
    "note_step": "exits",
    "add_census_to_step_log": "census",
    "CensusReader": "census",
    "CensusSnapshot": "census",
    "HostCacheReleasePolicy": "census",
    "ReleaseDecision": "census",
    "Kind": "census",
    "Quantity": "census",
    "save_resume_anchors": "anchors",
    "load_resume_anchors": "anchors",
    "ResumeAnchors": "anchors",
    "AnchorLoadError": "anchors",
    "AnchorSaveError": "anchors",
    "configure_telemetry": "otel",
    "Settings": "settings",
    "SettingsError": "settings",
    "load_settings": "settings",
}

__all__ = sorted([*_FACES, "__version__"])


def __getattr__(name: str):
    room = _FACES.get(name)
    if room is None:
        raise AttributeError(f"module 'yeto_otel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{room}", __name__), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see
    from .anchors import (AnchorLoadError, AnchorSaveError, ResumeAnchors, load_resume_anchors,
                          save_resume_anchors)
    from .census import (CensusReader, CensusSnapshot, HostCacheReleasePolicy, Kind, Quantity,
                         ReleaseDecision, add_census_to_step_log)
    from .exits import note_step
    from .instrumentation import (DataLoaderWorkerInstrumentor, DcpInstrumentor,
                                  HostMemoryInstrumentor, RankExitInstrumentor,
                                  TorchLoadInstrumentor)
    from .otel import configure_telemetry
    from .settings import Settings, SettingsError, load_settings
