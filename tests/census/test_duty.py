"""Duty: one process at a time holds it, another takes it over when the holder dies (however),
a forked child never holds its parent's duty, each user elects its own holder, and a lock that
cannot be used is "not held", counted and logged once, never an exception (what is planted at a
lock's path: test_duty_planted.py)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from contenders import poll, started_contenders
from forked import in_fork
from required_components import missing
from small_disks import mount_tmpfs
from yeto_otel.census import DUTY_ERROR_SOURCE, Duty


@pytest.fixture
def contenders():
    with started_contenders() as start:
        yield start


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _key() -> str:
    return f"test-{uuid.uuid4().hex}"


def test_two_processes_exactly_one_holds_and_the_other_takes_over_after_kill_9(
        tmp_path, contenders):
    key = _key()
    a, b = contenders("duty", key, str(tmp_path)), contenders("duty", key, str(tmp_path))
    first = [a.holds(), b.holds()]
    assert first == [True, False]
    assert [a.holds(), b.holds()] == [True, False]  # held stays held; the other keeps asking
    a.kill()
    poll(b.holds, "the survivor takes the duty after the holder was killed with SIGKILL")
    c = contenders("duty", key, str(tmp_path))
    assert not c.holds()  # and now it is the survivor's alone


def test_a_forked_child_does_not_hold_nor_keep_its_dead_parents_duty(tmp_path, contenders):
    key = _key()
    parent = contenders("duty", key, str(tmp_path))
    assert parent.holds()
    child_pid, child_held = parent.ask("fork").split()
    try:
        assert child_held == "False"
        assert parent.holds()  # the child closing its copy did not free the parent's lock
        parent.kill()
        # The child is alive with everything it inherited; the duty must still be free.
        other = contenders("duty", key, str(tmp_path))
        poll(other.holds, "another process takes the duty while the dead holder's child lives")
        assert _alive(int(child_pid))
    finally:
        os.kill(int(child_pid), signal.SIGKILL)


def test_a_forked_child_of_this_process_does_not_hold(tmp_path):
    duty = Duty(_key(), directory=str(tmp_path))
    try:
        assert duty.held()
        assert in_fork(duty.held) is False
        assert duty.held()
    finally:
        duty.close()


def test_close_gives_the_duty_to_another(tmp_path, contenders):
    key = _key()
    mine = Duty(key, directory=str(tmp_path))
    other = contenders("duty", key, str(tmp_path))
    assert mine.held() and not other.holds()
    mine.close()
    assert other.holds()


def _assert_not_held_counted_logged_once(duty: Duty, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="yeto_otel.census"):
        answers = [duty.held() for _ in range(3)]
    assert answers == [False, False, False]
    assert duty.failed
    assert duty.ledger.counts() == {DUTY_ERROR_SOURCE: 3}
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert duty.path in warnings[0].getMessage()


def test_a_missing_lock_directory_is_not_held_counted_and_logged_once(tmp_path, caplog):
    _assert_not_held_counted_logged_once(Duty(_key(), directory=str(tmp_path / "absent")),
                                         caplog)


def test_a_read_only_lock_directory_is_not_held_counted_and_logged_once(tmp_path, caplog,
                                                                       request):
    lock_dir = mount_tmpfs(tmp_path / "ro", 1 << 20, request)
    subprocess.run(["mount", "-o", "remount,ro", str(lock_dir)], check=True)
    _assert_not_held_counted_logged_once(Duty(_key(), directory=str(lock_dir)), caplog)


@pytest.fixture
def sticky_shared_dir(request):
    """A world-writable sticky directory like /dev/shm that another user can reach (pytest's
    tmp dirs are private to their owner)."""
    path = Path(tempfile.mkdtemp(prefix="yeto-test-duty-", dir="/dev/shm"))
    path.chmod(0o1777)
    request.addfinalizer(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def _as_other_user(key: str, directory: str) -> dict:
    """In a forked child that becomes another user: two of its duties under `key` (its own
    election: the first holds, the second waits) and where its lock went."""
    os.setgid(65534)
    os.setuid(65534)  # this forked child is now a process of another user
    first, second = Duty(key, directory=directory), Duty(key, directory=directory)
    held = [first.held(), second.held()]
    private = os.stat(os.path.dirname(first.path))
    return {"held": held, "failed": [first.failed, second.failed], "path": first.path,
            "dir": (private.st_uid, stat.S_IMODE(private.st_mode))}


def test_two_users_on_one_host_each_elect_their_own_holder(sticky_shared_dir):
    """Elections are per user: a job of another user on the host neither contends for nor can
    hold this user's lock; it elects its own reporter in a directory of its own."""
    if os.geteuid() != 0:
        missing("root (to act as two users)", "sudo python -m pytest ...")
    key = _key()
    mine = Duty(key, directory=str(sticky_shared_dir))
    try:
        assert mine.held()
        other = in_fork(_as_other_user, key, str(sticky_shared_dir))
        assert other["held"] == [True, False] and other["failed"] == [False, False]
        assert other["path"] != mine.path
        assert other["path"].startswith(str(sticky_shared_dir / "yeto-otel-65534") + "/")
        assert other["dir"] == (65534, 0o700)
        assert mine.held()  # still ours
    finally:
        mine.close()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=oct)
def test_the_lock_directory_is_0700_and_the_lock_file_0600_whatever_the_umask(tmp_path,
                                                                              umask):
    old = os.umask(umask)
    try:
        duty = Duty(_key(), directory=str(tmp_path))
        assert duty.held()
    finally:
        os.umask(old)
    private = tmp_path / f"yeto-otel-{os.geteuid()}"
    assert Path(duty.path).parent == private
    for path, mode, kind in ((private, 0o700, stat.S_ISDIR), (Path(duty.path), 0o600,
                                                                stat.S_ISREG)):
        st = os.lstat(path)
        assert kind(st.st_mode) and st.st_uid == os.geteuid(), path
        assert stat.S_IMODE(st.st_mode) == mode, (path, oct(st.st_mode))
    duty.close()
