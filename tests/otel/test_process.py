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
    # Hugging Face's launcher trains nothing itself; its other subcommands are tools
    ([PYTHON, "/venv/bin/accelerate", "launch", "--cpu", "train.py"], True),
    ([PYTHON, "-m", "accelerate.commands.launch", "train.py"], True),
    ([PYTHON, "-m", "accelerate.commands.accelerate_cli", "launch", "train.py"], True),
    ([PYTHON, "/venv/bin/accelerate", "env"], False),
    ([PYTHON, "/venv/bin/accelerate"], False),
    # DeepSpeed's runner and its per-node launcher
    ([PYTHON, "/venv/bin/deepspeed", "--num_gpus=8", "train.py"], True),
    ([PYTHON, "-m", "deepspeed.launcher.launch", "--world_info=e30=", "train.py"], True),
])
def test_launchers_are_those_that_train_nothing_themselves(argv, launcher):
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
    # torchrun is silent whatever it inherits: RANK from a PyTorchJob pod, srun's task id
    (Settings(rank=0, world_size=2), [PYTHON, "/venv/bin/torchrun", "train.py"], Role.LAUNCHER),
    (Settings(rank=1, rank_source="slurm"), [PYTHON, "-m", "torch.distributed.run", "t.py"],
     Role.LAUNCHER),
    # a rank of Lightning's own launcher, started by its rank 0 before that knew its rank
    (Settings(rank=1, local_rank=1, rank_source="lightning", identity_owner=(None, 1)), TRAIN,
     Role.RANK),
    # beyond node 0 its rank is pending: it reports, and its own children stay silent
    (Settings(local_rank=1, rank_source="lightning", rank_pending=True,
              identity_owner=(None, 1)), TRAIN, Role.PROCESS),
    (Settings(local_rank=1, rank_source="lightning", rank_pending=True,
              identity_owner=("local-1", 1)), TRAIN, Role.CHILD),
])
def test_classification(settings, argv, role):
    assert _process.classify(settings, pid=os.getpid(), argv=argv) is role


@pytest.mark.parametrize("settings, written", [
    (Settings(rank=3), f"3:{os.getpid()}"),
    (Settings(), f"-:{os.getpid()}"),
    (Settings(local_rank=2, rank_pending=True), f"local-2:{os.getpid()}"),
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


LIGHTNING_CHILD = {"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2"}


@pytest.mark.parametrize("launched, owner, role", [
    # Lightning's rank 1, started by rank 0 (a plain process until its process group exists)
    (LIGHTNING_CHILD, "-:1", "rank"),
    # rank 0's own helper: Lightning set LOCAL_RANK=0 in rank 0's environment after its start
    ({**LIGHTNING_CHILD, "LOCAL_RANK": "0"}, "-:1", "child"),
    # rank 1's helper
    (LIGHTNING_CHILD, "1:1", "child"),
    # the process an `accelerate launch` (a silent launcher: no owner) started
    ({"ACCELERATE_USE_CPU": "true"}, "", "process"),
    # the batch step of sbatch: task 0 of no step, a plain process
    ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "1"},
     "", "process"),
    # a task of `srun -n 4`
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "2", "SLURM_LOCALID": "2",
      "SLURM_NTASKS": "4"}, "", "rank"),
])
def test_a_process_a_launcher_started_is_a_rank_when_its_environment_says_so(launched, owner,
                                                                            role):
    code = ("from yeto_otel.otel import claim; from yeto_otel.settings import load_settings; "
            "print(claim(load_settings()).value)")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "YETO_", "SLURM_", "OMPI_", "PMI"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK")}
    env.update(launched, **{IDENTITY_OWNER: owner})
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    assert result.stdout.strip() == role
