"""Which lines of a telemetry file a replay may send: complete ones only, an overlong one
skipped unread (its place settled), one still being written left for the next run."""

from __future__ import annotations

from yeto_otel.cli.replay._files import complete_lines


def test_an_overlong_line_is_skipped_unread_with_its_exact_end(tmp_path):
    path = tmp_path / "traces-x.jsonl"
    path.write_bytes(b"a\n" + b"x" * 100 + b"\n" + b"b\n")
    lines = list(complete_lines(path, max_line=10))
    assert [(l.number, l.start, l.end, l.raw) for l in lines] == [
        (1, 0, 2, b"a\n"), (2, 2, 103, None), (3, 103, 105, b"b\n")]


def test_an_overlong_line_still_being_written_waits_for_the_next_run(tmp_path):
    path = tmp_path / "traces-x.jsonl"
    path.write_bytes(b"a\n" + b"x" * 100)  # no newline yet: its end is not known
    lines = list(complete_lines(path, max_line=10))
    assert [(l.number, l.end) for l in lines] == [(1, 2)]
