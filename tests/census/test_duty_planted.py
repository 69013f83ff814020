"""Something planted where a duty's lock goes (the lock directory is world-writable, the names
are predictable): a FIFO, a symbolic link, a directory or another user's file at a lock file's
path, or a per-user lock directory that is not ours alone. Each is refused: `held()` answers
False at once (a FIFO never blocks it), the error is counted on every call and logged once
naming the path and what was found, and the census exports everything else."""

from __future__ import annotations

import logging
import math
import os
import stat
import threading
import time
import uuid
from pathlib import Path

import pytest

from census_harness import census_on_sdk, collected, fixture_cgroup
from required_components import missing
from yeto_otel.census import (CENSUS, CENSUS_ERRORS, CGROUP_INFO, DUTY_ERROR_SOURCE, Duty,
                              NodeDuty, node_duty_key)
from yeto_otel.proc import locate_memory_cgroup

CALLS = 50
BOUND_S = 10.0  # generous on a loaded machine; the refusal itself takes microseconds
OTHER_UID = 65534  # nobody


def _key() -> str:
    return f"test-{uuid.uuid4().hex}"


def _private_dir(lock_dir: Path) -> Path:
    return lock_dir / f"yeto-otel-{os.geteuid()}"


def _ours_0700(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)  # whatever the umask
    return path


def _needs_root() -> None:
    if os.geteuid() != 0:
        missing("root (to plant a file of another user)", "sudo python -m pytest ...")


def _release_fifo_openers(path: str) -> None:
    """Open the FIFO for writing once, so that a reader blocked opening it returns."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def _within_bound(calls, *, fifos: tuple[str, ...] = ()):
    """`calls()` in a thread, which must end within BOUND_S; if it does not (an open blocked on
    a FIFO), the FIFOs are opened for writing to let it go and the test fails."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(calls()), daemon=True)
    worker.start()
    worker.join(BOUND_S)
    blocked = worker.is_alive()
    deadline = time.monotonic() + BOUND_S
    while worker.is_alive() and time.monotonic() < deadline:  # it may block on each in turn
        for fifo in fifos:
            _release_fifo_openers(fifo)
        worker.join(0.05)
    assert not blocked, f"blocked for more than {BOUND_S} s on something planted at a lock path"
    return result[0]


def _assert_refused(duty: Duty, caplog, *, foreign: Path, found: str,
                    fifos: tuple[str, ...] = ()) -> None:
    """CALLS calls of `held()`: all False within the bound, each counted, one warning naming
    the foreign path and what was found there."""
    with caplog.at_level(logging.WARNING, logger="yeto_otel.census"):
        answers = _within_bound(lambda: [duty.held() for _ in range(CALLS)], fifos=fifos)
    assert answers == [False] * CALLS
    assert duty.failed
    assert duty.ledger.counts() == {DUTY_ERROR_SOURCE: CALLS}
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert str(foreign) in warnings[0] and found in warnings[0], warnings[0]
    assert "refused" in warnings[0], warnings[0]


def _plant_at_lock_path(duty: Duty, plant) -> Path:
    path = Path(duty.path)
    _ours_0700(path.parent)
    plant(path)
    return path


def test_a_fifo_at_the_lock_path_never_blocks_and_the_duty_is_taken_once_it_is_gone(
        tmp_path, caplog):
    duty = Duty(_key(), directory=str(tmp_path))
    fifo = _plant_at_lock_path(duty, os.mkfifo)
    try:
        _assert_refused(duty, caplog, foreign=fifo, found="a FIFO", fifos=(str(fifo),))
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # refused, never removed or changed
        fifo.unlink()
        assert duty.held() and not duty.failed  # a later collection elects as usual
    finally:
        duty.close()


def test_a_symlink_at_the_lock_path_is_refused_never_followed(tmp_path, caplog):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    duty = Duty(_key(), directory=str(tmp_path))
    link = _plant_at_lock_path(duty, lambda p: p.symlink_to(target))
    _assert_refused(duty, caplog, foreign=link, found="a symbolic link")
    assert link.is_symlink()


def _character_device(path: Path) -> None:
    _needs_root()
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # what /dev/null is


@pytest.mark.parametrize("plant, found", [(Path.mkdir, "a directory"),
                                          (_character_device, "a character device")],
                         ids=["directory", "device"])
def test_a_directory_or_a_device_at_the_lock_path_is_refused(tmp_path, caplog, plant, found):
    duty = Duty(_key(), directory=str(tmp_path))
    planted = _plant_at_lock_path(duty, plant)
    _assert_refused(duty, caplog, foreign=planted, found=found)


def test_a_lock_file_of_another_user_is_refused(tmp_path, caplog):
    _needs_root()
    duty = Duty(_key(), directory=str(tmp_path))

    def plant(path: Path) -> None:
        path.write_bytes(b"")
        os.chown(path, OTHER_UID, OTHER_UID)

    planted = _plant_at_lock_path(duty, plant)
    _assert_refused(duty, caplog, foreign=planted, found=f"uid {OTHER_UID}")


def test_a_per_user_lock_directory_that_is_a_symlink_is_refused(tmp_path, caplog):
    target = _ours_0700(tmp_path / "elsewhere")  # even a private directory of ours
    _private_dir(tmp_path).symlink_to(target)
    duty = Duty(_key(), directory=str(tmp_path))
    _assert_refused(duty, caplog, foreign=_private_dir(tmp_path), found="a symbolic link")
    assert list(target.iterdir()) == []  # nothing made through the link


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o750, 0o701], ids=oct)
def test_a_per_user_lock_directory_open_to_group_or_others_is_refused(tmp_path, caplog, mode):
    planted = _ours_0700(_private_dir(tmp_path))
    planted.chmod(mode)
    duty = Duty(_key(), directory=str(tmp_path))
    _assert_refused(duty, caplog, foreign=planted, found=f"mode {mode:04o}")
    assert list(planted.iterdir()) == []
    assert stat.S_IMODE(planted.stat().st_mode) == mode  # left as found


def test_a_per_user_lock_directory_of_another_user_is_refused(tmp_path, caplog):
    _needs_root()
    planted = _ours_0700(_private_dir(tmp_path))
    os.chown(planted, OTHER_UID, OTHER_UID)
    duty = Duty(_key(), directory=str(tmp_path))
    _assert_refused(duty, caplog, foreign=planted, found=f"uid {OTHER_UID}")
    assert list(planted.iterdir()) == []


def test_a_fifo_at_the_per_user_directory_path_is_refused(tmp_path, caplog):
    os.mkfifo(_private_dir(tmp_path))
    duty = Duty(_key(), directory=str(tmp_path))
    _assert_refused(duty, caplog, foreign=_private_dir(tmp_path), found="a FIFO",
                    fifos=(str(_private_dir(tmp_path)),))


NODE_NAMES = {m.name for m in CENSUS if m.node}
PROCESS_NAMES = {"yeto.process.memory.rss", "yeto.process.memory.anonymous"}


@pytest.mark.parametrize("local_rank_0", [True, False])
def test_fifos_at_the_lock_paths_block_no_collection_and_the_rest_is_exported(
        tmp_path, caplog, local_rank_0):
    """The node's and the cgroup's locks are FIFOs: every collection returns within the bound
    with the process's census, the cgroup's path and the duty errors; the node's metrics by
    the fallback rule (local rank 0) only; the cgroup's numbers by nobody."""
    cgroup = fixture_cgroup("v2_pod", lock_dir=tmp_path)
    cgroup_key = (f"{node_duty_key(cgroup.proc_root)}/"
                  f"{locate_memory_cgroup(cgroup.proc_root, fs_root=cgroup.fs_root).identity}")
    _, (metric_reader,), census = census_on_sdk(cgroup=cgroup, smaps_budget_percent=math.inf)
    reader = census.reader
    reader.node_duty = NodeDuty(node_duty_key(), fallback=local_rank_0,
                                directory=str(tmp_path), ledger=reader.ledger)
    fifos = tuple(str(_plant_at_lock_path(Duty(key, directory=str(tmp_path)), os.mkfifo))
                  for key in (node_duty_key(), cgroup_key))
    with caplog.at_level(logging.WARNING, logger="yeto_otel.census"):
        collections = _within_bound(lambda: [collected(metric_reader) for _ in range(3)],
                                    fifos=fifos)
    for metrics in collections:
        assert PROCESS_NAMES <= set(metrics)
        assert CGROUP_INFO.name in metrics and "yeto.cgroup.memory.usage" not in metrics
        assert (NODE_NAMES <= set(metrics)) if local_rank_0 else not NODE_NAMES & set(metrics)
    errors = {p.attributes["source"]: p.value
              for p in collections[-1][CENSUS_ERRORS.name].data.data_points}
    assert errors[DUTY_ERROR_SOURCE] > 0
    assert reader.ledger.counts()[DUTY_ERROR_SOURCE] == 6  # both duties, every collection
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings  # one per duty
    for fifo in fifos:
        assert len([w for w in warnings if fifo in w and "a FIFO" in w]) == 1, (fifo, warnings)
    census.stop()
    reader.close()
