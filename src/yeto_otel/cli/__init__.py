"""The `yeto-otel` command: `census` (this machine's census now), `demo` (an island restart
end to end) and `report` (one offline HTML page from the local telemetry files)."""

from ._main import main

__all__ = ["main"]
