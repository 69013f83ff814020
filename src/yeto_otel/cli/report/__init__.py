"""`yeto-otel report DIR`: one self-contained HTML page from the local telemetry files."""

from ._command import (CHART_IDS, Point, Series, Telemetry, add_arguments, build_html, kind_of,
                       load_telemetry, plotted, rates, run)

__all__ = ["CHART_IDS", "Point", "Series", "Telemetry", "add_arguments", "build_html", "kind_of",
           "load_telemetry", "plotted", "rates", "run"]
