"""The embedded default: telemetry to local OTLP JSON lines files when no collector is configured.

One file per signal and process, named after the rank's identity and the process start, so
8 ranks (and restarts) never write into one file:

    <YETO_OTEL_LOCAL_DIR>/<signal>-<host>_rank-<RANK>-<YYYYmmddTHHMMSS>-<pid>.jsonl

Each line is one export batch in OTLP JSON (`resourceSpans` / `resourceMetrics` /
`resourceLogs`), encoded by the maintained opentelemetry-exporter-otlp-json-file exporters and
written through a `JsonLinesWriter` each (whole lines only, a bounded backlog while the disk is
full, a deleted file made again; see `_line_writer`).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from ..settings import SIGNALS
from ._line_writer import JsonLinesWriter

__all__ = ["LOCAL_FILE_PATTERNS", "SIGNALS", "current_stem", "local_exporter_args",
           "local_file_stem"]

# What lies in the local directory, by kind: the three signals' files written here and the
# trainer's step log written beside them (same stem). The report and replay read these.
LOCAL_FILE_PATTERNS = {"metrics": "metrics-*.jsonl", "traces": "traces-*.jsonl",
                       "logs": "logs-*.jsonl", "steplog": "steplog-*.jsonl"}

_current_stem: str | None = None


def current_stem() -> str | None:
    """The stem of this process's local telemetry files, once they are set up (else None);
    other per-process files (the demo's step log) use it so they pair with them."""
    return _current_stem


def local_file_stem(instance_id: str, *, pid: int | None = None,
                    started: float | None = None) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", instance_id).strip("_") or "process"
    stamp = time.strftime("%Y%m%dT%H%M%S",
                          time.gmtime(time.time() if started is None else started))
    return f"{safe}-{stamp}-{os.getpid() if pid is None else pid}"


def local_exporter_args(directory: str | os.PathLike, instance_id: str) -> tuple[dict, Path]:
    """({exporter class: constructor kwargs}, directory) for the SDK configurator's
    `exporter_args_map`: each exporter writes through a `JsonLinesWriter` on its file (opened
    at its first line). Creates the directory; an unusable one raises OSError naming it."""
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.exporter.otlp.json.file.metric_exporter import FileMetricExporter
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter

    path = Path(directory).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{path} is not writable")
    global _current_stem
    stem = _current_stem = local_file_stem(instance_id)
    classes = {"traces": FileSpanExporter, "metrics": FileMetricExporter, "logs": FileLogExporter}
    return {cls: {"stream": JsonLinesWriter(path / f"{signal}-{stem}.jsonl")}
            for signal, cls in classes.items()}, path
