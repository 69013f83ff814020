"""How a death's cause is decided: from OOM kill counts, the candidates and an exit status,
never guessed (the table in yeto_otel/exits/_cause.py)."""

from __future__ import annotations

import signal

import pytest

from yeto_otel.exits import Cause, ExitStatus, decide
from yeto_otel.exits._cause import Rise

KILL = ExitStatus(signal=signal.SIGKILL)


@pytest.mark.parametrize("cgroup, node, status, cause, sig, code", [
    # the cgroup counted the kill: an OOM kill, whatever the node says
    (Rise(3, 4), Rise(10, 11), None, Cause.OOM_KILL, None, None),
    (Rise(3, 4), None, KILL, Cause.OOM_KILL, "SIGKILL", None),
    # no kill in the cgroup rules it out, even when the node counted one (another process)
    (Rise(3, 3), Rise(10, 11), None, Cause.UNKNOWN, None, None),
    (Rise(3, 3), Rise(10, 11), KILL, Cause.SIGNAL, "SIGKILL", None),
    # one kill, two candidates in the cgroup: which one cannot be told
    (Rise(0, 1, candidates=2), None, None, Cause.UNKNOWN, None, None),
    (Rise(0, 2, candidates=2), None, None, Cause.OOM_KILL, None, None),
    # no cgroup (or its count unreadable, or gone back: a new cgroup): the node's count decides
    (None, Rise(10, 12), None, Cause.OOM_KILL, None, None),
    (Rise(5, None), Rise(10, 11), None, Cause.OOM_KILL, None, None),
    (Rise(5, 0), Rise(10, 10), None, Cause.UNKNOWN, None, None),
    (Rise(-1, 3), None, None, Cause.UNKNOWN, None, None),
    # an exit status decides what counts cannot
    (Rise(3, 3), None, ExitStatus(signal=signal.SIGTERM), Cause.SIGNAL, "SIGTERM", None),
    (Rise(3, 4), None, ExitStatus(code=1), Cause.EXIT_CODE, None, 1),
    (Rise(3, 4), None, ExitStatus(signal=signal.SIGSEGV), Cause.SIGNAL, "SIGSEGV", None),
    (None, None, ExitStatus(code=0), Cause.UNKNOWN, None, None),
    (None, None, None, Cause.UNKNOWN, None, None),
])
def test_cause_from_evidence(cgroup, node, status, cause, sig, code):
    verdict = decide(cgroup, node, status)
    assert (verdict.cause, verdict.signal, verdict.code) == (cause, sig, code)
    assert verdict.why


def test_exit_status_from_a_return_code():
    assert ExitStatus.from_returncode(-9) == ExitStatus(signal=9)
    assert ExitStatus.from_returncode(3) == ExitStatus(code=3)
