"""The retry policy and the endpoint resolution, piece by piece."""

from __future__ import annotations

import argparse
import email.utils
import random

import pytest

from otlp_server import OtlpServer
from yeto_otel.cli.replay._endpoint import add_destination_arguments, destinations
from yeto_otel.cli.replay._sender import (ACCEPTED, FATAL, GAVE_UP, REJECTED, RetryPolicy,
                                          Sender, retry_after)
from yeto_otel.settings import SettingsError


def test_retry_after_in_seconds_or_as_an_http_date():
    now = 1_700_000_000.0
    assert retry_after("7", now) == 7.0
    assert retry_after(email.utils.formatdate(now + 30, usegmt=True), now) == pytest.approx(30)
    assert retry_after(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert retry_after("soon", now) is None and retry_after(None, now) is None


def test_backoff_doubles_with_jitter_up_to_its_bound():
    policy, rng = RetryPolicy(), random.Random(1)
    for attempt, base in [(0, 1), (1, 2), (2, 4), (3, 8), (10, 30)]:
        for _ in range(50):
            assert 0.5 * base <= policy.backoff(attempt, rng) <= 1.5 * base


def _sender(server, waits, max_wait_s=300.0):
    args = _args("--endpoint", server.url)
    return Sender(destinations({}, args, ("traces",)), RetryPolicy(max_wait_s=max_wait_s),
                  wait=lambda s: waits.append(s) or False, rng=random.Random(0))


def _args(*argv):
    parser = argparse.ArgumentParser()
    add_destination_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("statuses, outcome, tries", [
    ([503, 502, 504, 200], ACCEPTED, 4),
    ([400], REJECTED, 1),
    ([413], REJECTED, 1),
    ([500], REJECTED, 1),
    ([403], FATAL, 1),
    ([404], FATAL, 1),
])
def test_what_each_status_means(statuses, outcome, tries):
    server = OtlpServer(lambda r, i: (statuses[min(i, len(statuses) - 1)], {}, b"{}"))
    waits: list[float] = []
    try:
        answer = _sender(server, waits).send("traces", b'{"resourceSpans": []}')
        assert answer.outcome == outcome
        assert len(server.requests) == tries and len(waits) == tries - 1
    finally:
        server.close()


def test_the_total_wait_is_bounded_and_retry_after_is_honoured():
    server = OtlpServer(lambda r, i: (429, {"Retry-After": "40"}, b"{}"))
    waits: list[float] = []
    try:
        answer = _sender(server, waits, max_wait_s=100).send("traces", b"{}")
        assert answer.outcome == GAVE_UP and answer.status == 429
        assert waits == [40.0, 40.0]  # a third wait would pass 100 s
        assert "gave up after 3 tries and 80 s of waiting" in answer.message
    finally:
        server.close()


@pytest.mark.parametrize("asked", ["0", "Thu, 01 Jan 1970 00:00:00 GMT"])
def test_a_retry_after_of_nothing_still_backs_off_and_gives_up(asked):
    """`Retry-After: 0` (or a date gone by) must not become a busy loop that never reaches
    the bound on the total wait."""
    server = OtlpServer(lambda r, i: (429, {"Retry-After": asked}, b"{}"))
    waits: list[float] = []
    try:
        answer = _sender(server, waits, max_wait_s=10).send("traces", b"{}")
        assert answer.outcome == GAVE_UP
        assert len(server.requests) <= 6 and all(w >= 0.5 for w in waits)
        assert sum(waits) <= 10
    finally:
        server.close()


def test_signal_specific_variables_win_over_general_ones_and_flags_over_both():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
           "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://logs.example/v1/logs",
           "OTEL_EXPORTER_OTLP_TIMEOUT": "5", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "7.5",
           "OTEL_EXPORTER_OTLP_CLIENT_KEY": __file__,
           "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": __file__}
    found = destinations(env, _args(), ("traces", "metrics", "logs"))
    assert found["traces"].url == "http://collector:4318/v1/traces"
    assert found["logs"].url == "https://logs.example/v1/logs"
    assert (found["traces"].timeout_s, found["metrics"].timeout_s) == (5.0, 7.5)
    assert found["traces"].client_cert == (__file__, __file__)
    flagged = destinations(env, _args("--endpoint", "http://other:4318", "--timeout", "2",
                                      "--insecure", "--header", "authorization=Bearer a=b,c"),
                           ("logs",))["logs"]
    assert flagged.url == "http://other:4318/v1/logs" and flagged.timeout_s == 2.0
    assert flagged.verify is False and flagged.headers == {"authorization": "Bearer a=b,c"}


def test_a_grpc_environment_is_refused_unless_an_endpoint_is_given():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(SettingsError, match="OTLP/HTTP"):
        destinations(env, _args(), ("traces",))
    assert destinations(env, _args("--endpoint", "http://collector:4318"),
                        ("traces",))["traces"].url == "http://collector:4318/v1/traces"
