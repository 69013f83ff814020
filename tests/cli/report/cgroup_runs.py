"""Runs of the real census on a fixture cgroup tree (tests/fixtures/cgroup), written as the
embedded default writes them, for the report's cgroup tests.

`CensusReader` with a `CgroupCensus` on a copy of a fixture tree whose files a run changes
between collections, electing in a lock directory of the run; each rank's metrics go through
the OTLP JSON file exporter into its own `metrics-<stem>.jsonl` (stems as `local_files` names
them). Two ranks in one process hold separate flocks, so the election and the takeover are the
real ones.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from census_harness import CGROUP_FIXTURES
from opentelemetry.exporter.otlp.json.file.metric_exporter import FileMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import HOST_NAME, SERVICE_INSTANCE_ID, Resource

from yeto_otel.census import CensusInstruments, CensusReader, CgroupCensus
from yeto_otel.otel import RANK_ATTRIBUTE, JsonLinesWriter, local_file_stem

GiB = 1 << 30
POD = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c.slice/"
       "cri-containerd-4a7e.scope")
SLURM = "/slurm/uid_1000/job_4242/step_0/task_0"


class Rank:
    """One rank's census and metrics file; `collect()` is one export of the SDK."""

    def __init__(self, directory: Path, tree: Path, lock_dir: Path, host: str, rank: int):
        self.instance = f"{host}/rank-{rank}"
        self.writer = JsonLinesWriter(
            directory / f"metrics-{local_file_stem(self.instance, pid=1000 + rank)}.jsonl")
        self.exporter = FileMetricExporter(stream=self.writer)
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(
            resource=Resource({SERVICE_INSTANCE_ID: self.instance, HOST_NAME: host,
                               RANK_ATTRIBUTE: rank}),
            metric_readers=[self.reader], shutdown_on_exit=False)
        self.cgroup = CgroupCensus(proc_root=str(tree / "proc"), fs_root=str(tree),
                                   lock_dir=str(lock_dir))
        self.census = CensusInstruments(self.provider.get_meter("test"), CensusReader(
            allocator=None, node_metrics=False, cgroup=self.cgroup))
        self.holds = False

    def collect(self) -> tuple[int, int]:
        """(before, after) the export, in unix nanoseconds."""
        before = time.time_ns()
        self.exporter.export(self.reader.get_metrics_data())
        self.holds = self.cgroup.duty.held()
        return before, time.time_ns()

    def die(self) -> None:
        """Gone without a last export (OOM-killed): its duty is free, as the kernel frees the
        flock of a dead process."""
        self.cgroup.close()
        self.writer.close()


def tree_copy(tmp_path: Path, variant: str, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(CGROUP_FIXTURES / variant, target)
    return target


def cgroup_file(tree: Path, path: str, name: str) -> Path:
    return tree / "sys/fs/cgroup" / path.lstrip("/") / name


def set_usage(tree: Path, usage: int) -> None:
    cgroup_file(tree, POD, "memory.current").write_text(f"{usage}\n")


def set_oom_kills(tree: Path, count: int) -> None:
    events = cgroup_file(tree, POD, "memory.events")
    text = events.read_text()
    events.write_text("".join(
        f"oom_kill {count}\n" if line.startswith("oom_kill ") else line + "\n"
        for line in text.splitlines()))


def pod_run(tmp_path: Path) -> tuple[Path, dict]:
    """Two ranks of one pod: rank 0 observes the cgroup, is OOM-killed, and rank 1 takes over
    and later sees a sibling killed. Returns (directory, {event: (before, after)})."""
    directory = tmp_path / "telemetry"
    directory.mkdir()
    tree = tree_copy(tmp_path, "v2_pod", "h1")
    (tmp_path / "locks").mkdir()
    ranks = [Rank(directory, tree, tmp_path / "locks", "h1", r) for r in (0, 1)]
    times = {}
    for n in range(4):
        set_usage(tree, (10 + n) * GiB)
        for rank in ranks:
            rank.collect()
    assert ranks[0].holds and not ranks[1].holds
    times["rank 0 last"] = ranks[0].collect()
    set_oom_kills(tree, 2)  # the kernel kills rank 0 (the fixture counted 1 kill before)
    ranks[0].die()
    set_usage(tree, 9 * GiB)
    times["takeover"] = ranks[1].collect()
    assert ranks[1].holds
    for n in range(3):
        set_usage(tree, (11 + n) * GiB)
        times[f"rank 1 #{n}"] = ranks[1].collect()
    set_oom_kills(tree, 3)  # a sibling killed while rank 1 observes
    times["second kill"] = ranks[1].collect()
    ranks[1].collect()
    ranks[1].die()
    return directory, times
