"""`yeto-otel replay` against a stand-in collector on 127.0.0.1: what is sent, what is
answered, and what the ledger lets a second run skip."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from otlp_server import OtlpServer
from replay_testkit import (RESOURCE, STEM, clean_env, replay, span_line,
                            summary, telemetry_dir, write_lines)


@pytest.fixture
def server():
    s = OtlpServer()
    yield s
    s.close()


def markers(n: int, prefix: str = "line") -> list[str]:
    return [f"{prefix}-{i}" for i in range(1, n + 1)]


def test_every_line_is_sent_once_and_a_second_run_sends_nothing(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=25, points=12)
    first = replay(directory, "--endpoint", server.url, "--json", "--batch-bytes", "2000")
    assert first.returncode == 0, first.stderr
    assert sorted(server.markers()) == sorted(markers(25) + markers(12, "point"))
    assert {r.path for r in server.requests} == {"/v1/traces", "/v1/metrics"}
    assert len(server.requests) < 25 + 12  # lines were merged into fewer requests
    counts = summary(first)["signals"]
    assert counts["traces"]["sent_lines"] == 25 and counts["traces"]["sent_items"] == 25
    assert counts["metrics"]["sent_items"] == 12
    requests_before = len(server.requests)
    second = replay(directory, "--endpoint", server.url, "--json")
    assert second.returncode == 0, second.stderr
    assert len(server.requests) == requests_before
    assert summary(second)["signals"]["traces"] == {
        "sent_lines": 0, "sent_items": 0, "rejected_lines": 0, "rejected_items": 0,
        "already_lines": 25}


def test_one_line_per_request_sends_each_line_as_written(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=3)
    result = replay(directory, "--endpoint", server.url, "--batch-bytes", "0")
    assert result.returncode == 0, result.stderr
    assert [r.body for r in server.requests] == [json.loads(span_line(n)) for n in (1, 2, 3)]
    assert "traces   sent 3 lines (3 spans), rejected 0 lines" in result.stdout


def test_a_partial_success_is_reported_with_its_lines_and_settled(tmp_path):
    def respond(request, index):
        if "line-3" in request.markers():
            body = {"partialSuccess": {"rejectedSpans": "1", "errorMessage": "span too old"}}
            return 200, {}, json.dumps(body).encode()
    server = OtlpServer(respond)
    try:
        directory = telemetry_dir(tmp_path, spans=5)
        result = replay(directory, "--endpoint", server.url, "--batch-bytes", "0", "--json")
        assert result.returncode == 1
        name = f"traces-{STEM}.jsonl"
        assert f"{name}:3: the collector rejected 1 of its items: span too old" in result.stderr
        counts = summary(result)["signals"]["traces"]
        assert counts["sent_items"] == 4 and counts["rejected_items"] == 1
        again = replay(directory, "--endpoint", server.url)
        assert again.returncode == 0 and len(server.requests) == 5  # settled: not resent
    finally:
        server.close()


def test_a_refused_merged_request_is_resent_line_by_line_naming_the_bad_one(tmp_path):
    def respond(request, index):
        if "line-4" in request.markers():
            return 400, {}, json.dumps({"code": 3, "message": "bad span line-4"}).encode()
    server = OtlpServer(respond)
    try:
        directory = telemetry_dir(tmp_path, spans=8)
        result = replay(directory, "--endpoint", server.url, "--json")  # all 8 in one request
        assert result.returncode == 1
        assert f"traces-{STEM}.jsonl:4: rejected: HTTP 400" in result.stderr
        assert "bad span line-4" in result.stderr
        assert Counter(server.markers()) == Counter(m for m in markers(8) if m != "line-4")
        assert summary(result)["signals"]["traces"]["rejected_lines"] == 1
    finally:
        server.close()


def test_429_waits_as_long_as_retry_after_says(tmp_path):
    def respond(request, index):
        if index == 0:
            return 429, {"Retry-After": "1"}, b'{"code": 8, "message": "slow down"}'
    server = OtlpServer(respond)
    try:
        directory = telemetry_dir(tmp_path, spans=2)
        result = replay(directory, "--endpoint", server.url)
        assert result.returncode == 0, result.stderr
        assert server.requests[1].at - server.requests[0].at >= 1.0
        assert sorted(server.markers()) == markers(2)
    finally:
        server.close()


def test_a_collector_that_stays_away_stops_the_run_naming_file_and_line(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=3)
    server.respond = lambda request, index: (503, {}, b'{"message": "unavailable"}')
    result = replay(directory, "--endpoint", server.url, "--max-retry-wait", "0",
                    "--batch-bytes", "0")
    assert result.returncode == 1
    assert f"stopped: traces-{STEM}.jsonl:1: HTTP 503" in result.stdout
    assert "gave up after 1 tries" in result.stdout
    server.respond = None  # back: everything still goes, nothing was skipped
    again = replay(directory, "--endpoint", server.url, "--batch-bytes", "0")
    assert again.returncode == 0, again.stderr
    assert sorted(server.markers()) == markers(3)


def test_no_collector_at_all_is_retried_then_given_up(tmp_path):
    directory = telemetry_dir(tmp_path, spans=1)
    server = OtlpServer()
    url = server.url
    server.close()  # nothing listens there now
    result = replay(directory, "--endpoint", url, "--max-retry-wait", "0")
    assert result.returncode == 1
    assert "ConnectionError" in result.stdout and "traces-" in result.stdout


def test_an_unauthorised_run_records_nothing_and_exits_2(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=3)
    server.respond = lambda r, i: None if r.headers.get("authorization") == "Bearer t0k" \
        else (401, {}, b'{"message": "missing token"}')
    result = replay(directory, "--endpoint", server.url)
    assert result.returncode == 2
    assert "HTTP 401" in result.stdout and "missing token" in result.stdout
    env = clean_env(OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20t0k")
    again = replay(directory, "--endpoint", server.url, env=env)
    assert again.returncode == 0, again.stderr
    assert sorted(server.markers()) == markers(3)


def test_an_incomplete_last_line_waits_for_the_next_run(server, tmp_path):
    directory = tmp_path / "telemetry"
    directory.mkdir()
    path = directory / f"traces-{STEM}.jsonl"
    whole = span_line(4)
    write_lines(path, [span_line(1), span_line(2), span_line(3), whole[:40]],
                last_complete=False)
    first = replay(directory, "--endpoint", server.url, "--json")
    assert first.returncode == 0, first.stderr
    assert sorted(server.markers()) == markers(3)
    with open(path, "a") as out:  # the writer finishes the line
        out.write(whole[40:] + "\n")
    second = replay(directory, "--endpoint", server.url, "--json")
    assert second.returncode == 0
    assert sorted(server.markers()) == markers(4)
    assert summary(second)["signals"]["traces"]["already_lines"] == 3


def test_a_replaced_file_is_sent_again_from_its_start(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=2)
    assert replay(directory, "--endpoint", server.url).returncode == 0
    path = directory / f"traces-{STEM}.jsonl"
    write_lines(path, [span_line(n) for n in (7, 8, 9)])  # another process's file, same name
    result = replay(directory, "--endpoint", server.url)
    assert result.returncode == 0
    assert "not the file the ledger knows" in result.stderr
    assert sorted(server.markers()) == sorted(markers(2) + ["line-7", "line-8", "line-9"])


def test_damaged_lines_are_reported_and_the_rest_is_sent(server, tmp_path):
    directory = tmp_path / "telemetry"
    directory.mkdir()
    write_lines(directory / f"traces-{STEM}.jsonl",
                [span_line(1), "{not json", "", '{"other": 1}', span_line(2)])
    result = replay(directory, "--endpoint", server.url, "--json")
    assert result.returncode == 1
    assert f"traces-{STEM}.jsonl:2: not JSON" in result.stderr
    assert f"traces-{STEM}.jsonl:4: not an OTLP JSON traces batch" in result.stderr
    assert sorted(server.markers()) == markers(2)
    again = replay(directory, "--endpoint", server.url, "--json")
    assert again.returncode == 0 and summary(again)["problems"] == []


def test_the_step_log_goes_as_log_records_of_its_process(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=1, steps=3)
    result = replay(directory, "--endpoint", server.url)
    assert result.returncode == 0, result.stderr
    logs = [r for r in server.requests if r.path == "/v1/logs"]
    assert len(logs) == 1
    resource_logs = logs[0].body["resourceLogs"][0]
    assert resource_logs["resource"] == RESOURCE  # from the traces file of its process
    assert resource_logs["scopeLogs"][0]["scope"]["name"] == "yeto_otel.steplog"
    record = resource_logs["scopeLogs"][0]["logRecords"][0]
    attributes = {a["key"]: a["value"] for a in record["attributes"]}
    assert record["timeUnixNano"] == str(1_767_225_600_000_000_001)
    assert record["severityNumber"] == 9
    assert json.loads(record["body"]["stringValue"])["step"] == 1
    assert attributes["step"] == {"intValue": "1"}
    assert attributes["loss"] == {"doubleValue": 1.0}
    assert attributes["host_mem.vm_rss_bytes"] == {"intValue": "1001"}
    assert attributes["ok"] == {"boolValue": True}
    assert attributes["log.file.name"] == {"stringValue": f"steplog-{STEM}.jsonl"}
    assert "nested" not in attributes and "huge" not in attributes  # in the body only
    assert "time_unix_nano" not in attributes


def test_no_steplog_leaves_it_out(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=1, steps=3)
    assert replay(directory, "--endpoint", server.url, "--no-steplog").returncode == 0
    assert [r.path for r in server.requests] == ["/v1/traces"]


def test_environment_decides_endpoint_headers_and_compression(server, tmp_path):
    directory = telemetry_dir(tmp_path, spans=2, points=1)
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",  # nothing there
                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{server.url}/custom/traces",
                    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"{server.url}/custom/metrics",
                    OTEL_EXPORTER_OTLP_HEADERS="x-general=1",
                    OTEL_EXPORTER_OTLP_TRACES_HEADERS="x-tenant=a%2Cb",
                    OTEL_EXPORTER_OTLP_COMPRESSION="gzip")
    result = replay(directory, env=env)
    assert result.returncode == 0, result.stderr
    by_path = {r.path: r for r in server.requests}
    assert set(by_path) == {"/custom/traces", "/custom/metrics"}
    traces, metrics = by_path["/custom/traces"], by_path["/custom/metrics"]
    assert traces.headers["x-tenant"] == "a,b" and "x-general" not in traces.headers
    assert metrics.headers["x-general"] == "1"
    assert traces.headers["content-encoding"] == "gzip"


@pytest.mark.parametrize("env, args, says", [
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, [], "OTEL_EXPORTER_OTLP_PROTOCOL='grpc'"),
    ({"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, ["--endpoint", "http://127.0.0.1:9"],
     "OTEL_EXPORTER_OTLP_HEADERS"),
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, ["--endpoint", "http://127.0.0.1:9"],
     "OTEL_EXPORTER_OTLP_TIMEOUT"),
    ({}, ["--endpoint", "localhost:4318"], "--endpoint"),
    ({}, ["--endpoint", "http://127.0.0.1:9", "--certificate", "/nonexistent.pem"],
     "--certificate"),
    ({}, ["--batch-bytes", "-1"], "--batch-bytes"),
])
def test_bad_settings_fail_at_start_with_one_line(tmp_path, env, args, says):
    directory = telemetry_dir(tmp_path, spans=1)
    result = replay(directory, *args, env=clean_env(**env))
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert not (directory / ".replay-ledger.jsonl").exists() or \
        (directory / ".replay-ledger.jsonl").read_text() == ""


def test_a_directory_without_telemetry_is_an_error(tmp_path):
    result = replay(tmp_path, "--endpoint", "http://127.0.0.1:9")
    assert result.returncode == 2 and "no telemetry files" in result.stderr
    missing = replay(tmp_path / "nope", "--endpoint", "http://127.0.0.1:9")
    assert missing.returncode == 2 and "is not a directory" in missing.stderr


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    server = OtlpServer(delay_s=0.05)
    try:
        directory = telemetry_dir(tmp_path, spans=10)
        result = replay(directory, "--endpoint", server.url, "--batch-bytes", "0",
                        "--progress-interval", "0.1")
        assert result.returncode == 0, result.stderr
        progress = [line for line in result.stderr.splitlines()
                    if line.startswith("yeto-otel: replay: ") and "%" in line]
        assert progress and "\r" not in result.stderr
    finally:
        server.close()
