"""Shared by the CensusReader tests: the /proc fixtures, readers over them, and the checks of
the "never hurt the trainer" rule."""


from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path

from repo_paths import FIXTURES as FIXTURE_ROOT
from yeto_otel.census import AllocatorSource, CensusReader, CensusSnapshot
from yeto_otel.testing import settable

FIXTURES = FIXTURE_ROOT / "proc"
KB = 1024

RSS = "yeto.process.memory.rss"
RSS_PEAK = "yeto.process.memory.rss_peak"
ANON = "yeto.process.memory.anonymous"
PRIVATE_DIRTY = "yeto.process.memory.private_dirty"
SMAPS_AGE = "yeto.process.memory.smaps_rollup.age"  # observed with the smaps_rollup values
NODE_AVAILABLE = "yeto.node.memory.available"
NODE_ANON = "yeto.node.memory.anon_pages"
USAGE = "process.memory.usage"  # the semantic conventions' names, on by default
VIRTUAL = "process.memory.virtual"
UPTIME = "yeto.process.uptime"  # the process's own (whatever the proc root), with its status
PROCESS_NAMES = {RSS, RSS_PEAK, ANON, PRIVATE_DIRTY, SMAPS_AGE, USAGE, VIRTUAL, UPTIME}
NODE_NAMES = {NODE_AVAILABLE, NODE_ANON}
BY_SOURCE = {
    "status": {RSS, RSS_PEAK, ANON, USAGE, VIRTUAL, UPTIME},
    "smaps_rollup": {PRIVATE_DIRTY, SMAPS_AGE},
    "meminfo": {NODE_AVAILABLE, NODE_ANON},
}
ALLOC = "yeto.host_allocator."

COLLECTIONS = 3


def reader_for(root, *, allocator=None, node_metrics=True) -> CensusReader:
    """smaps_rollup read on every take, like the other files (its budget: test_smaps_budget)."""
    return CensusReader(proc_root=str(root), allocator=allocator, node_metrics=node_metrics,
                        smaps_budget_percent=math.inf)


def fake_source() -> AllocatorSource:
    return AllocatorSource("fake", settable)


def census_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name == "yeto_otel.census" and r.levelno == logging.WARNING]


def take_several(reader: CensusReader, n: int = COLLECTIONS) -> list[CensusSnapshot]:
    return [reader.take() for _ in range(n)]


def copy_root(tmp_path, variant="baseline") -> Path:
    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / variant, root)
    return root


def assert_fault_rule(caplog, reader, snaps, faulty: dict[str, str]):
    """Each faulty source: counted once per collection, logged exactly once with a reason
    containing `faulty[source]`; no other source counted or logged."""
    assert reader.ledger.counts() == {source: len(snaps) for source in faulty}
    warnings = census_warnings(caplog)
    assert len(warnings) == len(faulty), [w.getMessage() for w in warnings]
    for source, reason in faulty.items():
        mine = [w.getMessage() for w in warnings if f"skipping {source} " in w.getMessage()]
        assert len(mine) == 1, (source, [w.getMessage() for w in warnings])
        assert reason in mine[0], (reason, mine[0])
