"""A replay stopped part way, by a real SIGINT or SIGKILL to the replay process, then run again:
every line arrives, none twice after SIGINT, at most one request's lines twice after SIGKILL
(the one answered but not yet in the ledger)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter

import pytest

from otlp_server import OtlpServer, wait_until
from replay_testkit import clean_env, replay, replay_command, telemetry_dir
from signal_dispositions import default_stop_signals

LINES = 60


def _start(directory, server) -> subprocess.Popen:
    # One line per request and a slow collector: the run is still going when the signal comes.
    return subprocess.Popen(replay_command(directory, "--endpoint", server.url, "--batch-bytes",
                                           "0", "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(), preexec_fn=default_stop_signals)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_finishes_the_request_in_flight_and_resumes_exactly(tmp_path, signum):
    server = OtlpServer(delay_s=0.05)
    try:
        directory = telemetry_dir(tmp_path, spans=LINES)
        process = _start(directory, server)
        wait_until(lambda: len(server.requests) >= 5, what="the first requests")
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 128 + signum, err
        stopped = json.loads(out)
        assert stopped["stopped"].startswith("stopped before")
        sent_first = stopped["signals"]["traces"]["sent_lines"]
        assert 5 <= sent_first < LINES
        assert len(server.markers()) == sent_first  # what it counted is what arrived
        server.delay_s = 0
        again = replay(directory, "--endpoint", server.url, "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["signals"]["traces"]["already_lines"] == sent_first
        assert Counter(server.markers()) == Counter(f"line-{n}" for n in range(1, LINES + 1))
    finally:
        server.close()


def test_sigkill_resends_at_most_the_request_answered_before_its_record(tmp_path):
    server = OtlpServer(delay_s=0.05)
    try:
        directory = telemetry_dir(tmp_path, spans=LINES)
        process = _start(directory, server)
        wait_until(lambda: len(server.requests) >= 5, what="the first requests")
        process.kill()
        process.communicate(timeout=60)
        assert process.returncode == -signal.SIGKILL
        server.delay_s = 0
        again = replay(directory, "--endpoint", server.url, "--json")
        assert again.returncode == 0, again.stderr
        received = Counter(server.markers())
        assert set(received) == {f"line-{n}" for n in range(1, LINES + 1)}  # nothing skipped
        twice = [m for m, count in received.items() if count > 1]
        assert len(twice) <= 1 and max(received.values()) <= 2
    finally:
        server.close()
