"""Finding the records of our processes that died without exiting through the interpreter, and
reporting each death once: an exit span and a count (names: `yeto_otel.names`, RANK_EXIT and
EXITS_COUNTER).

Who looks, and when:
- the process that holds the host's exits duty (one per host and lock directory, elected like
  the node metrics, `census.Duty`) looks at every record at every collection: a death is seen
  within one collection interval while any of our processes lives on the host;
- a process that starts looks at the records of its own identity at once: a rank restarted by
  its launcher reports its previous launch's death even when it is the only process left.

Whoever takes a record's lock first reports it (`_record_file`): nobody reports a death twice.
The cause is decided from the evidence the record and the kernel hold (`_cause`); deaths seen
in the same look are counted together, so that k OOM kills among n dead in one cgroup are not
each taken for the whole story.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from opentelemetry.trace import Status, StatusCode, Tracer

from ..census import ForeignLockPath
from ..names import (EXITS_CAUSE_ATTRIBUTE, EXITS_PHASE_ATTRIBUTE, EXITS_RANK_ATTRIBUTE, EXIT_ANONYMOUS, EXIT_CAUSE, EXIT_CGROUP_LIMIT, EXIT_CGROUP_USAGE,
                     EXIT_CODE, EXIT_INSTANCE, EXIT_JOB, EXIT_OBSERVER, EXIT_PHASE, EXIT_PID,
                     EXIT_RANK, EXIT_RECORD_AGE, EXIT_RSS, EXIT_SERVICE, EXIT_SIGNAL, EXIT_STEP,
                     EXIT_WHY,
                     RANK_EXIT)
from ._cause import ExitStatus, Rise, Verdict, decide
from ._evidence import CgroupEvidence, NodeEvidence
from ._layout import UNKNOWN, Header, RecordState, Slot
from ._record_file import ClaimedRecord, claim_record, record_names

__all__ = ["ExitObserver", "Observer", "ReportedExit", "exit_info_attributes"]

_log = logging.getLogger(__name__)


class Observer:
    NODE = "node"  # the host's elected process
    NEXT_LAUNCH = "next_launch"  # the same identity, started again
    SELF = "self"  # the process itself (its own uncaught exception)


@dataclass(frozen=True)
class ReportedExit:
    header: Header
    slot: Slot
    verdict: Verdict
    seen_ns: int
    observer: str

    @property
    def phase(self) -> str:
        return self.slot.phase or "start"


def exit_attributes(report: ReportedExit) -> dict:
    """The span's attributes (names: `yeto_otel.names`, RANK_EXIT)."""
    header, slot, verdict = report.header, report.slot, report.verdict
    attributes: dict = {EXIT_INSTANCE.name: header.instance_id, EXIT_PID.name: header.pid,
                        EXIT_CAUSE.name: verdict.cause.value, EXIT_WHY.name: verdict.why,
                        EXIT_PHASE.name: report.phase, EXIT_OBSERVER.name: report.observer,
                        EXIT_RECORD_AGE.name: round(max(0, report.seen_ns - slot.written_ns)
                                                    / 1e9, 3)}
    optional = ((EXIT_RANK, header.rank), (EXIT_STEP, slot.step),
                (EXIT_ANONYMOUS, slot.anonymous), (EXIT_RSS, slot.rss),
                (EXIT_CGROUP_USAGE, slot.cgroup_usage), (EXIT_CGROUP_LIMIT, slot.cgroup_limit),
                (EXIT_CODE, verdict.code if verdict.code is not None else UNKNOWN))
    attributes.update({attr.name: value for attr, value in optional if value >= 0})
    if header.job_id:
        attributes[EXIT_JOB.name] = header.job_id
    if header.service_name:
        attributes[EXIT_SERVICE.name] = header.service_name
    if verdict.signal:
        attributes[EXIT_SIGNAL.name] = verdict.signal
    return attributes


def exit_info_attributes(report: ReportedExit) -> dict:
    """One death's attributes on the per-death series: its cause and phase, and who died where
    (rank, job, service, step, pid), so that each death is a series of its own wherever and
    however often its reporter restarts."""
    header, slot = report.header, report.slot
    return {EXITS_CAUSE_ATTRIBUTE: report.verdict.cause.value,
            EXITS_PHASE_ATTRIBUTE: report.phase,
            EXITS_RANK_ATTRIBUTE: str(header.rank) if header.rank >= 0 else "",
            EXIT_JOB.name: header.job_id, EXIT_SERVICE.name: header.service_name,
            EXIT_STEP.name: str(slot.step) if slot.step >= 0 else "",
            EXIT_PID.name: str(header.pid)}


class ExitObserver:
    """Reports deaths through `tracer` and keeps the counts the exits counter exports."""

    def __init__(self, lock_dir: str, tracer: Tracer, *, euid: int | None = None,
                 node: NodeEvidence | None = None,
                 on_report: Callable[[ReportedExit], None] | None = None):
        self.lock_dir = lock_dir
        self.euid = os.geteuid() if euid is None else euid
        self._tracer = tracer
        self._node = node or NodeEvidence()
        self._on_report = on_report
        self._lock = threading.Lock()
        self.counts: Counter = Counter()  # (cause, phase) -> deaths reported here
        self.deaths: list[dict] = []  # each death reported here (`exit_info_attributes`)
        self._said: set[str] = set()

    def look(self, observer: str = Observer.NODE,
             instance_id: str | None = None) -> list[ReportedExit]:
        """Report every dead record (of `instance_id` only, when given). Never raises."""
        with self._lock:
            try:
                return self._look(observer, instance_id)
            except (OSError, ForeignLockPath) as exc:
                self._say_once(f"cannot look at exit records in {self.lock_dir}: {exc}")
                return []

    def _look(self, observer: str, instance_id: str | None) -> list[ReportedExit]:
        claimed: list[ClaimedRecord] = []
        for name in record_names(self.lock_dir, self.euid, instance_id):
            record = claim_record(self.lock_dir, self.euid, name)
            if record is not None:
                claimed.append(record)
        dead = [r for r in claimed if r.slot is not None and r.slot.state is RecordState.RUNNING]
        for record in claimed:
            if record not in dead:
                record.finish(mark_reported=False)  # closed, or reported already: remove it
        if not dead:
            return []
        seen_ns = time.time_ns()
        node_now = self._node.oom_kills()
        cgroup_now = {r.header.cgroup_dir: _cgroup_kills_now(r.header) for r in dead
                      if r.header.cgroup_dir and r.header.cgroup_version in (1, 2)}
        # Who could have been killed: a dead process whose record counts fewer kills than
        # now. One that recorded the kill before it died (a rank that survived the OOM kill
        # of another, then was stopped) is not one of them.
        in_cgroup = Counter(r.header.cgroup_dir for r in dead
                            if _below(r.slot.cgroup_oom_kills, cgroup_now.get(r.header.cgroup_dir)))
        on_node = sum(_below(r.slot.node_oom_kills, node_now) for r in dead)
        reports = []
        for record in dead:
            header, slot = record.header, record.slot
            cgroup = None
            if header.cgroup_dir in cgroup_now:
                cgroup = Rise(slot.cgroup_oom_kills, cgroup_now[header.cgroup_dir],
                              in_cgroup[header.cgroup_dir])
            node = Rise(slot.node_oom_kills, node_now, on_node)
            report = ReportedExit(header, slot, decide(cgroup, node, _parent_saw(record)),
                                  seen_ns, observer)
            self._report(report)
            record.finish(mark_reported=True)
            reports.append(report)
        return reports

    def report_self(self, header: Header, slot: Slot, verdict: Verdict) -> ReportedExit:
        """The process's own death (an uncaught exception), reported by itself at exit."""
        report = ReportedExit(header, slot, verdict, time.time_ns(), Observer.SELF)
        with self._lock:
            self._report(report)
        return report

    def _report(self, report: ReportedExit) -> None:
        attributes = exit_attributes(report)
        start = min(report.slot.written_ns, report.seen_ns) or report.seen_ns
        span = self._tracer.start_span(RANK_EXIT.name, start_time=start, attributes=attributes)
        span.set_status(Status(StatusCode.ERROR, f"{report.verdict.cause.value}: "
                                                 f"{report.verdict.why}"))
        span.end(end_time=report.seen_ns)
        self.counts[(report.verdict.cause.value, report.phase)] += 1
        self.deaths.append(exit_info_attributes(report))
        _log.warning("yeto-otel: %s (pid %d) died in phase %s%s: %s (%s)",
                     report.header.instance_id, report.header.pid, report.phase,
                     f" at step {report.slot.step}" if report.slot.step >= 0 else "",
                     report.verdict.cause.value, report.verdict.why)
        if self._on_report is not None:
            self._on_report(report)

    def _say_once(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            _log.error("yeto-otel: %s", message)


def _parent_saw(record: ClaimedRecord) -> ExitStatus | None:
    """The exit status the dead process's parent wrote into its record (a launcher's)."""
    if record.exit_status is None:
        return None
    signal, code = record.exit_status
    return ExitStatus(signal=signal) if signal else ExitStatus(code=code)


def _below(before: int, now: int | None) -> bool:
    return before >= 0 and now is not None and before < now


def _cgroup_kills_now(header: Header) -> int | None:
    evidence = CgroupEvidence(header.cgroup_dir, header.cgroup_version)
    try:
        return evidence.read().oom_kills
    finally:
        evidence.close()

