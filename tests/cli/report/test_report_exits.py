"""A rank's death in the report: the `yeto.rank.exit` span its reporter wrote (here rank 0, the
host's elected process, reporting rank 1) is a ✖ on the dead rank's lane of the timeline,
named by its cause, phase and step, with the span's attributes in its hover."""

from __future__ import annotations

import json
import shutil

import pytest
from report_testkit import plotly_or_skip
from repo_paths import FIXTURES

from yeto_otel.cli.report import charts, load_telemetry
from yeto_otel.names import (EXIT_CAUSE, EXIT_INSTANCE, EXIT_PHASE, EXIT_STEP, RANK_EXIT)

TELEMETRY = FIXTURES / "telemetry"


def _exit_line(reporter: str, dead: str, start_ns: int, end_ns: int) -> str:
    def attr(key, value):
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}
    span = {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": RANK_EXIT.name,
            "kind": 1, "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(end_ns),
            "attributes": [attr(EXIT_INSTANCE.name, dead), attr(EXIT_CAUSE.name, "oom_kill"),
                           attr(EXIT_PHASE.name, "dcp.save.write"), attr(EXIT_STEP.name, 4812)],
            "status": {"code": 2, "message": "oom_kill: the memory cgroup counted 1 OOM kill"}}
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [attr("service.instance.id", reporter)]},
        "scopeSpans": [{"scope": {"name": "yeto_otel.rank_exits"}, "spans": [span]}]}]})


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    plotly_or_skip()
    directory = tmp_path_factory.mktemp("telemetry")
    for path in TELEMETRY.iterdir():
        shutil.copy(path, directory / path.name)
    data = load_telemetry(directory)
    middle = sum(data.extents[next(iter(data.extents))]) // 2  # within the run
    (directory / "traces-vm_rank-0-exit.jsonl").write_text(
        _exit_line("vm/rank-0", "vm/rank-1", middle, middle + 3_000_000_000) + "\n")
    return dict(charts(load_telemetry(directory)))


def test_a_death_is_marked_on_the_dead_ranks_lane(figures):
    (marks,) = [t for fig in figures.values() for t in fig.data if t.name == "rank exit"]
    assert list(marks.y) == ["rank 1"]  # the dead rank's lane, not its reporter's
    assert list(marks.text) == ["oom_kill in dcp.save.write at step 4812"]
    assert "yeto.exit.cause: oom_kill" in marks.hovertext[0]
    assert marks.marker.symbol == "x"


def test_no_mark_without_a_death():
    plotly_or_skip()
    drawn = dict(charts(load_telemetry(TELEMETRY)))
    assert not [t for fig in drawn.values() for t in fig.data if t.name == "rank exit"]
