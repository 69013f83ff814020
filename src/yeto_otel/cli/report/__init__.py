"""`yeto-otel report DIR [-o FILE]`: one self-contained HTML page from the local telemetry files.

Reads what the embedded default writes into YETO_OTEL_LOCAL_DIR (see `local_files`):

    traces-*.jsonl, metrics-*.jsonl, logs-*.jsonl   one OTLP JSON export batch per line,
                                                    one set of files per process (rank)
    steplog-*.jsonl                                 a trainer's step log, one record per line

and draws, with plotly (imported only here; plotly.js is embedded, so the page opens offline):

- the census over time, one line per rank (`service.instance.id`) and launch (a restart is a
  new process, with files of its own, under the same identity: same colour, its own legend
  entry and marker): gauges and high-water marks as values, running totals as rates per
  second, node metrics in their own chart;
- the DataLoader workers (`yeto.process.role`) in a chart of their own, grouped under their
  rank: a forked worker's RSS and anonymous memory count pages it shares with its rank, so
  nothing of a worker is added to or drawn with its rank's;
- the memory cgroup (what OOM-kills a rank), one line per cgroup (host and path) whichever
  rank observed it in turn: usage, working set and peak against the limit and high (dashed;
  none drawn for an unlimited cgroup), anon vs file, pressure, and a marker where the OOM-kill
  count rose (diffed across the observers: the kill of an observer shows when the next one
  takes over);
- the restart spans (`yeto.resume.anchors`, `.load`, `torch.load`, `demo.*`) and the
  checkpoint loads (`safetensors.*`, `dcp.load` with its phases) on the same time axis, with
  fragment_done events (a worker's spans on a lane under its rank), and bytes mapped vs touched
  (anonymous delta, stored bytes read) per restart or load and rank;
- the step log: the host_mem.* levels over step and the last records of each step-log file.

Damaged lines (not JSON, half-written, longer than the reader's bound: never read whole) are
skipped and counted, and so is a record with one bad value (a time out of range, an integer
beyond 64 bits): on the page and in a warning, never the page. Empty files are only counted (a
process that had nothing of a signal leaves one); a directory with nothing usable is an error,
as are a missing directory, an unwritable output and an output that is not a regular file or
a new path (a FIFO, a device node, a symbolic link, a directory).

Any amount of input: the files are read a line at a time, and each series is folded as it
streams in into min/max-preserving time buckets (`_buckets`: each bucket keeps its first, last,
lowest and highest point), running totals rated on the raw points first (`_metric_fold`); the
series share a fixed budget of points, so memory and the page stay bounded whatever the input
(a day of 8 ranks at 10 s: about 100 MiB and a 5.5 MB page), and a sawtooth's peaks and troughs
are on the page at any zoom. The cgroup chart draws at most 16 cgroups (those with OOM kills
first; the others are listed as not plotted). Long runs say how far they are on stderr (`_progress`).

Inside: `_telemetry` reads the files into series, spans and step records, with the process
(file) each came from; `_roster` tells ranks, their launches and their workers apart and names
and colours them; `_charts` says which charts there are and draws them with `_time_charts`,
`_timeline`, `_cgroup_chart` (with the cgroups `_cgroups` gathers), `_restart_chart` (with
the loads `_loads` picks) and `_steplog`; `_page` builds the HTML with `_header` and
`_steplog_table`; `_command` checks the arguments and writes the page. The names the report reads come from their tables, through `_names`.
"""

from ._charts import CHART_IDS, charts
from ._command import add_arguments, run
from ._page import build_html
from ._roster import Launch, Roster
from ._telemetry import Point, Series, Telemetry, kind_of, load_telemetry, plotted, rates

__all__ = ["CHART_IDS", "Launch", "Point", "Roster", "Series", "Telemetry", "add_arguments",
           "build_html", "charts", "kind_of", "load_telemetry", "plotted", "rates", "run"]
