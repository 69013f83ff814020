"""How a process died, decided from evidence only, never guessed.

The evidence: the OOM kill counts its record holds (its memory cgroup's and the node's, as of
its last collection) against the same counts now; the candidates, the processes of ours that
died unreported in the same place with a record that counts fewer kills than now (any of them
could be the one the kernel killed; one whose record already counts the kill outlived it); and
the exit status, where whoever reports saw it (a parent: a launcher).

| cause | when |
|---|---|
| `oom_kill` | the cgroup's count rose since the record by at least the number of candidates in that cgroup; or, without cgroup evidence, the node's count rose by at least the candidates on the node. An exit status, where known, must be SIGKILL |
| `signal` | the exit status is known and is a signal, with no OOM kill to explain it |
| `exit_code` | the exit status is known and is a non-zero code (also a Python exception the process reported itself: 1) |
| `unknown` | anything else: no exit status and no OOM kill counted, a count that is missing or went back (a new cgroup), or fewer kills than dead that could have been killed |

A cgroup whose count did not rise rules an OOM kill out even when the node's rose: the kernel
charges a kill to the victim's memory cgroup whether the cgroup or the node ran out (v1
memory.oom_control and v2 memory.events both count it), so the node's kill was another
process's.
"""

from __future__ import annotations

import signal as signals
from dataclasses import dataclass
from enum import Enum

__all__ = ["Cause", "ExitStatus", "Verdict", "decide"]


class Cause(str, Enum):
    OOM_KILL = "oom_kill"
    SIGNAL = "signal"
    EXIT_CODE = "exit_code"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ExitStatus:
    """What a parent saw: `signal` (a number) or `code`."""

    signal: int | None = None
    code: int | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> "ExitStatus":
        """subprocess' (and torchrun's) convention: -N for signal N."""
        return cls(signal=-returncode) if returncode < 0 else cls(code=returncode)


@dataclass(frozen=True)
class Rise:
    """An OOM kill count at the record and now, and how many of ours that died unreported
    there could have been killed (their records count fewer kills than now)."""

    before: int | None
    now: int | None
    candidates: int = 1

    @property
    def known(self) -> bool:
        return self.before is not None and self.before >= 0 and self.now is not None \
            and self.now >= self.before

    @property
    def kills(self) -> int:
        return self.now - self.before if self.known else 0


@dataclass(frozen=True)
class Verdict:
    cause: Cause
    signal: str | None = None  # "SIGKILL"
    code: int | None = None
    why: str = ""  # in words, for the log and the span's status description


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def decide(cgroup: Rise | None, node: Rise | None, status: ExitStatus | None = None) -> Verdict:
    """The cause (see the module's table); `cgroup` None when the process had no memory cgroup
    to read, `node` None when the node's count could not be read."""
    killed = status is None or status.signal == signals.SIGKILL
    oom = _oom(cgroup, node)
    if oom and killed:
        return Verdict(Cause.OOM_KILL, signal_name(signals.SIGKILL) if status else None,
                       why=oom)
    if status is not None and status.signal is not None:
        return Verdict(Cause.SIGNAL, signal_name(status.signal),
                       why=f"its parent saw it killed by {signal_name(status.signal)}"
                           + (" with no OOM kill counted" if killed else ""))
    if status is not None and status.code:
        return Verdict(Cause.EXIT_CODE, code=status.code,
                       why=f"its parent saw it exit with {status.code}")
    return Verdict(Cause.UNKNOWN, why=_why_unknown(cgroup, node))


def _oom(cgroup: Rise | None, node: Rise | None) -> str:
    """Why an OOM kill explains the death, or "" when it does not."""
    if cgroup is not None and cgroup.known:
        if cgroup.kills >= cgroup.candidates > 0:
            return f"the memory cgroup counted {cgroup.kills} OOM kill(s) since the record"
        return ""  # the cgroup's count speaks for the process: no (or too few) kills in it
    if node is not None and node.known and node.kills >= node.candidates > 0:
        return f"the node counted {node.kills} OOM kill(s) since the record"
    return ""


def _why_unknown(cgroup: Rise | None, node: Rise | None) -> str:
    if cgroup is not None and cgroup.known and 0 < cgroup.kills < cgroup.candidates:
        return (f"the memory cgroup counted {cgroup.kills} OOM kill(s) for {cgroup.candidates} "
                "processes that died: which were killed cannot be told")
    if cgroup is not None and cgroup.known:
        return "no OOM kill in the memory cgroup, and no exit status"
    if node is not None and node.known:
        return "no OOM kill counted on the node, and no exit status"
    return "no OOM kill count to compare, and no exit status"
