"""This process's exit record, kept current: what it is doing, its last step, its memory and the
kernel's OOM kill counts as of its last collection (see `_layout` for the record, `_record_file`
for where it lives and who may read it).

What writes it, and from which thread:
- a yeto span that starts or ends (`PhaseSpanProcessor`, on the thread that runs the span):
  the innermost yeto span still open is the record's phase;
- `note_step` (from `add_census_to_step_log`, on the training thread): the last step logged;
- `refresh` (on the collection thread, once per collection): the process's RSS and anonymous
  memory (/proc/self/status), its memory cgroup's usage, limit and OOM kill count, the node's
  OOM kill count;
- `close` at the interpreter's exit: closed (nothing to report), or reported when the process
  reported its own uncaught exception.

An update is a store into the mapped record under a lock that is never held across a system
call: the training thread pays no system call (an uncontended lock is none). The update's time
is `time.time_ns()`, which Linux answers in user space (vDSO).
"""

from __future__ import annotations

import os
import threading
import time

from ..proc import ProcFile, ProcReadError, parse_kb_fields
from ._evidence import CgroupEvidence, NodeEvidence
from ._layout import (UNKNOWN, Header, RecordState, Slot, or_unknown, write_header,
                      write_slot_values)
from ._record_file import OwnedRecord

__all__ = ["ExitRecorder", "BEFORE_FIRST_STEP", "BETWEEN_SPANS"]

BEFORE_FIRST_STEP = "start"  # the phase before any step was logged and outside every span
BETWEEN_SPANS = "step"  # the phase once a step was logged, outside every span
_OWN_MEMORY = {b"VmRSS": "rss", b"RssAnon": "anonymous"}

_pid = os.getpid()  # kept current across forks without a system call per update


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ExitRecorder:
    """The record of the process that made it; in a forked child every call does nothing."""

    def __init__(self, record: OwnedRecord, header: Header, *,
                 cgroup: CgroupEvidence | None = None, node: NodeEvidence | None = None,
                 proc_root: str = "/proc"):
        self.record = record
        self.header = header
        self._owner = _pid
        self._lock = threading.Lock()
        self._updates = 0
        # The latest values, changed in place (Slot's fields): an update makes no object.
        self._values = dict(Slot(written_ns=time.time_ns(), phase=BEFORE_FIRST_STEP).__dict__)
        self._open_spans: list[tuple[int, str]] = []  # (span id, name), oldest first
        self._stepped = False
        self._cgroup = cgroup
        self._node = node
        self._status = ProcFile(os.path.join(proc_root, "self/status"))
        write_header(record.buffer, header)
        self._write_locked()
        record.publish()

    def _write_locked(self, **changes) -> None:
        values = self._values
        values.update(changes)
        values["written_ns"] = time.time_ns()
        write_slot_values(self.record.buffer, self._updates, values)
        self._updates += 1

    def _phase(self) -> str:
        if self._open_spans:
            return self._open_spans[-1][1]
        return BETWEEN_SPANS if self._stepped else BEFORE_FIRST_STEP

    # --- the training thread's updates ---------------------------------------------------------

    def note_step(self, step: int) -> None:
        if self._owner != _pid or self._updates < 0:
            return
        with self._lock:
            self._stepped = True
            self._write_locked(step=step, phase=self._phase())

    def span_started(self, span_id: int, name: str) -> None:
        if self._owner != _pid or self._updates < 0:
            return
        with self._lock:
            self._open_spans.append((span_id, name))
            self._write_locked(phase=name)

    def span_ended(self, span_id: int) -> None:
        if self._owner != _pid or self._updates < 0:
            return
        with self._lock:
            before = len(self._open_spans)
            self._open_spans = [s for s in self._open_spans if s[0] != span_id]
            if len(self._open_spans) != before:
                self._write_locked(phase=self._phase())

    # --- the collection thread's update --------------------------------------------------------

    def refresh(self) -> None:
        """The process's memory and the OOM kill counts, read now (a few small files)."""
        if self._owner != _pid or self._updates < 0:
            return
        changes: dict = {"census_ns": time.time_ns()}
        try:
            found, _ = parse_kb_fields(self._status.path, self._status.read(), _OWN_MEMORY)
            changes.update(found)
        except ProcReadError:
            pass
        if self._cgroup is not None:
            counts = self._cgroup.read()
            changes.update(cgroup_oom_kills=or_unknown(counts.oom_kills),
                           cgroup_usage=or_unknown(counts.usage),
                           cgroup_limit=or_unknown(counts.limit))
        if self._node is not None:
            changes["node_oom_kills"] = or_unknown(self._node.oom_kills())
        with self._lock:
            self._write_locked(**changes)

    # --- the end -------------------------------------------------------------------------------

    def close(self, *, reported: bool = False, exit_code: int = UNKNOWN) -> Slot | None:
        """Mark the record closed (or reported, when the process reported its own death) and
        remove it; returns its last values. Once: later calls do nothing."""
        if self._owner != _pid or self._updates < 0:
            return None
        with self._lock:
            state = RecordState.REPORTED if reported else RecordState.CLOSED
            self._write_locked(state=state, exit_code=exit_code)
            last = self.last()
            self._updates = -1  # closed: no more writes
        self.record.remove()
        self._close_files()
        return last

    def last(self) -> Slot:
        """The latest values (the seq is the record's, not kept here)."""
        return Slot(**self._values)

    def forget_in_child(self) -> None:
        """In a forked child: drop the copies of the descriptor and the mapping (the parent
        keeps its record and its lock)."""
        self._updates = -1
        self.record.release()
        self._close_files()

    def _close_files(self) -> None:
        self._status.close()
        for evidence in (self._cgroup, self._node):
            if evidence is not None:
                evidence.close()
