"""Exit records in real processes under `opentelemetry-instrument` (local files): a rank that
exits leaves nothing to report, one that raises reports itself, one killed with SIGKILL is
reported by its next launch (never as an OOM kill without one), a forked child never writes
its parent's record, and `YETO_OTEL_EXIT_RECORDS=off` keeps no record at all."""

from __future__ import annotations

import sys

from dying_rank import TRAINER, env_of, exit_spans, killed_at_step, next_launch, records
from zero_code import run_instrumented


def test_a_clean_exit_leaves_nothing_to_report(tmp_path):
    result = run_instrumented(TRAINER, env_of(tmp_path), console=False,
                              command=[sys.executable, "-c", TRAINER, "5", "return"])
    assert result.returncode == 0, result.stderr
    assert records(tmp_path) == []
    next_launch(tmp_path)
    assert exit_spans(tmp_path) == []


def test_an_uncaught_exception_is_reported_by_the_rank_itself(tmp_path):
    result = run_instrumented(TRAINER, env_of(tmp_path), console=False,
                              command=[sys.executable, "-c", TRAINER, "7", "raise"])
    assert result.returncode == 1 and "loss is nan" in result.stderr
    (span,) = exit_spans(tmp_path)
    assert {k: span[k] for k in ("yeto.exit.cause", "yeto.exit.code", "yeto.exit.phase",
                                 "yeto.exit.step", "yeto.exit.observer", "yeto.rank")} == {
        "yeto.exit.cause": "exit_code", "yeto.exit.code": 1, "yeto.exit.phase": "step",
        "yeto.exit.step": 7, "yeto.exit.observer": "self", "yeto.rank": 0}
    assert "ValueError: loss is nan" in span["yeto.exit.evidence"]
    assert records(tmp_path) == []
    next_launch(tmp_path)
    assert len(exit_spans(tmp_path)) == 1  # reported once


def test_a_sigkill_without_an_oom_kill_is_not_called_one(tmp_path):
    pid = killed_at_step(tmp_path, 12)
    assert len(records(tmp_path)) == 1
    next_launch(tmp_path)
    (span,) = exit_spans(tmp_path)
    assert span["yeto.exit.cause"] == "unknown"
    assert (span["yeto.exit.process.pid"], span["yeto.exit.step"], span["yeto.exit.phase"],
            span["yeto.exit.observer"]) == (pid, 12, "step", "next_launch")
    assert span["yeto.exit.service.instance.id"].endswith("/rank-0")
    assert span["yeto.exit.memory.rss"] > 0 and span["yeto.exit.memory.anonymous"] > 0
    assert records(tmp_path) == []


def test_a_forked_child_never_writes_its_parents_record(tmp_path):
    killed_at_step(tmp_path, 4, "fork")
    next_launch(tmp_path)
    (span,) = exit_spans(tmp_path)  # the parent's death; the child exited through os._exit
    assert span["yeto.exit.step"] == 4


def test_no_record_when_turned_off(tmp_path):
    killed_at_step(tmp_path, 2, YETO_OTEL_EXIT_RECORDS="off")
    assert records(tmp_path) == []
    next_launch(tmp_path, YETO_OTEL_EXIT_RECORDS="off")
    assert exit_spans(tmp_path) == []
