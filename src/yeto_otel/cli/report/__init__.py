"""`yeto-otel report DIR [-o FILE]`: one self-contained HTML page from the local telemetry files.

Reads what the embedded default writes into YETO_OTEL_LOCAL_DIR (see `local_files`):

    traces-*.jsonl, metrics-*.jsonl, logs-*.jsonl   one OTLP JSON export batch per line,
                                                    one set of files per process (rank)
    steplog-*.jsonl                                 a trainer's step log, one record per line

and draws, with plotly (imported only here; plotly.js is embedded, so the page opens offline):

- the census over time, one trace per rank (`service.instance.id`): gauges and high-water
  marks as values, running totals as rates per second, node metrics in their own chart;
- the restart spans (`yeto.resume.anchors`, `.load`, `torch.load`, `demo.*`) on the same time
  axis, with fragment_done events, and bytes mapped vs touched per restart and rank;
- the step log: the host_mem.* levels over step and a table of the last records.

Corrupt lines are skipped and counted (on the page and in a warning); a directory with nothing
usable is an error, as are a missing directory and an unwritable output.

Inside: `_telemetry` reads the files into series, spans and step records; `_charts` says
which charts there are and draws them with `_time_charts`, `_restart_chart` and `_steplog`;
`_page` builds the HTML; `_command` checks the arguments and writes the page. The names the
report reads come from their tables, through `_names`.
"""

from ._charts import CHART_IDS
from ._command import add_arguments, run
from ._page import build_html
from ._telemetry import Point, Series, Telemetry, kind_of, load_telemetry, plotted, rates

__all__ = ["CHART_IDS", "Point", "Series", "Telemetry", "add_arguments", "build_html", "kind_of",
           "load_telemetry", "plotted", "rates", "run"]
