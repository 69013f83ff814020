"""A user's torchrun job: exactly one process reports under each rank's identity.

Real `torchrun --standalone --nproc_per_node=2` (gloo on CPU) runs tests/e2e/torchrun_trainer.py:
a small DiLoCo-style trainer that resumes once from saved anchors and iterates a real DataLoader
(2 workers, not persistent, so every epoch starts new worker processes) for 2 epochs, its
dataset's `__getitem__` calling `torch.load` for one index. What it reports must be exactly:

- `<host>/rank-<R>` (role `rank`) from each rank and from nothing else: not the launcher, not
  multiprocessing's helpers (resource_tracker, the forkserver), not the workers;
- `<host>/rank-<R>/worker-<K>` (role `dataloader_worker`, K the worker id, the same slot
  every epoch) from the workers: their process census and errors only, and the `torch.load`
  spans of `__getitem__`;
- node metrics from exactly one rank at a time (whichever holds the node's duty; another
  may take over when it exits), resume gauges from ranks only;
- about one point per export interval from each rank, never two at one time for one identity.

Local files (the embedded default) for each start method (fork, spawn, forkserver) launched as
`opentelemetry-instrument torchrun ...`, and the other launch form (`torchrun --no-python
opentelemetry-instrument python ...`) once; a spawn and a forkserver job through the agent into
Prometheus and Jaeger; one job launched twice (a restart keeps its identities, its files are
told apart by their start stamp and pid). Counts are checked against elapsed time with generous
bounds: nothing here is timed. Only the collector tests need the stack (tests/e2e/conftest.py).
The job and the file reader: tests/e2e/torchrun_job.py (`python tests/e2e/torchrun_job.py`
prints what each identity reported, per start method).
"""

from __future__ import annotations

import math
import time
import uuid

import pytest

import required_components
from e2e_ranks import assert_prometheus_rejected_nothing, job_env, job_matcher
from required_components import missing
from torchrun_job import (EPOCHS, HOST, INSTRUMENT_TORCHRUN, NPROC, RANK_IDS, START_METHODS,
                          TORCHRUN_NO_PYTHON, WORKER_IDS, WORKERS, INTERVAL_MS, by_identity,
                          command, expected_points, file_stem, launch, local_env, points_of,
                          rank_id, rank_lifetime, read_local, torchrun_bin, worker_id)
from yeto_otel import names
from yeto_otel.census import ALLOCATOR_PREFIX, CENSUS, CENSUS_ERRORS, RSS, Source
from yeto_otel.names import RESUME_METRICS, prometheus_label, prometheus_name_of
from yeto_otel.otel import (LOCAL_RANK_ATTRIBUTE, RANK_ATTRIBUTE, ROLE_ATTRIBUTE,
                            WORKER_ID_ATTRIBUTE)

stack_module = required_components.stack_module()

# A rank's own process census (its memory cgroup's census is one process's duty, never a
# worker's).
PROCESS_METRICS = {m.name for m in CENSUS if not m.node
                   and m.source not in (Source.ALLOCATOR, Source.CGROUP)}
NODE_METRICS = {m.name for m in CENSUS if m.node}
NODE_PROMETHEUS = "|".join(prometheus_name_of(m) for m in CENSUS if m.node)
# What a worker reports: its process census and the census' own error counter, nothing else.
WORKER_METRICS = PROCESS_METRICS | {CENSUS_ERRORS.name}
RESUME_NAMES = {m.name for m in RESUME_METRICS}
ROLE_LABEL = prometheus_label(ROLE_ATTRIBUTE)
WORKER_ID_LABEL = prometheus_label(WORKER_ID_ATTRIBUTE)
QUERY_TIMEOUT = 60.0
# The jobs that go through the collector: the start methods whose workers are new
# interpreters that inherit the rank's environment (the ones that reported as the rank before).
COLLECTOR_START_METHODS = ("spawn", "forkserver")


def _service(kind: str) -> str:
    return f"yeto-torchrun-{kind}-{uuid.uuid4().hex[:8]}"


def _within_rate(count: int, lifetime_s: float) -> bool:
    """About one point per export interval: generous bounds (CPU contention slows exports, the
    exit adds one)."""
    expected = expected_points(lifetime_s)
    return 0.5 * expected <= count <= 1.5 * expected + 2


@pytest.fixture(scope="session")
def torchrun_path() -> str:
    path = torchrun_bin()
    if path is None:
        missing("torchrun (torch, beside this python)", 'pip install -e ".[test]"')
    return path


def _assert_ran(job) -> None:
    assert job.result.returncode == 0, job.describe()
    assert sorted(job.ranks) == list(range(NPROC)), job.describe()


class LocalJob:
    """A finished job and its local files, read once."""

    def __init__(self, job, telemetry):
        self.job = job
        self.telemetry = telemetry
        self.files = read_local(telemetry) if telemetry.exists() else []
        self.identities = by_identity(self.files)


# --- 1 and 2: the embedded default (local files), each start method, both launch forms --------

LOCAL_LAUNCHES = [(INSTRUMENT_TORCHRUN, method) for method in START_METHODS] + \
    [(TORCHRUN_NO_PYTHON, "fork")]


@pytest.fixture(scope="module", params=LOCAL_LAUNCHES,
                ids=[m if form == INSTRUMENT_TORCHRUN else f"no-python-{m}"
                     for form, m in LOCAL_LAUNCHES])
def local_job(request, instrument_bin, torchrun_path, tmp_path_factory) -> LocalJob:
    form, start_method = request.param
    workdir = tmp_path_factory.mktemp(f"torchrun-{start_method}")
    telemetry = workdir / "telemetry"
    job = launch(command(form, instrument=instrument_bin, torchrun=torchrun_path,
                         workdir=workdir, start_method=start_method),
                 local_env(_service("local"), telemetry), workdir, form=form,
                 start_method=start_method)
    return LocalJob(job, telemetry)


def test_job_runs_with_new_workers_every_epoch(local_job):
    job = local_job.job
    _assert_ran(job)
    for rank, summary in job.ranks.items():
        assert summary["start_method"] == job.start_method
        assert summary["load_mode"] == "mmap", summary  # resumed from the anchors, mapped
        for worker in range(WORKERS):
            # persistent_workers=False: a new process per epoch in each worker slot
            assert len(job.worker_pids(rank, worker)) == EPOCHS, summary


def test_identities_are_exactly_the_ranks_and_worker_slots(local_job):
    _assert_ran(local_job.job)
    found = set(local_job.identities)
    assert not [i for i in found if "/pid-" in i], found  # the launcher reported nothing
    assert found == RANK_IDS | WORKER_IDS, sorted(found)


def test_roles(local_job):
    _assert_ran(local_job.job)
    for identity, data in local_job.identities.items():
        resources = [r.resource for r in (*data["points"], *data["spans"])]
        assert resources, identity
        expected = None
        for rank in range(NPROC):
            if identity == rank_id(rank):
                expected = {ROLE_ATTRIBUTE: "rank", RANK_ATTRIBUTE: rank,
                            LOCAL_RANK_ATTRIBUTE: rank}
                assert all(WORKER_ID_ATTRIBUTE not in r for r in resources), identity
            for worker in range(WORKERS):
                if identity == worker_id(rank, worker):
                    expected = {ROLE_ATTRIBUTE: "dataloader_worker", RANK_ATTRIBUTE: rank,
                                WORKER_ID_ATTRIBUTE: worker}
        assert expected is not None, f"not a rank or a worker slot: {identity}"
        for resource in resources:
            assert {k: resource.get(k) for k in expected} == expected, (identity, resource)


def test_each_file_is_written_by_one_process_under_its_own_identity(local_job):
    job = local_job.job
    _assert_ran(job)
    assert local_job.files
    for local in local_job.files:
        assert not local.bad, [str(b) for b in local.bad]
        # One identity per file, the one its name says; empty files (a worker that made no
        # span, logs) say nothing.
        assert len(local.identities) <= 1, (local.path.name, local.identities)
        for identity in local.identities:
            assert local.stem == file_stem(identity), (local.path.name, identity)
    writers = {}
    for local in local_job.files:
        writers.setdefault(local.stem, set()).add(local.pid)
    # Who wrote each identity's files: the rank's own process, and each worker slot's
    # processes (one per epoch), as the trainer saw them. Nobody else (the launcher, the
    # resource tracker, the forkserver) wrote a file.
    expected = {}
    for rank in range(NPROC):
        expected[file_stem(rank_id(rank))] = {job.ranks[rank]["pid"]}
        for worker in range(WORKERS):
            expected[file_stem(worker_id(rank, worker))] = job.worker_pids(rank, worker)
    assert writers == expected, (writers, expected)
    # Every worker process flushed its census when it exited (however short its life).
    for local in local_job.files:
        if local.signal == "metrics":
            assert points_of(local.points, RSS.name), local.path.name


def test_node_metrics_from_exactly_one_rank_at_a_time(local_job):
    _assert_ran(local_job.job)
    held: dict[str, tuple[int, int]] = {}  # identity -> times of its first and last node point
    for identity, data in local_job.identities.items():
        times = [p.time_ns for p in data["points"] if p.name in NODE_METRICS]
        if times:
            held[identity] = (min(times), max(times))
    assert held and set(held) <= RANK_IDS, held  # never a worker, a helper or the launcher
    first = min(held, key=held.get)
    names = {p.name for p in local_job.identities[first]["points"]}
    assert NODE_METRICS <= names, sorted(names)
    # One at a time: a rank that takes over (when the holder exits) starts after the holder's
    # last point. A point is stamped when its collection starts, just before the duty is
    # asked for, so the slack is one collection, far less than one export interval.
    ordered = sorted(held.values())
    for (_, last), (taken, _) in zip(ordered, ordered[1:]):
        assert taken >= last - INTERVAL_MS * 1_000_000, held


def test_resume_gauges_only_from_ranks(local_job):
    _assert_ran(local_job.job)
    reporting = {identity for identity, data in local_job.identities.items()
                 if any(p.name in RESUME_NAMES for p in data["points"])}
    assert reporting == RANK_IDS, reporting
    for identity in RANK_IDS:
        names = {p.name for p in local_job.identities[identity]["points"]}
        assert RESUME_NAMES <= names, (identity, sorted(names))


def test_workers_report_only_their_process_census(local_job):
    _assert_ran(local_job.job)
    for identity in RANK_IDS:  # the stand-in allocator is on: ranks do report it
        names = {p.name for p in local_job.identities[identity]["points"]}
        assert any(n.startswith(ALLOCATOR_PREFIX) for n in names), sorted(names)
    for identity in WORKER_IDS:
        names = {p.name for p in local_job.identities[identity]["points"]}
        assert names == WORKER_METRICS, (identity, sorted(names ^ WORKER_METRICS))


def test_torch_load_in_getitem_is_traced_under_a_worker_never_the_rank(local_job):
    job = local_job.job
    _assert_ran(job)
    every_span = [(identity, span) for identity, data in local_job.identities.items()
                  for span in data["spans"]]
    ids = [span.span_id for _, span in every_span]
    assert len(ids) == len(set(ids)), "a span was exported twice (by a forked copy?)"
    for rank in range(NPROC):
        sample = str(job.workdir / f"sample-rank-{rank}.pt")
        loads = [identity for identity, span in every_span if span.name == names.TORCH_LOAD.name
                 and span.attributes.get(names.TORCH_LOAD_PATH.name) == sample]
        # index 0 is loaded once per epoch, by a worker of this rank
        assert len(loads) == EPOCHS, loads
        assert set(loads) <= {worker_id(rank, k) for k in range(WORKERS)}, loads
        anchors = str(job.workdir / f"anchors-rank-{rank}.pt")
        resumes = [identity for identity, span in every_span
                   if span.name == names.RESUME_ANCHORS.name
                   and span.attributes.get(names.ANCHORS_PATH.name) == anchors]
        assert resumes == [rank_id(rank)], resumes


def test_each_rank_exports_about_once_per_interval(local_job):
    job = local_job.job
    _assert_ran(job)
    for rank in range(NPROC):
        summary = job.ranks[rank]
        points = points_of(local_job.identities[rank_id(rank)]["points"], RSS.name)
        lifetime = rank_lifetime(summary)
        assert _within_rate(len(points), lifetime), (
            f"rank {rank}: {len(points)} points of {RSS.name} in {lifetime:.1f} s "
            f"(interval {INTERVAL_MS} ms)")
        times = [p.time_ns / 1e9 for p in points]
        assert summary["process_started"] <= times[0] and times[-1] <= job.ended, (
            summary, times[0], times[-1])


def test_every_export_under_an_identity_is_its_own_process(local_job):
    """Each collection stamps all its points with one time, and the census observes only in
    its own process: an export under an identity without its census (say, a forked copy of a
    rank's exporters in a worker, with the rank's last resume gauges) came from another one."""
    _assert_ran(local_job.job)
    for identity, data in local_job.identities.items():
        census = {p.time_ns for p in points_of(data["points"], RSS.name)}
        others = {p.time_ns: p.name for p in data["points"] if p.time_ns not in census}
        assert not others, (identity, sorted(others.items())[:5])


def test_no_identity_has_two_points_at_one_time(local_job):
    _assert_ran(local_job.job)
    for identity, data in local_job.identities.items():
        series: dict = {}
        for point in data["points"]:
            key = (point.name, tuple(sorted(point.attributes.items())))
            series.setdefault(key, []).append(point.time_ns)
        for key, times in series.items():
            assert len(times) == len(set(times)), (identity, key, sorted(times))


# --- 3: through the agent into Prometheus and Jaeger ----------------------------------------


@pytest.fixture(scope="module", params=COLLECTOR_START_METHODS)
def collector_job(request, stack, instrument_bin, torchrun_path, tmp_path_factory):
    """(service, job) of one job exporting to the stack's agent."""
    start_method = request.param
    service = _service(f"agent-{start_method}")
    workdir = tmp_path_factory.mktemp(f"torchrun-agent-{start_method}")
    env = job_env(stack, service, OTEL_METRIC_EXPORT_INTERVAL=str(INTERVAL_MS),
                  OTEL_BSP_SCHEDULE_DELAY="500", OMP_NUM_THREADS="1",
                  YETO_OTEL_HOST_ALLOCATOR="yeto_otel.testing:moving",
                  YETO_OTEL_LOCAL_DIR=str(workdir / "no-local-files"),
                  YETO_OTEL_WORKER_LOAD_SPANS="on")
    job = launch(command(INSTRUMENT_TORCHRUN, instrument=instrument_bin, torchrun=torchrun_path,
                         workdir=workdir, start_method=start_method),
                 env, workdir, form=INSTRUMENT_TORCHRUN, start_method=start_method)
    return service, job


# What the agent wrote for the job: not what Prometheus' own rules computed from it (recording
# rules are named level:metric:operations, alerting rules write ALERTS*).
NOT_RULE_OUTPUT = '__name__!~".*:.*|ALERTS|ALERTS_FOR_STATE"'


def _written(service: str, extra: str = "") -> str:
    return f"{{{job_matcher(service)}, {NOT_RULE_OUTPUT}{', ' + extra if extra else ''}}}"


def _instances(stack, selector: str) -> dict[str, list[dict]]:
    """instance -> the label sets of the series `selector` selects."""
    out: dict[str, list[dict]] = {}
    for labels in stack.prometheus_series(selector):
        out.setdefault(labels.get("instance", ""), []).append(labels)
    return out


def _rank_samples(stack, service: str, job) -> dict[str, list[float]]:
    """instance -> sample times (s) of each rank's RSS series over the whole job, once every
    rank's last export (at its exit, after its script ended) has arrived."""
    window = math.ceil(time.time() - job.started + 5)
    ranks = _written(service, f'__name__="{prometheus_name_of(RSS)}", {ROLE_LABEL}="rank"')
    result = stack.prometheus_query(f"{ranks}[{window}s]")
    samples = {s["metric"].get("instance", ""): [float(t) for t, _ in s["values"]]
               for s in result}
    ended = {rank_id(rank): job.ranks[rank]["ended"] for rank in range(NPROC)}
    complete = set(samples) == RANK_IDS and all(
        max(samples[i]) >= ended[i] for i in RANK_IDS)
    return samples if complete else {}


def test_collector_job_runs(collector_job):
    _, job = collector_job
    _assert_ran(job)
    assert not (job.workdir / "no-local-files").exists()  # to the agent, not to files


def test_prometheus_instances_are_the_ranks_and_worker_slots(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    rss = prometheus_name_of(RSS)

    def all_arrived():
        found = _instances(stack, _written(service, f'__name__="{rss}"'))
        return found if set(found) >= RANK_IDS | WORKER_IDS else None

    stack.wait_for(all_arrived, timeout=QUERY_TIMEOUT, what=f"{rss} from all 6 instances")
    everything = _instances(stack, _written(service))
    assert set(everything) == RANK_IDS | WORKER_IDS, sorted(everything)
    for instance, series in _instances(stack, _written(service, f'__name__="{rss}"')).items():
        roles = {s.get(ROLE_LABEL) for s in series}
        if instance in RANK_IDS:
            assert roles == {"rank"}, (instance, series)
            assert {s.get(WORKER_ID_LABEL) for s in series} == {None}, series
        else:
            assert roles == {"dataloader_worker"}, (instance, series)
            assert {s.get(WORKER_ID_LABEL) for s in series} == \
                {instance.rsplit("-", 1)[1]}, series


def test_prometheus_node_metrics_from_ranks_of_one_host(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    node = _written(service, f'__name__=~"{NODE_PROMETHEUS}"')
    found = stack.wait_for(lambda: _instances(stack, node), timeout=QUERY_TIMEOUT,
                           what="node metrics")
    # Whichever rank held the node's duty (one at a time: the local files' test checks the
    # times); never a worker.
    assert found and set(found) <= RANK_IDS, sorted(found)
    assert {s.get("host_name") for series in found.values() for s in series} == {HOST}


def test_prometheus_resume_gauges_only_from_ranks(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    names = "|".join(prometheus_name_of(m) for m in RESUME_METRICS)
    resume = _written(service, f'__name__=~"{names}"')

    def both():
        found = _instances(stack, resume)
        return found if set(found) >= RANK_IDS else None

    found = stack.wait_for(both, timeout=QUERY_TIMEOUT, what="resume gauges from both ranks")
    assert set(found) == RANK_IDS, sorted(found)


def test_prometheus_workers_have_only_their_process_census(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    expected = {prometheus_name_of(m) for m in CENSUS if m.name in PROCESS_METRICS}
    expected.add(prometheus_name_of(CENSUS_ERRORS))
    for instance in sorted(WORKER_IDS):
        selector = _written(service, f'instance="{instance}"')

        def arrived():
            names = stack.prometheus_names(selector) - {"target_info"}
            return names if names >= expected else None

        names = stack.wait_for(arrived, timeout=QUERY_TIMEOUT, what=f"{instance}'s census")
        assert names == expected, (instance, sorted(names ^ expected))


def test_prometheus_rank_samples_about_once_per_interval(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    samples = stack.wait_for(lambda: _rank_samples(stack, service, job), timeout=QUERY_TIMEOUT,
                             what="every rank's RSS samples up to its exit")
    for rank in range(NPROC):
        times = samples[rank_id(rank)]
        assert len(times) == len(set(times)), f"rank {rank}: two samples at one time: {times}"
        lifetime = rank_lifetime(job.ranks[rank])
        assert _within_rate(len(times), lifetime), (
            f"rank {rank}: {len(times)} samples in {lifetime:.1f} s (interval {INTERVAL_MS} ms)")


def test_prometheus_rejected_nothing(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    # Everything the job sent has arrived (every rank's last export, at its exit).
    stack.wait_for(lambda: _rank_samples(stack, service, job), timeout=QUERY_TIMEOUT,
                   what="every rank's RSS samples up to its exit")
    assert_prometheus_rejected_nothing(stack, stack_module, QUERY_TIMEOUT)


def _tags(items) -> dict:
    return {t["key"]: t["value"] for t in items or ()}


def test_jaeger_torch_load_spans_come_from_workers(stack, collector_job):
    service, job = collector_job
    _assert_ran(job)
    samples = {str(job.workdir / f"sample-rank-{rank}.pt"): rank for rank in range(NPROC)}

    def loads():
        found: dict[int, list[str]] = {}
        for trace in stack.jaeger_traces(service, operation=names.TORCH_LOAD.name):
            for span in trace["spans"]:
                path = _tags(span["tags"]).get(names.TORCH_LOAD_PATH.name)
                if span["operationName"] == names.TORCH_LOAD.name and path in samples:
                    process = _tags(trace["processes"][span["processID"]]["tags"])
                    found.setdefault(samples[path], []).append(process["service.instance.id"])
        complete = sorted(found) == list(range(NPROC)) and all(
            len(v) >= EPOCHS for v in found.values())
        return found if complete else None

    found = stack.wait_for(loads, timeout=QUERY_TIMEOUT, what="the workers' torch.load spans")
    for rank, instances in found.items():
        assert len(instances) == EPOCHS, instances
        assert set(instances) <= {worker_id(rank, k) for k in range(WORKERS)}, instances


# --- 4: the same job launched twice (a restart) ---------------------------------------------

RESTART_START_METHOD = "fork"


@pytest.fixture(scope="module")
def restarted_job(instrument_bin, torchrun_path, tmp_path_factory):
    """(first job, second job, {file name: bytes} after the first, files after the second):
    one job launched twice into one telemetry directory."""
    base = tmp_path_factory.mktemp("torchrun-restart")
    telemetry = base / "telemetry"
    env = local_env(_service("restart"), telemetry)
    jobs = []
    first_files: dict[str, bytes] = {}
    for attempt in ("launch-1", "launch-2"):
        workdir = base / attempt
        jobs.append(launch(command(INSTRUMENT_TORCHRUN, instrument=instrument_bin,
                                   torchrun=torchrun_path, workdir=workdir,
                                   start_method=RESTART_START_METHOD),
                           env, workdir, form=INSTRUMENT_TORCHRUN,
                           start_method=RESTART_START_METHOD))
        if not first_files:
            first_files = {p.name: p.read_bytes() for p in telemetry.iterdir()}
    return jobs[0], jobs[1], first_files, read_local(telemetry)


def test_restart_keeps_the_identities(restarted_job):
    first, second, first_files, files = restarted_job
    _assert_ran(first)
    _assert_ran(second)
    before = [f for f in files if f.path.name in first_files]
    after = [f for f in files if f.path.name not in first_files]
    assert set(by_identity(before)) == RANK_IDS | WORKER_IDS
    assert set(by_identity(after)) == RANK_IDS | WORKER_IDS
    # The second launch continues each rank's series: same identity, later points.
    for identity in RANK_IDS:
        last_before = max(p.time_ns for p in by_identity(before)[identity]["points"])
        first_after = min(p.time_ns for p in by_identity(after)[identity]["points"])
        assert last_before < first_after, identity


def test_restart_files_are_told_apart_by_start_and_pid(restarted_job):
    first, second, first_files, files = restarted_job
    _assert_ran(first)
    _assert_ran(second)
    # The first launch's files are left exactly as it wrote them: nothing appended.
    current = {f.path.name: f.path.read_bytes() for f in files}
    assert {name: current.get(name) for name in first_files} == first_files
    assert len(files) == 2 * len(first_files), sorted(current)
    for rank in range(NPROC):
        metrics = sorted((f for f in files if f.signal == "metrics"
                          and f.stem == file_stem(rank_id(rank))),
                         key=lambda f: f.path.name in first_files, reverse=True)
        assert [(f.pid, f.path.name in first_files) for f in metrics] == \
            [(first.ranks[rank]["pid"], True), (second.ranks[rank]["pid"], False)], metrics
        older, newer = metrics
        assert older.path.name != newer.path.name
        assert older.stamp <= newer.stamp, (older.path.name, newer.path.name)
