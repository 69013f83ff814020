"""The `yeto-otel` command: `census` (this machine's census now), `demo` (an island restart
end to end), `report` (one offline HTML page from the local telemetry files) and `replay` (those
files sent to a collector)."""

from ._main import main

__all__ = ["main"]
