"""Which process reports: a rank, a plain process, a launcher (silent), a child (silent), a
DataLoader worker; decided once per process and recorded for spawned children."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from forked import in_fork
from yeto_otel.otel import Role, claim, current_role, is_launcher, mark_worker, reporting_pid
from yeto_otel.otel import _process
from yeto_otel.settings import IDENTITY_OWNER, Settings, load_settings

PYTHON = "/usr/bin/python3"
TRAIN = [PYTHON, "train.py"]


@pytest.fixture(autouse=True)
def undecided(monkeypatch):
    """This test process starts undecided, with no owner recorded; both are restored after."""
    monkeypatch.setattr(_process, "_decided", None)
    monkeypatch.setenv(IDENTITY_OWNER, "")


@pytest.mark.parametrize("argv, launcher", [
    ([PYTHON, "/venv/bin/torchrun", "--standalone", "train.py"], True),
    ([PYTHON, "-m", "torch.distributed.run", "--nproc_per_node=8", "train.py"], True),
    ([PYTHON, "-u", "-m", "torch.distributed.launch", "train.py"], True),
    ([PYTHON, "train.py"], False),
    ([PYTHON, "-m", "mypkg.train"], False),
    ([PYTHON, "-c", "import torchrun"], False),
    ([PYTHON], False),
])
def test_launchers_are_torchrun_in_its_three_forms(argv, launcher):
    assert is_launcher(argv) is launcher


@pytest.mark.parametrize("settings, argv, role", [
    (Settings(rank=3), TRAIN, Role.RANK),
    (Settings(), TRAIN, Role.PROCESS),
    (Settings(), [PYTHON, "/venv/bin/torchrun", "train.py"], Role.LAUNCHER),
    # a rank's spawned child: the same RANK, owned by another pid
    (Settings(rank=3, identity_owner=(3, 1)), TRAIN, Role.CHILD),
    # the rank itself, seeing its own record
    (Settings(rank=3, identity_owner=(3, os.getpid())), TRAIN, Role.RANK),
    # a plain process's spawned child
    (Settings(identity_owner=(None, 1)), TRAIN, Role.CHILD),
    # a rank started by a process that reports too (another RANK, or none): a rank
    (Settings(rank=3, identity_owner=(2, 1)), TRAIN, Role.RANK),
    (Settings(rank=3, identity_owner=(None, 1)), TRAIN, Role.RANK),
])
def test_classification(settings, argv, role):
    assert _process.classify(settings, pid=os.getpid(), argv=argv) is role


@pytest.mark.parametrize("settings, written", [
    (Settings(rank=3), f"3:{os.getpid()}"),
    (Settings(), f"-:{os.getpid()}"),
])
def test_a_reporting_process_records_itself_for_its_children(settings, written):
    assert claim(settings, argv=TRAIN).reports
    assert os.environ[IDENTITY_OWNER] == written
    assert load_settings().identity_owner[1] == os.getpid()
    assert reporting_pid() == os.getpid()


def test_launchers_and_children_record_nothing():
    assert claim(Settings(), argv=[PYTHON, "/venv/bin/torchrun", "x.py"]) is Role.LAUNCHER
    assert os.environ[IDENTITY_OWNER] == ""
    assert reporting_pid() is None


def test_decided_once_per_process():
    assert claim(Settings(rank=1), argv=TRAIN) is Role.RANK
    assert claim(Settings(), argv=[PYTHON, "/venv/bin/torchrun"]) is Role.RANK
    assert current_role() is Role.RANK


def test_undecided_until_claimed():
    assert current_role() is None and reporting_pid() is None


def test_a_forked_child_is_a_child_whatever_it_was_forked_from():
    claim(Settings(rank=2), argv=TRAIN)

    def child():
        return (current_role(), claim(Settings(rank=2), argv=TRAIN), reporting_pid())

    assert in_fork(child) == (Role.CHILD, Role.CHILD, None)
    assert current_role() is Role.RANK  # the parent is untouched


def test_a_forked_dataloader_worker_reports_as_itself():
    claim(Settings(rank=2), argv=TRAIN)

    def worker():
        mark_worker()
        return current_role(), reporting_pid() == os.getpid()

    assert in_fork(worker) == (Role.DATALOADER_WORKER, True)


@pytest.mark.parametrize("owner, role", [("3:1", "child"), ("2:1", "rank"), ("-:1", "rank")])
def test_a_spawned_process_reads_the_record_it_inherited(owner, role):
    code = ("from yeto_otel.otel import claim; from yeto_otel.settings import load_settings; "
            "print(claim(load_settings()).value)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    env.update(RANK="3", **{IDENTITY_OWNER: owner})
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    assert result.stdout.strip() == role
