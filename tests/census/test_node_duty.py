"""Node metrics under YETO_OTEL_NODE_METRICS=auto: exactly one of the host's reporting processes
exports `yeto.node.*` at a time, whichever local rank it is, and another takes over at its next
collection when that one exits; without a usable lock (none, or one planted by someone else)
the first local rank reports."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest

from contenders import poll, started_contenders
from yeto_otel.census import CENSUS, DUTY_ERROR_SOURCE, CensusReader, node_duty_key
from yeto_otel.settings import Settings

NODE_METRICS = {m.name for m in CENSUS if m.node}


@pytest.fixture
def contenders():
    with started_contenders() as start:
        yield start


def _node_reporters(processes) -> list[bool]:
    """One collection in each process: which exported node metrics."""
    return [p.holds() for p in processes]


def test_exactly_one_process_exports_node_metrics_and_another_takes_over(tmp_path,
                                                                         contenders):
    lock_dir = str(tmp_path)
    ranks = [contenders("node", lock_dir, str(local_rank)) for local_rank in (2, 1, 0)]
    # The first to collect holds the node, whatever its local rank; the others export none.
    assert _node_reporters(ranks) == [True, False, False]
    assert _node_reporters(ranks) == [True, False, False]
    ranks[0].kill()
    survivors = ranks[1:]
    poll(lambda: any(_node_reporters(survivors)), "a survivor takes the node over")
    assert sum(_node_reporters(survivors)) == 1


def _reader(tmp_path, lock_dir: str, local_rank: int | None) -> CensusReader:
    return CensusReader.from_settings(Settings(host_allocator="none", lock_dir=lock_dir,
                                               local_rank=local_rank, smaps_budget_percent=0))


@pytest.mark.parametrize("local_rank, reports", [(0, True), (None, True), (3, False)])
def test_without_a_usable_lock_the_first_local_rank_reports(tmp_path, caplog, local_rank,
                                                           reports):
    reader = _reader(tmp_path, str(tmp_path / "absent"), local_rank)
    try:
        with caplog.at_level(logging.WARNING, logger="yeto_otel.census"):
            snapshots = [reader.take() for _ in range(2)]
        for snapshot in snapshots:
            found = NODE_METRICS & set(snapshot.values)
            assert found == (NODE_METRICS if reports else set())
        assert reader.ledger.counts()[DUTY_ERROR_SOURCE] >= 2
        node_lock = reader.node_duty.duty.path
        assert len([r for r in caplog.records
                    if r.levelno >= logging.WARNING and node_lock in r.getMessage()]) == 1
        assert DUTY_ERROR_SOURCE in reader.error_sources
    finally:
        reader.close()


def _symlinked_private_dir(lock_dir: Path) -> Path:
    target = lock_dir / "elsewhere"
    target.mkdir(mode=0o700)
    (lock_dir / f"yeto-otel-{os.geteuid()}").symlink_to(target)
    return lock_dir / f"yeto-otel-{os.geteuid()}"


def _open_private_dir(lock_dir: Path) -> Path:
    private = lock_dir / f"yeto-otel-{os.geteuid()}"
    private.mkdir()
    private.chmod(0o777)
    return private


@pytest.mark.parametrize("plant", [_symlinked_private_dir, _open_private_dir])
@pytest.mark.parametrize("local_rank, reports", [(0, True), (3, False)])
def test_a_planted_lock_directory_falls_back_to_the_first_local_rank(tmp_path, caplog, plant,
                                                                     local_rank, reports):
    planted = plant(tmp_path)
    reader = _reader(tmp_path, str(tmp_path), local_rank)
    try:
        with caplog.at_level(logging.WARNING, logger="yeto_otel.census"):
            snapshots = [reader.take() for _ in range(2)]
        for snapshot in snapshots:
            assert "yeto.process.memory.rss" in snapshot.values
            found = NODE_METRICS & set(snapshot.values)
            assert found == (NODE_METRICS if reports else set())
        assert reader.node_duty.duty.failed
        assert reader.ledger.counts()[DUTY_ERROR_SOURCE] >= 2
        node_key = repr(reader.node_duty.duty.key)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
                and node_key in r.getMessage()]
        assert len(said) == 1 and str(planted) in said[0] and "refused" in said[0], said
    finally:
        reader.close()


def test_in_process_readers_share_one_election_and_close_hands_it_over(tmp_path):
    first, second = (_reader(tmp_path, str(tmp_path), rank) for rank in (1, 0))
    try:
        assert NODE_METRICS <= set(first.take().values)
        assert not NODE_METRICS & set(second.take().values)  # local rank 0 waits its turn
        first.close()
        assert NODE_METRICS <= set(second.take().values)
    finally:
        first.close()
        second.close()


def test_on_and_off_need_no_election(tmp_path):
    on = [CensusReader.from_settings(Settings(host_allocator="none", node_metrics="on",
                                              lock_dir=str(tmp_path), local_rank=r))
          for r in (1, 2)]
    off = CensusReader.from_settings(Settings(host_allocator="none", node_metrics="off"))
    try:
        assert all(r.node_duty is None and NODE_METRICS <= set(r.take().values) for r in on)
        assert off.node_duty is None and not any(m.node for m in off.metrics)
    finally:
        for r in (*on, off):
            r.close()


def test_the_node_key_is_the_boot_id_else_the_host_name(tmp_path):
    boot = tmp_path / "with" / "sys/kernel/random"
    boot.mkdir(parents=True)
    (boot / "boot_id").write_text("6b1c2a4e-0d7e-4c55-9d36-6f3c0b2e8f11\n")
    assert node_duty_key(str(tmp_path / "with")) == "node:6b1c2a4e-0d7e-4c55-9d36-6f3c0b2e8f11"
    assert node_duty_key(str(tmp_path / "without")) == f"node:host:{socket.gethostname()}"
