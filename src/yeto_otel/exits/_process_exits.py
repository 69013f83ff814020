"""The exit record of this process, and its observer: started once per reporting process.

`start_exit_records` makes the record (identity, cgroup, start time), looks at once for
earlier launches of the same identity that died unreported, and arranges for the end:

- the interpreter's exit closes the record: nothing is reported for a process that exits;
- an uncaught exception (the interpreter exits with 1, or of SIGINT for KeyboardInterrupt) is
  reported by the process itself at that exit, as a death in the phase and at the step it was
  in, before its telemetry's exit flush (atexit runs in reverse order of registration, and the
  flush was registered when the SDK was set up, before this);
- a death that skips the interpreter's exit (SIGKILL, the OOM killer, a fatal signal,
  `os._exit`) leaves the record running: an observer reports it (`_observer`).

Everything here is best effort: a record that cannot be made (no lock directory, a foreign
file) is logged once and the process runs on without one.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import time

from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME
from opentelemetry.trace import Tracer

from ..census import Duty, ForeignLockPath, node_duty_key, set_step_hook
from ..proc import CgroupNotFound, locate_memory_cgroup, process_start_ns
from ..settings import Settings
from ._cause import Cause, Verdict, signal_name
from ._evidence import CgroupEvidence, NodeEvidence
from ._layout import UNKNOWN, Header, or_unknown
from ._observer import ExitObserver, Observer
from ._oom_watch import start_oom_watch
from ._record_file import OwnedRecord
from ._recorder import ExitRecorder

__all__ = ["ProcessExits", "note_step", "process_exits", "start_exit_records"]

_log = logging.getLogger(__name__)


class ProcessExits:
    """This process's recorder, its observer and the exits duty of its host."""

    def __init__(self, recorder: ExitRecorder, observer: ExitObserver, duty: Duty):
        self.recorder = recorder
        self.observer = observer
        self.duty = duty
        self.pid = os.getpid()
        self.exiting = False

    def collect(self) -> None:
        """Once per collection: this record's memory and counts; every dead record of the host
        when this process holds the exits duty. Not in the last collection of the exit flush:
        a span made then would race the tracer's shutdown (`at_exit` looks before it)."""
        if os.getpid() != self.pid or self.exiting:
            return
        self.recorder.refresh()
        if self.duty.held():
            self.observer.look(Observer.NODE)

    def at_exit(self) -> None:
        if os.getpid() != self.pid or self.exiting:
            return
        self.exiting = True
        if self.duty.held():  # a last look, whose spans the exit flush then exports
            self.observer.look(Observer.NODE)
        failure = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        verdict = _verdict_of(failure)
        if verdict is None:
            self.recorder.close()
            return
        header = self.recorder.header
        slot = self.recorder.close(reported=True, exit_code=verdict.code or UNKNOWN)
        if slot is not None:
            self.observer.report_self(header, slot, verdict)


def _verdict_of(failure: BaseException | None) -> Verdict | None:
    if failure is None or isinstance(failure, SystemExit):
        return None  # a chosen exit: sys.exit(n) is the program's own decision
    if isinstance(failure, KeyboardInterrupt):
        # The interpreter ends itself with SIGINT after an uncaught KeyboardInterrupt.
        return Verdict(Cause.SIGNAL, signal_name(signal.SIGINT),
                       why="uncaught KeyboardInterrupt")
    return Verdict(Cause.EXIT_CODE, code=1, why=f"uncaught {type(failure).__name__}: "
                                                f"{str(failure)[:200]}")


_exits: ProcessExits | None = None


def process_exits() -> ProcessExits | None:
    """This process's exit records, when it started them (a forked copy's are not its)."""
    return _exits if _exits is not None and _exits.pid == os.getpid() else None


def note_step(step: object) -> None:
    """Record the step the trainer is at (its last logged step): a rank that dies is reported
    with it. A store into memory; nothing when no record is kept or `step` is no integer."""
    exits = _exits
    if exits is not None and isinstance(step, int) and not isinstance(step, bool):
        exits.recorder.note_step(step)


def _header(settings: Settings, attributes: dict, cgroup) -> Header:
    job = settings.job
    launches = next((n for n in (job.slurm_restart_count, job.torchelastic_restart_count)
                     if n is not None), UNKNOWN)
    return Header(pid=os.getpid(), rank=or_unknown(settings.rank),
                  local_rank=or_unknown(settings.local_rank),
                  world_size=or_unknown(settings.world_size), launch_count=launches,
                  process_start_ns=process_start_ns() or 0,
                  record_start_ns=time.time_ns(),
                  instance_id=str(attributes.get(SERVICE_INSTANCE_ID, "")),
                  job_id=job.job_id or "", service_name=str(attributes.get(SERVICE_NAME, "")),
                  cgroup_dir=cgroup.directory if cgroup else "",
                  cgroup_version=cgroup.version if cgroup else 0)


def start_exit_records(settings: Settings, attributes: dict, tracer: Tracer, *,
                       proc_root: str = "/proc") -> ProcessExits | None:
    """Start this process's exit record and observer (once); None when it cannot be made."""
    global _exits
    if process_exits() is not None:
        return _exits
    try:
        cgroup = locate_memory_cgroup(proc_root)
    except CgroupNotFound:
        cgroup = None
    header = _header(settings, attributes, cgroup)
    try:
        record = OwnedRecord(settings.lock_dir, os.geteuid(), header.pid, header.instance_id)
    except (OSError, ForeignLockPath) as exc:
        _log.error("yeto-otel: no exit record for this process (its death would go "
                   "unreported): %s", exc)
        return None
    recorder = ExitRecorder(record, header, proc_root=proc_root,
                            cgroup=CgroupEvidence(cgroup.directory, cgroup.version)
                            if cgroup else None, node=NodeEvidence(proc_root))
    recorder.refresh()  # the counts as of now: a death before the first collection compares
    if cgroup is not None:  # and at once when the cgroup runs out (`_oom_watch`)
        start_oom_watch(cgroup.directory, cgroup.version, recorder.refresh)
    observer = ExitObserver(settings.lock_dir, tracer, node=NodeEvidence(proc_root))
    duty = Duty("exits:" + node_duty_key(proc_root), directory=settings.lock_dir)
    _exits = ProcessExits(recorder, observer, duty)
    set_step_hook(note_step)
    observer.look(Observer.NEXT_LAUNCH, instance_id=header.instance_id)
    atexit.register(_exits.at_exit)
    return _exits


def _forget_in_child() -> None:
    exits = _exits
    if exits is not None:
        exits.recorder.forget_in_child()


os.register_at_fork(after_in_child=_forget_in_child)
