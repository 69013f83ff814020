"""The local telemetry files on a real full disk, and deleted under a running exporter.

The exporters are the upstream OTLP JSON file exporters built from `local_exporter_args`, as
the configurator builds them, driven by real SDK providers; the disk is a small tmpfs filled to
ENOSPC by the test.
"""

import json
import logging
import os
import shutil

import pytest
from opentelemetry.exporter.otlp.json.file.metric_exporter import FileMetricExporter
from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from small_disks import fill_disk
from yeto_otel.otel import BACKLOG_BYTES, JsonLinesWriter, local_exporter_args

PAGE = os.sysconf("SC_PAGE_SIZE")
RECOVERED = "yeto-otel: writing local telemetry file"  # how a file's recovery line starts


# Lines longer than a page: each needs a new page of the full disk (a short one could still
# fit in the unused tail of the file's last page).
LONG = 3 * PAGE


class Spans:
    """A tracer whose every span is one export, one line, through `exporter`."""

    def __init__(self, exporter, pad: int = LONG):
        self.provider = TracerProvider(shutdown_on_exit=False)
        self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("test")
        self.pad = "x" * pad

    def emit(self, name: str) -> None:
        with self.tracer.start_as_current_span(name, attributes={"pad": self.pad}):
            pass


class Metrics:
    """A meter whose `export()` is one collection, one line, through `exporter`."""

    def __init__(self, exporter):
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=10**9)
        self.provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        self.counter = self.provider.get_meter("test").create_counter("test.exports")

    def export(self) -> None:
        self.counter.add(1, {"pad": "x" * LONG})
        self.provider.force_flush()


def lines(path) -> list[dict]:
    """Every line of a telemetry file, each of which must be a whole JSON document."""
    text = open(path, encoding="utf-8").read()
    assert text == "" or text.endswith("\n"), "the file ends in a half line"
    return [json.loads(line) for line in text.splitlines()]


def span_names(path) -> list[str]:
    return [s["name"] for batch in lines(path) for rs in batch["resourceSpans"]
            for ss in rs["scopeSpans"] for s in ss["spans"]]


def ours(caplog) -> list[logging.LogRecord]:
    """What the writers and the upstream exporters logged."""
    return [r for r in caplog.records if r.name.startswith(("yeto_otel", "opentelemetry"))]


@pytest.fixture
def writers():
    """Writers to close when the test ends (before its disk is unmounted: request this after
    `small_tmpfs`), so none is left holding lines for the exit summary."""
    made: list[JsonLinesWriter] = []
    yield made
    for writer in made:
        writer.close()


def exporters(directory, writers):
    args, _ = local_exporter_args(directory, "h/rank-0")
    spans = FileSpanExporter(**args[FileSpanExporter])
    metrics = FileMetricExporter(**args[FileMetricExporter])
    writers += [args[FileSpanExporter]["stream"], args[FileMetricExporter]["stream"]]
    return (spans, writers[-2]), (metrics, writers[-1])


def test_a_full_disk_is_logged_once_and_every_batch_lands_when_space_returns(
        small_tmpfs, writers, fresh_fault_log, caplog):
    (span_exporter, traces), (metric_exporter, metrics_file) = \
        exporters(small_tmpfs / "t", writers)
    spans, metrics = Spans(span_exporter), Metrics(metric_exporter)
    spans.emit("before")
    metrics.export()
    filler = fill_disk(small_tmpfs)
    for i in range(12):  # two files failing, each export: still one line for the kind
        spans.emit(f"full-{i}")
        metrics.export()
    assert span_names(traces.path) == ["before"]
    assert len(lines(metrics_file.path)) == 1
    assert traces.pending_lines == 12 and metrics_file.pending_lines == 12
    assert traces.counts.failed_writes >= 12

    filler.unlink()
    spans.emit("after")
    metrics.export()
    assert span_names(traces.path) == ["before", *(f"full-{i}" for i in range(12)), "after"]
    assert len(lines(metrics_file.path)) == 14, metrics_file.counts
    assert traces.counts.late_lines == 12 and traces.counts.dropped_lines == 0

    records = ours(caplog)
    failures = [r.getMessage() for r in records if "cannot write" in r.getMessage()]
    assert len(failures) == 1 and "No space left on device" in failures[0]
    recoveries = [r.getMessage() for r in records if RECOVERED in r.getMessage()]
    assert sorted(recoveries) == sorted(
        f"yeto-otel: writing local telemetry file {path} again: 12 lines kept in memory written "
        f"late, 0 lines (0 bytes) dropped; later failures of this file are counted and summed "
        f"up at exit" for path in (traces.path, metrics_file.path))
    assert len(records) == 3 and not any(r.exc_info for r in records)  # no traceback at all
    spans.provider.shutdown()
    metrics.provider.shutdown()


def test_a_line_that_fits_only_in_part_is_rolled_back_not_left_half_written(
        small_tmpfs, writers, fresh_fault_log):
    (span_exporter, traces), _ = exporters(small_tmpfs / "t", writers)
    spans = Spans(span_exporter)  # every line is longer than the space left
    spans.emit("before")
    size = os.path.getsize(traces.path)
    filler = fill_disk(small_tmpfs, leave=PAGE)  # room for the first page of a line
    for i in range(3):
        spans.emit(f"full-{i}")
    assert os.path.getsize(traces.path) == size  # each partial write was truncated away
    assert span_names(traces.path) == ["before"]

    filler.unlink()
    spans.emit("after")
    assert span_names(traces.path) == ["before", "full-0", "full-1", "full-2", "after"]
    spans.provider.shutdown()


def test_the_backlog_is_bounded_in_bytes_dropping_the_oldest_and_counting_them(
        small_tmpfs, writers, fresh_fault_log, caplog):
    assert BACKLOG_BYTES == 4 * 2**20  # the documented bound
    bound = 5 * LONG
    traces = JsonLinesWriter(small_tmpfs / "traces.jsonl", backlog_bytes=bound)
    writers.append(traces)
    spans = Spans(FileSpanExporter(stream=traces))
    spans.emit("before")
    filler = fill_disk(small_tmpfs)
    for i in range(30):
        spans.emit(f"full-{i}")
    kept = traces.pending_lines
    assert 1 <= kept < 30
    assert traces.counts.dropped_lines == 30 - kept and traces.counts.dropped_bytes > 0

    filler.unlink()
    spans.emit("after")
    names = span_names(traces.path)
    assert names == ["before", *(f"full-{i}" for i in range(30 - kept, 30)), "after"]
    assert sum(len(json.dumps(b, separators=(",", ":"))) + 1
               for b in lines(traces.path)[1:-1]) <= bound
    (recovery,) = [r.getMessage() for r in ours(caplog) if RECOVERED in r.getMessage()]
    assert f"{kept} lines kept in memory written late, {30 - kept} lines" in recovery
    spans.provider.shutdown()


def test_a_deleted_or_replaced_directory_or_file_is_made_again_and_said_once(
        tmp_path, writers, fresh_fault_log, caplog):
    directory = tmp_path / "t"
    (span_exporter, traces), _ = exporters(directory, writers)
    spans = Spans(span_exporter)
    spans.emit("before")

    shutil.rmtree(directory)  # the whole directory, as a cleanup job would
    spans.emit("after-rmtree")
    assert span_names(traces.path) == ["after-rmtree"]

    moved = tmp_path / "moved.jsonl"
    os.rename(traces.path, moved)  # the file renamed away (log rotation)
    spans.emit("after-rename")
    spans.emit("later")
    assert span_names(moved) == ["after-rmtree"]
    assert span_names(traces.path) == ["after-rename", "later"]
    assert traces.counts.recreated == 2

    messages = [r.getMessage() for r in ours(caplog)]
    assert messages == [f"yeto-otel: local telemetry file {traces.path} was deleted or replaced "
                        f"while this process wrote it; created it again and writing on (lines "
                        f"written before are not in the new file); further occurrences are "
                        f"counted, not logged"]
    spans.provider.shutdown()


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_something_not_a_regular_file_at_the_path_is_never_written_through(
        tmp_path, writers, fresh_fault_log, caplog, kind):
    target = tmp_path / "elsewhere"
    target.write_text("")
    path = tmp_path / "traces.jsonl"
    if kind == "symlink":
        path.symlink_to(target)
    else:
        os.mkfifo(path)  # with no reader: opening it must not block the export thread
    traces = JsonLinesWriter(path)
    writers.append(traces)
    spans = Spans(FileSpanExporter(stream=traces))
    spans.emit("a")
    spans.emit("b")
    assert target.read_text() == "" and traces.pending_lines == 2
    (failure,) = [r.getMessage() for r in ours(caplog)]
    assert failure.startswith(f"yeto-otel: cannot write local telemetry file {path}: ")
    spans.provider.shutdown()
