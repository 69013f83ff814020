"""A death in the local files replays like any span: a rank killed at step 12, reported by its
next launch into the local files, reaches a collector through `yeto-otel replay` with its
cause, phase and step."""

from __future__ import annotations

from dying_rank import killed_at_step, next_launch
from otlp_server import OtlpServer
from replay_testkit import replay
from zero_code import otlp_attributes


def test_a_reported_death_replays(tmp_path):
    pid = killed_at_step(tmp_path, 12)
    next_launch(tmp_path)
    server = OtlpServer()
    try:
        result = replay(tmp_path / "telemetry", "--endpoint", server.url)
        assert result.returncode == 0, result.stderr
        exits = [otlp_attributes(span["attributes"])
                 for request in server.requests if request.path == "/v1/traces"
                 for rs in request.body["resourceSpans"] for ss in rs["scopeSpans"]
                 for span in ss["spans"] if span["name"] == "yeto.rank.exit"]
    finally:
        server.close()
    assert [(e["yeto.exit.process.pid"], e["yeto.exit.step"], e["yeto.exit.phase"],
             e["yeto.exit.cause"]) for e in exits] == [(pid, 12, "step", "unknown")]
