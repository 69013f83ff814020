"""Rank identity as resource attributes: one service.instance.id per rank."""

from __future__ import annotations

import os
import socket

import pytest

from yeto_otel.otel import (
    YetoResourceDetector,
    rank_resource_attributes,
    user_resource_attributes,
)
from yeto_otel.settings import Settings, load_settings


def test_ranked_process():
    attrs = rank_resource_attributes(Settings(rank=11, local_rank=3, world_size=16),
                                     hostname="node-a", pid=4242)
    assert attrs == {"host.name": "node-a", "service.instance.id": "node-a/rank-11",
                     "yeto.rank": 11, "yeto.local_rank": 3, "yeto.world_size": 16,
                     "yeto.process.role": "rank"}


def test_instance_id_is_distinct_per_rank_and_host():
    ids = {rank_resource_attributes(Settings(rank=r, local_rank=r % 8), hostname=h)
           ["service.instance.id"] for h in ("node-a", "node-b") for r in range(16)}
    assert len(ids) == 32


def test_instance_id_is_stable_across_restarts_of_a_rank():
    # a restarted rank has a new pid but must continue the same series
    first = rank_resource_attributes(Settings(rank=2), hostname="h", pid=100)
    again = rank_resource_attributes(Settings(rank=2), hostname="h", pid=200)
    assert first["service.instance.id"] == again["service.instance.id"] == "h/rank-2"


def test_in_a_job_the_instance_id_is_the_jobs_rank_on_any_host():
    """Two jobs on one host never share an id; a requeued job that lands elsewhere keeps it."""
    slurm = {"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3",
             "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"}
    first = rank_resource_attributes(load_settings(slurm), hostname="node-a", pid=100)
    requeued = rank_resource_attributes(load_settings({**slurm, "SLURM_RESTART_COUNT": "1"}),
                                        hostname="node-b", pid=200)
    other_job = rank_resource_attributes(load_settings({**slurm, "SLURM_JOB_ID": "42"}),
                                         hostname="node-a", pid=300)
    assert first["service.instance.id"] == requeued["service.instance.id"] == "slurm-41/rank-3"
    assert other_job["service.instance.id"] == "slurm-42/rank-3"
    assert {k: v for k, v in requeued.items() if k.startswith("yeto.")} == {
        "yeto.rank": 3, "yeto.local_rank": 1, "yeto.world_size": 4, "yeto.process.role": "rank",
        "yeto.job.id": "slurm-41", "yeto.launch.rank_source": "slurm",
        "yeto.launch.slurm.job_id": "41", "yeto.launch.slurm.step_id": "0",
        "yeto.launch.slurm.restart_count": 1}
    # a process of the job without a rank (the batch step) stays a process of its host
    batch = rank_resource_attributes(load_settings({"SLURM_JOB_ID": "41", "SLURM_PROCID": "0"}),
                                     hostname="node-a", pid=7)
    assert batch["service.instance.id"] == "node-a/pid-7" and batch["yeto.job.id"] == "slurm-41"


def test_rank_zero_is_a_rank_not_unset():
    attrs = rank_resource_attributes(Settings(rank=0, local_rank=0, world_size=1), hostname="h",
                                     pid=9)
    assert attrs["service.instance.id"] == "h/rank-0"
    assert attrs["yeto.rank"] == 0 and attrs["yeto.local_rank"] == 0


def test_pid_based_without_rank():
    attrs = rank_resource_attributes(Settings(), hostname="h", pid=4242)
    assert attrs == {"host.name": "h", "service.instance.id": "h/pid-4242",
                     "yeto.process.role": "process"}
    assert not any(key.startswith("yeto.") for key in attrs if key != "yeto.process.role")


def test_pid_defaults_to_this_process():
    attrs = rank_resource_attributes(Settings(), hostname="h")
    assert attrs["service.instance.id"] == f"h/pid-{os.getpid()}"


def test_hostname_defaults_to_this_host():
    attrs = rank_resource_attributes(Settings(rank=1))
    assert attrs["host.name"] == socket.gethostname()
    assert attrs["service.instance.id"] == f"{socket.gethostname()}/rank-1"


@pytest.mark.parametrize("settings, expected_yeto", [
    (Settings(), {}),
    (Settings(rank=4), {"yeto.rank": 4}),
    (Settings(local_rank=2), {"yeto.local_rank": 2}),
    (Settings(world_size=8), {"yeto.world_size": 8}),
    (Settings(rank=4, world_size=8), {"yeto.rank": 4, "yeto.world_size": 8}),
])
def test_yeto_attributes_only_when_set(settings, expected_yeto):
    attrs = rank_resource_attributes(settings, hostname="h", pid=1)
    role = attrs.pop("yeto.process.role")  # always: a rank, or a process without RANK
    assert role == ("rank" if settings.rank is not None else "process")
    assert {k: v for k, v in attrs.items() if k.startswith("yeto.")} == expected_yeto


def test_without_rank_pids_keep_processes_apart():
    a = rank_resource_attributes(Settings(local_rank=0), hostname="h", pid=10)
    b = rank_resource_attributes(Settings(local_rank=1), hostname="h", pid=11)
    assert a["service.instance.id"] != b["service.instance.id"]


def test_detector_reads_the_settings(monkeypatch):
    monkeypatch.setenv("RANK", "6")
    monkeypatch.setenv("LOCAL_RANK", "6")
    monkeypatch.setenv("WORLD_SIZE", "8")
    attrs = dict(YetoResourceDetector().detect().attributes)
    assert attrs["service.instance.id"] == f"{socket.gethostname()}/rank-6"
    assert attrs["yeto.rank"] == 6 and attrs["yeto.world_size"] == 8
    assert attrs == rank_resource_attributes(load_settings())


def test_user_resource_attributes(monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=mine,team=infra")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "trainer")
    attrs = user_resource_attributes()
    assert attrs["service.instance.id"] == "mine"
    assert attrs["team"] == "infra"
    assert attrs["service.name"] == "trainer"
