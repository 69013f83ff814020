"""Real PyTorch Lightning, its own DDP launcher (`python train.py`, devices=2, on the CPU):
the process started is rank 0, whose rank appears only once its process group exists, and
Lightning starts rank 1 itself with LOCAL_RANK, NODE_RANK and WORLD_SIZE but no RANK. Each
must report as its rank: rank 1 from the start, rank 0 from its group on (before that, as the
plain process it was)."""

from __future__ import annotations

import sys

import pytest

from launcher_jobs import HERE, HOST, Job, instrument, rank_ids, run

pytest.importorskip("pytorch_lightning")


def test_lightnings_own_launcher_gives_each_rank_its_identity(tmp_path):
    job = Job.make(tmp_path, "lightning")
    run([instrument(), sys.executable, str(HERE / "lightning_ddp_trainer.py"), str(job.out)],
        job.env(), tmp_path)
    trainers = {t["rank"]: t for t in job.trainers()}
    assert sorted(trainers) == [0, 1] and trainers[1]["env"]["LOCAL_RANK"] == "1"
    pids = {identity: set(data["pids"]) for identity, data in job.identities().items()}
    ranks = {f"{HOST}/rank-{rank}": {t["pid"]} for rank, t in trainers.items()}
    assert {i: p for i, p in pids.items() if i in ranks} == ranks
    # anything else is rank 0 before its group existed, under its pid
    rest = set(pids) - set(ranks)
    assert rest <= {f"{HOST}/pid-{trainers[0]['pid']}"}, pids
    assert set(pids) >= rank_ids(2)
