"""`yeto-otel report` on what a crash, a full disk or a hostile writer leaves: one bad value
skips its record (counted on the page and in a warning), never the page; a damaged or
overlong line is skipped (an overlong one without being read whole); and `-o` never replaces
anything that is not a regular file."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from report_testkit import plotly_or_skip, report
from repo_paths import FIXTURES

FIXTURE = FIXTURES / "telemetry"
GiB = 1 << 30


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "telemetry"
    shutil.copytree(FIXTURE, target)
    return target


def _edit_line(path: Path, number: int, edit) -> None:
    """Rewrite line `number` (1-based) of a JSON lines file as edit(decoded) returns it."""
    lines = path.read_text().splitlines()
    lines[number - 1] = edit(json.loads(lines[number - 1]))
    path.write_text("\n".join(lines) + "\n")


def _first_point(batch: dict) -> dict:
    return batch["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["sum"]["dataPoints"][0]


def _restart_span(batch: dict) -> dict:
    return next(s for ss in batch["resourceSpans"][0]["scopeSpans"] for s in ss["spans"]
                if s["name"] == "yeto.resume.anchors")


def _set(field: str, value):
    def edit(point: dict) -> None:
        point.pop("asInt", None) if field == "asDouble" else None
        point[field] = value
    return edit


def _metric(edit):
    return "metrics-*rank-0*", lambda b: (edit(_first_point(b)), json.dumps(b))[1]


def _raw_metric(text_of):
    return "metrics-*rank-0*", lambda b: text_of(json.dumps(b))


def _span_edit(edit):
    return "traces-*rank-0*", lambda b: (edit(_restart_span(b)), json.dumps(b))[1]


def _step(text_of):
    return "steplog-*", lambda record: text_of(json.dumps(record))


# (case, (file pattern, line 1 or 2 -> new text), what the page and the warning say)
BAD_VALUES = [
    ("string timestamp", _metric(_set("timeUnixNano", "soon")),
     "1 metric point skipped: timeUnixNano is not a time in unix nanoseconds"),
    ("timestamp 10^25", _metric(_set("timeUnixNano", str(10**25))),
     "1 metric point skipped: timeUnixNano is not a time in unix nanoseconds"),
    ("400-digit integer", _metric(_set("asInt", "9" * 400)),
     "1 metric point skipped: asInt is outside the 64-bit integer range"),
    ("byte value 10^400", _raw_metric(lambda t: re.sub(r'"asInt": "\d+"', '"asDouble": 1e400',
                                                       t, count=1)),
     "1 metric point skipped: asDouble is not a finite number"),
    ("span timestamp 10^25", _span_edit(lambda s: s.update(startTimeUnixNano=str(10**25))),
     "1 span skipped: startTimeUnixNano is not a time in unix nanoseconds"),
    ("span 400-digit integer", _span_edit(lambda s: s["attributes"].append(
        {"key": "yeto.anchors.bytes_touched", "value": {"intValue": "9" * 400}})),
     "1 span skipped: an attribute's intValue is outside the 64-bit integer range"),
    ("step byte value 10^400", _step(lambda t: t.replace(
        '"host_mem.vm_rss_bytes": ', '"host_mem.vm_rss_bytes": 1' + "0" * 400 + ', "x": ', 1)),
     "1 step record skipped: a value is outside the 64-bit integer range"),
    ("step string timestamp", _step(lambda t: t.replace(
        '"time_unix_nano": ', '"time_unix_nano": "soon", "x": ', 1)),
     "1 step record skipped: time_unix_nano is not a time in unix nanoseconds"),
]


@pytest.mark.parametrize("case, change, said", BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_a_bad_value_skips_its_record_and_is_counted_on_the_page(tmp_path, case, change, said):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)
    pattern, edit = change
    path = sorted(directory.glob(pattern))[0]
    _edit_line(path, 1 if pattern.startswith("traces") else 2, edit)
    out = tmp_path / "page.html"
    result = report(directory, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"yeto-otel: warning: {said}" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert html.escape(said) in page and f"(first at {path.name}:" in page
    assert "corrupt line" not in page  # the line was read: only the one record is gone
    assert "census-process" in page and "steplog-memory" in page


def test_a_string_file_size_is_shown_as_it_came(tmp_path):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)

    def stringly(span: dict) -> None:
        for attribute in span["attributes"]:
            if attribute["key"] == "yeto.anchors.file_size":
                attribute["value"] = {"stringValue": "lots"}
    for path in directory.glob("traces-*.jsonl"):
        _edit_line(path, 1, lambda b: (stringly(_restart_span(b)), json.dumps(b))[1])
    out = tmp_path / "page.html"
    result = report(directory, "-o", out)
    assert result.returncode == 0, result.stderr
    page = out.read_text(encoding="utf-8")
    assert 'id="restart-bytes"' in page and "file size lots" in page


def test_a_line_nested_past_the_decoder_is_a_corrupt_line(tmp_path):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)
    metrics = sorted(directory.glob("metrics-*rank-0*.jsonl"))[0]
    with open(metrics, "a") as handle:
        handle.write("[" * 100_000 + "]" * 100_000 + "\n")
    result = report(directory, "-o", tmp_path / "page.html")
    assert result.returncode == 0, result.stderr
    assert "nested too deeply" in (tmp_path / "page.html").read_text(encoding="utf-8")


def test_a_half_written_last_line_is_skipped_and_counted(tmp_path):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)
    traces = sorted(directory.glob("traces-*rank-1*.jsonl"))[0]
    whole = traces.read_bytes().splitlines(keepends=True)
    traces.write_bytes(b"".join(whole[:-1]) + whole[-1][:len(whole[-1]) // 2])  # cut mid-line
    result = report(directory, "-o", tmp_path / "page.html")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "1 corrupt line skipped" in page
    assert f"{traces.name}:{len(whole)}: half-written last line (no newline at its end)" in page


# --- a crash's file of NULs: memory bounded by the line bound, not the file -----------------

# Runs the report as a child and prints the child's peak RSS (KiB), so that no other child of
# the test process is counted with it.
_PEAK = """
import resource, subprocess, sys
result = subprocess.run([sys.executable, "-m", "yeto_otel.cli", "report", *sys.argv[1:]],
                        capture_output=True, text=True)
sys.stderr.write(result.stderr)
print(result.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_gib_of_nuls_without_a_newline_is_skipped_in_bounded_memory(tmp_path):
    plotly_or_skip()
    directory = copy_fixture(tmp_path)
    crashed = directory / "metrics-vm_rank-2-20261202T171635-21552.jsonl"
    with open(crashed, "wb") as handle:
        handle.truncate(GiB)  # sparse: a GiB of NULs that costs no disk
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    result = subprocess.run([sys.executable, "-c", _PEAK, str(directory), "-o",
                             str(tmp_path / "page.html")], capture_output=True, text=True,
                            env=env, timeout=300)
    returncode, peak_kib = map(int, result.stdout.split())
    assert returncode == 0, result.stderr
    # Read whole, the line alone took twice the file (bytes, then text); read in bounded
    # chunks the report stays near what the fixture costs (about 160 MiB here).
    assert peak_kib * 1024 < GiB // 3, f"peak RSS {peak_kib // 1024} MiB"
    assert f"{crashed.name}:1: longer than 64.0 MiB: skipped unread" in result.stderr
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "1 corrupt line skipped" in page and 'id="census-process"' in page


# --- -o: a regular file or a new path, nothing else -----------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _char_device(path: Path) -> None:
    # a node with /dev/null's numbers, in the test's own directory (never /dev/null itself)
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root (CAP_MKNOD)")


def _symlink(path: Path) -> None:
    (path.parent / "target.html").write_text("the link's target")
    path.symlink_to(path.parent / "target.html")


@pytest.mark.parametrize("make, kind, is_still", [
    (_fifo, "a FIFO", stat.S_ISFIFO),
    (_char_device, "a character device", stat.S_ISCHR),
    (_symlink, "a symbolic link", stat.S_ISLNK),
])
def test_output_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, make, kind,
                                                                     is_still):
    out = tmp_path / "out" / "page.html"
    out.parent.mkdir()
    make(out)
    result = report(FIXTURE, "-o", out)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"yeto-otel: report: {out} is {kind}, not a regular file; give a new path or a regular "
        "file to replace"]
    assert is_still(os.lstat(out).st_mode)
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        ["page.html"] + (["target.html"] if kind == "a symbolic link" else []))
    if kind == "a symbolic link":
        assert (tmp_path / "out" / "target.html").read_text() == "the link's target"


def test_default_output_that_is_a_fifo_is_refused(tmp_path):
    directory = copy_fixture(tmp_path)
    os.mkfifo(directory / "report.html")
    result = report(directory)
    assert result.returncode == 2
    assert "report.html is a FIFO, not a regular file" in result.stderr
    assert stat.S_ISFIFO(os.lstat(directory / "report.html").st_mode)


def test_output_that_is_a_regular_file_is_replaced(tmp_path):
    plotly_or_skip()
    out = tmp_path / "page.html"
    out.write_text("an older page")
    result = report(FIXTURE, "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
