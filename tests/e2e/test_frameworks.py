"""The frameworks trainers use, from PyPI, on the CPU, each saving a checkpoint and resuming from
it (tiny models made here, nothing downloaded), instrumented with no code change:

- the Hugging Face Trainer under torchrun (2 ranks): one identity per rank, a span for every
  file of the resume (the model's safetensors, the optimizer, the scheduler, the rank's RNG
  state), and the same losses as without yeto-otel;
- the Hugging Face Trainer under `accelerate launch` (one process): the launcher silent, the
  trainer a plain process with the resume's spans;
- PyTorch Lightning under its own DDP launcher (rank 0 is the process started, whose rank
  appears once its group exists; Lightning starts rank 1 itself, without RANK) and under
  torchrun: one identity per rank, the checkpoint's load traced on each.

docs/frameworks.md shows these commands.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from launcher_jobs import HERE, HOST, Job, instrument, rank_ids, run

HF_TRAINER = HERE / "hf_trainer.py"
LIGHTNING_TRAINER = HERE / "lightning_ddp_trainer.py"
PHASES = ("train", "resume")


def _beside_python(name: str) -> str:
    path = shutil.which(name, path=os.path.dirname(sys.executable))
    assert path, f"{name} is not installed beside {sys.executable} (the [test] extra)"
    return path


def _trainers(out: Path) -> dict[tuple[str, int], dict]:
    """(phase, rank) -> what that process wrote."""
    found = {}
    for path in out.glob("*.json"):
        phase = path.name.split("-", 1)[0]
        summary = json.loads(path.read_text())
        found[(phase, summary["rank"])] = summary
    return found


def _loads(data: dict) -> set[tuple[str, str]]:
    """(span name, file name) of each load span."""
    return {(s.name, os.path.basename(str(v))) for s in data["spans"]
            for k, v in s.attributes.items() if k.endswith(".path")}


def _pids(job: Job) -> dict[str, set[int]]:
    return {identity: set(data["pids"]) for identity, data in job.identities().items()}


def test_hugging_face_trainer_under_torchrun(tmp_path):
    pytest.importorskip("transformers")
    torchrun = _beside_python("torchrun")
    job = Job.make(tmp_path / "instrumented", "hf-torchrun")
    for phase in PHASES:
        run([instrument(), torchrun, "--standalone", "--nproc_per_node=2", str(HF_TRAINER),
             str(job.out), phase], job.env(), job.root)
    bare = tmp_path / "bare"
    (bare / "out").mkdir(parents=True)
    run([torchrun, "--standalone", "--nproc_per_node=2", str(HF_TRAINER), str(bare / "out"),
         "train"], job.env(), bare)
    trainers = _trainers(job.out)
    assert sorted(trainers) == [(p, r) for p in ("resume", "train") for r in (0, 1)]
    assert _pids(job) == {f"{HOST}/rank-{r}": {trainers[(p, r)]["pid"] for p in PHASES}
                          for r in (0, 1)}
    identities = job.identities()
    for rank in (0, 1):
        assert {("safetensors.load_file", "model.safetensors"), ("torch.load", "optimizer.pt"),
                ("torch.load", "scheduler.pt"), ("torch.load", f"rng_state_{rank}.pth")} \
            <= _loads(identities[f"{HOST}/rank-{rank}"])
    # the same training with and without yeto-otel
    assert {r: trainers[("train", r)]["loss"] for r in (0, 1)} \
        == {r: t["loss"] for (p, r), t in _trainers(bare / "out").items()}


def test_hugging_face_trainer_under_accelerate_launch(tmp_path):
    pytest.importorskip("transformers")
    accelerate = _beside_python("accelerate")
    job = Job.make(tmp_path, "hf-accelerate")
    for phase in PHASES:
        run([instrument(), accelerate, "launch", "--cpu", "--num_processes", "1",
             "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
             str(HF_TRAINER), str(job.out), phase], job.env(), job.root)
    trainers = _trainers(job.out)
    # accelerate launch trains nothing and says nothing; its trainer is a plain process
    pids = {phase: trainers[(phase, 0)]["pid"] for phase in PHASES}
    assert _pids(job) == {f"{HOST}/pid-{pid}": {pid} for pid in pids.values()}
    resumed = job.identities()[f"{HOST}/pid-{pids['resume']}"]
    assert {("safetensors.load_file", "model.safetensors"), ("torch.load", "optimizer.pt"),
            ("torch.load", "rng_state.pth")} <= _loads(resumed)


@pytest.mark.parametrize("launcher", ["its own", "torchrun"])
def test_lightning(tmp_path, launcher):
    pytest.importorskip("pytorch_lightning")
    job = Job.make(tmp_path, "lightning")
    for phase in PHASES:
        command = [sys.executable] if launcher == "its own" else [
            _beside_python("torchrun"), "--standalone", "--nproc_per_node=2"]
        run([instrument(), *command, str(LIGHTNING_TRAINER), str(job.out), phase], job.env(),
            job.root)
    trainers = _trainers(job.out)
    assert sorted(trainers) == [(p, r) for p in ("resume", "train") for r in (0, 1)]
    if launcher == "its own":  # Lightning started rank 1 itself, without RANK
        assert trainers[("train", 1)]["env"]["RANK"] is None
    pids = _pids(job)
    ranks = {f"{HOST}/rank-{r}": {trainers[(p, r)]["pid"] for p in PHASES} for r in (0, 1)}
    assert {i: p for i, p in pids.items() if i in ranks} == ranks
    # anything else is a rank 0 before its group existed, under its pid
    before = {f"{HOST}/pid-{trainers[(p, 0)]['pid']}" for p in PHASES}
    assert set(pids) - set(ranks) <= (before if launcher == "its own" else set()), pids
    assert set(pids) >= rank_ids(2)
    identities = job.identities()
    for rank in (0, 1):
        assert ("torch.load", "last.ckpt") in _loads(identities[f"{HOST}/rank-{rank}"])
