"""Reading JSON lines files whatever a crash or a full disk left in them: every damaged line is
skipped with its reason and line number, the lines around it are still read, and a line
longer than the bound is never read whole."""

from __future__ import annotations

import json

from yeto_otel.otel import MAX_LINE_BYTES, read_json_lines

GOOD = {"resourceMetrics": []}


def _lines(*lines: bytes) -> bytes:
    return b"".join(lines)


def test_a_line_over_the_bound_is_skipped_and_the_next_still_read(tmp_path):
    path = tmp_path / "metrics-x.jsonl"
    good = json.dumps(GOOD).encode()
    path.write_bytes(_lines(good + b"\n", b"x" * 5000 + b"\n", good + b"\n",
                            b"y" * 1000 + b"\n"))
    found, bad = read_json_lines(path, max_line=1000)
    assert [n for n, _ in found] == [1, 3]
    assert [(b.line, b.reason) for b in bad] == [
        (2, "longer than 1,000 B: skipped unread (no export writes such lines)"),
        # exactly at the bound is not over it: read, and not JSON
        (4, "not JSON (Expecting value at column 1)")]


def test_the_bound_is_far_above_a_real_export_line():
    # 512 restart spans with 32 events each (the batch processor's largest batch) measured
    # 3.6 MiB; at the SDK's default attribute and event limits 20 MiB.
    assert MAX_LINE_BYTES >= 3 * 20 * 2**20


def test_a_half_written_last_line_is_skipped_and_said_to_be_cut(tmp_path):
    path = tmp_path / "traces-x.jsonl"
    whole = json.dumps(GOOD).encode()
    path.write_bytes(whole + b"\n" + whole[:-7])  # a crash or a full disk mid-line
    found, bad = read_json_lines(path)
    assert [n for n, _ in found] == [1]
    assert len(bad) == 1 and bad[0].line == 2
    assert bad[0].reason.startswith("half-written last line (no newline at its end), not JSON")


def test_a_whole_last_line_without_its_newline_is_still_read(tmp_path):
    path = tmp_path / "traces-x.jsonl"
    path.write_bytes(json.dumps(GOOD).encode())
    found, bad = read_json_lines(path)
    assert found == [(1, GOOD)] and bad == []


def test_nul_bytes_and_deep_nesting_are_bad_lines_not_errors(tmp_path):
    path = tmp_path / "logs-x.jsonl"
    path.write_bytes(_lines(b"\0" * 4096 + b"\n", b"[" * 100_000 + b"]" * 100_000 + b"\n",
                            b"\xff\xfe\n", json.dumps(GOOD).encode() + b"\n"))
    found, bad = read_json_lines(path)
    assert [n for n, _ in found] == [4]
    assert [(b.line, b.reason) for b in bad] == [
        (1, "only NUL bytes (what a crash can leave in a file)"),
        (2, "not JSON this reader follows (nested too deeply)"),
        (3, "not UTF-8 text")]
