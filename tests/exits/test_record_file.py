"""Who may read an exit record, and that each death is reported exactly once: a living owner's
record cannot be claimed, a dead owner's is claimed by one of the observers looking at the same
moment, and what is left half-made or foreign is handled without a report or a hang."""

from __future__ import annotations

import json
import os
import signal

from opentelemetry.sdk.trace import TracerProvider

from record_children import OBSERVER, OWNER, start
from yeto_otel.census._lock_files import private_lock_dir
from yeto_otel.exits import ExitObserver, RecordState, note_exit_status
from yeto_otel.exits._record_file import claim_record, record_names


def _dead_owner(lock_dir, instance="host/rank-5") -> int:
    owner = start(OWNER, str(lock_dir), instance)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=30)
    return owner.pid


def test_a_living_owners_record_cannot_be_claimed(tmp_path):
    owner = start(OWNER, str(tmp_path), "host/rank-5")
    try:
        (name,) = record_names(str(tmp_path), os.geteuid())
        assert claim_record(str(tmp_path), os.geteuid(), name) is None
        assert ExitObserver(str(tmp_path), TracerProvider().get_tracer("t")).look() == []
    finally:
        owner.communicate("done\n", timeout=30)
    assert owner.returncode == 0
    # its owner is gone but never closed it (no exit handler here): now it is claimable
    claimed = claim_record(str(tmp_path), os.geteuid(), name)
    assert claimed.header.pid == owner.pid and claimed.slot.state is RecordState.RUNNING
    claimed.finish(mark_reported=True)
    assert record_names(str(tmp_path), os.geteuid()) == []


def test_observers_looking_at_once_report_a_death_once(tmp_path):
    pid = _dead_owner(tmp_path)
    observers = [start(OBSERVER, str(tmp_path)) for _ in range(6)]
    for observer in observers:
        observer.stdin.write("go\n")
        observer.stdin.flush()
    reports = [r for o in observers for r in json.loads(o.communicate(timeout=60)[0])]
    assert reports == [["host/rank-5", "unknown", "dcp.save", 41]], pid
    assert record_names(str(tmp_path), os.geteuid()) == []


def test_the_report_holds_the_last_record(tmp_path, provider, exporter):
    _dead_owner(tmp_path, "slurm-7/rank-5")
    observer = ExitObserver(str(tmp_path), provider.get_tracer("t"))
    (report,) = observer.look(instance_id="slurm-7/rank-5")
    (span,) = exporter.get_finished_spans()
    assert span.name == "yeto.rank.exit"
    assert {k: span.attributes[k] for k in ("yeto.rank", "yeto.exit.phase", "yeto.exit.step",
                                            "yeto.exit.cause", "yeto.exit.observer")} == {
        "yeto.rank": 5, "yeto.exit.phase": "dcp.save", "yeto.exit.step": 41,
        "yeto.exit.cause": "unknown", "yeto.exit.observer": "node"}
    assert span.start_time == report.slot.written_ns and span.end_time == report.seen_ns
    assert not span.status.is_ok
    assert observer.counts == {("unknown", "dcp.save"): 1}
    assert observer.deaths == [{
        "cause": "unknown", "phase": "dcp.save", "yeto.exit.rank": "5", "yeto.exit.job.id": "",
        "yeto.exit.service.name": "", "yeto.exit.step": "41", "yeto.exit.process.pid": str(report.header.pid)}]


def test_another_identitys_record_is_left_to_its_own(tmp_path):
    _dead_owner(tmp_path, "host/rank-5")
    observer = ExitObserver(str(tmp_path), TracerProvider().get_tracer("t"))
    assert observer.look(instance_id="host/rank-6") == []
    assert len(observer.look(instance_id="host/rank-5")) == 1


def test_a_draft_never_published_is_removed_without_a_report(tmp_path):
    directory = private_lock_dir(str(tmp_path), os.geteuid())
    os.makedirs(directory, mode=0o700)
    with open(os.path.join(directory, "exit-99-0123456789abcdef.new"), "wb") as f:
        f.write(b"\0" * 4096)
    assert ExitObserver(str(tmp_path), TracerProvider().get_tracer("t")).look() == []
    assert record_names(str(tmp_path), os.geteuid()) == []


def test_a_fifo_at_a_record_name_is_refused_not_waited_on(tmp_path, caplog):
    directory = private_lock_dir(str(tmp_path), os.geteuid())
    os.makedirs(directory, mode=0o700)
    os.mkfifo(os.path.join(directory, "exit-1-0123456789abcdef.rec"))
    observer = ExitObserver(str(tmp_path), TracerProvider().get_tracer("t"))
    assert observer.look() == [] and observer.look() == []
    said = [r for r in caplog.records if "cannot look at exit records" in r.getMessage()]
    assert len(said) == 1 and "a FIFO" in said[0].getMessage()


def test_an_exit_status_its_parent_wrote_decides_the_cause(tmp_path):
    owner = start(OWNER, str(tmp_path), "host/rank-5")
    os.kill(owner.pid, signal.SIGTERM)
    status = owner.wait(timeout=30)
    assert status == -signal.SIGTERM
    # the parent (a launcher, here the test) saw it, and says so in the record
    assert note_exit_status(str(tmp_path), os.geteuid(), owner.pid, -status, 0)
    assert not note_exit_status(str(tmp_path), os.geteuid(), owner.pid + 10**6, 9, 0)
    (report,) = ExitObserver(str(tmp_path), TracerProvider().get_tracer("t")).look()
    assert (report.verdict.cause.value, report.verdict.signal) == ("signal", "SIGTERM")
    assert "parent saw it killed by SIGTERM" in report.verdict.why
