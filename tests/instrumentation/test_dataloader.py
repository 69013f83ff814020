"""DataLoaderWorkerInstrumentor in this process, with forked workers: each worker reports as
`<id>/worker-<K>` through its own files, the user's worker_init_fn still runs and stays the
loader's, a second loader's workers get a slot of their own, and nothing happens when it is
switched off or when the loader belongs to a child. (Spawn, forkserver and torchrun: e2e.)"""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from forked import in_fork  # noqa: E402
from yeto_otel.census import CENSUS, Source  # noqa: E402
from yeto_otel.instrumentation import DataLoaderWorkerInstrumentor, WorkerTelemetry  # noqa: E402
from yeto_otel.otel import Role, _pipeline, _process  # noqa: E402
from yeto_otel.settings import IDENTITY_OWNER, Settings  # noqa: E402


class RecordInit:
    """A user's worker_init_fn: leaves a file per call."""

    def __init__(self, directory: Path):
        self.directory = directory

    def __call__(self, worker_id: int) -> None:
        (self.directory / f"init-{worker_id}-{os.getpid()}").touch()


@pytest.fixture
def job(monkeypatch, tmp_path):
    """This process reports (a plain process) and telemetry goes to local files in tmp."""
    monkeypatch.setattr(_process, "_decided", (os.getpid(), Role.PROCESS))
    monkeypatch.setenv(IDENTITY_OWNER, f"-:{os.getpid()}")
    monkeypatch.setattr(_pipeline, "_pipeline", None)
    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "otlp_json_file")
    (tmp_path / "telemetry").mkdir()
    (tmp_path / "inits").mkdir()
    return tmp_path


@pytest.fixture
def instrumented(job):
    instrumentor = DataLoaderWorkerInstrumentor()
    instrumentor.instrument(settings=Settings(local_dir=str(job / "telemetry")))
    yield job
    instrumentor.uninstrument()


def run_epochs(loader, epochs: int = 2) -> int:
    return sum(len(batch) for _ in range(epochs) for batch in loader)


_STAMP_AND_PID = re.compile(r"-\d{8}T\d{6}-\d+\.jsonl$")


def worker_files(directory: Path, signal: str = "metrics") -> list[str]:
    """The identity part of each worker file's name (`metrics-<id>-<start>-<pid>.jsonl`)."""
    return sorted(_STAMP_AND_PID.sub("", p.name) for p in directory.glob(f"{signal}-*worker*"))


def loader(job: Path, **kwargs) -> DataLoader:
    return DataLoader(list(range(8)), batch_size=2, num_workers=2, persistent_workers=False,
                      multiprocessing_context="fork", worker_init_fn=RecordInit(job / "inits"),
                      **kwargs)


def test_each_forked_worker_reports_as_itself_and_the_users_init_runs(instrumented):
    data = loader(instrumented)
    assert run_epochs(data) == 16
    host_pid = f"pid-{os.getpid()}"
    names = worker_files(instrumented / "telemetry")
    # two epochs of non-persistent workers: two processes per worker slot, same identity
    assert [n.split(host_pid)[1] for n in names] == ["_worker-0", "_worker-0", "_worker-1",
                                                    "_worker-1"]
    assert len(list((instrumented / "inits").iterdir())) == 4
    assert isinstance(data.worker_init_fn, RecordInit)  # the loader keeps the user's function


def test_a_second_loader_has_a_slot_of_its_own(instrumented):
    first, second = loader(instrumented), loader(instrumented)
    run_epochs(first, 1)
    run_epochs(second, 1)
    names = worker_files(instrumented / "telemetry")
    assert sum("_loader-1_worker-" in n for n in names) == 2
    assert sum("_loader-" not in n for n in names) == 2


def metric_names(directory: Path, pattern: str) -> set[str]:
    return {metric["name"] for path in directory.glob(pattern)
            for line in path.read_text().splitlines() if line.strip()
            for rm in json.loads(line)["resourceMetrics"]
            for sm in rm["scopeMetrics"] for metric in sm["metrics"]}


@pytest.mark.parametrize("semconv", [True, False])
def test_workers_export_the_semantic_conventions_names_as_the_setting_says(job, semconv):
    """A worker's process census is a rank's: the semantic conventions' names beside ours
    unless YETO_OTEL_SEMCONV_METRICS is off; never the node's."""
    instrumentor = DataLoaderWorkerInstrumentor()
    instrumentor.instrument(settings=Settings(local_dir=str(job / "telemetry"),
                                              semconv_metrics=semconv))
    try:
        run_epochs(loader(job), 1)
    finally:
        instrumentor.uninstrument()
    names = metric_names(job / "telemetry", "metrics-*worker*")
    assert {m.name for m in CENSUS if not m.node and m.source is Source.STATUS
            and not m.semconv} <= names
    semconv_names = {m.name for m in CENSUS if m.semconv}
    assert names & semconv_names == (semconv_names if semconv else set())
    assert not {m.name for m in CENSUS if m.node} & names


def test_switched_off_nothing_is_patched(job):
    original = DataLoader._get_iterator
    instrumentor = DataLoaderWorkerInstrumentor()
    instrumentor.instrument(settings=Settings(local_dir=str(job), dataloader_workers=False))
    try:
        assert DataLoader._get_iterator is original
    finally:
        instrumentor.uninstrument()


def test_a_childs_loader_starts_silent_workers(instrumented, monkeypatch):
    monkeypatch.setattr(_process, "_decided", (os.getpid(), Role.CHILD))
    run_epochs(loader(instrumented), 1)
    assert worker_files(instrumented / "telemetry") == []
    assert len(list((instrumented / "inits").iterdir())) == 2  # the user's init still ran


def test_uninstrument_restores_the_loader():
    original = DataLoader._get_iterator
    instrumentor = DataLoaderWorkerInstrumentor()
    instrumentor.instrument(settings=Settings())
    assert DataLoader._get_iterator is not original
    instrumentor.uninstrument()
    assert DataLoader._get_iterator is original


def test_the_wrapper_travels_to_spawned_workers_and_never_fails_them(job, caplog):
    blocked = job / "not-a-directory"
    blocked.write_text("x")  # telemetry cannot start: its directory is a file
    wrapper = WorkerTelemetry(RecordInit(job / "inits"), Settings(local_dir=str(blocked / "t")),
                              {"service.instance.id": "h/rank-0"}, 0)
    copy = pickle.loads(pickle.dumps(wrapper))  # what spawn and forkserver send

    def worker():
        copy(5)
        return _process.current_role()

    assert in_fork(worker) is Role.DATALOADER_WORKER
    assert [p.name.split("-")[1] for p in (job / "inits").iterdir()] == ["5"]


def test_uninstrument_leaves_a_wrapper_put_over_ours(job):
    original = DataLoader._get_iterator
    instrumentor = DataLoaderWorkerInstrumentor()
    instrumentor.instrument(settings=Settings(local_dir=str(job / "telemetry")))
    ours, calls = DataLoader._get_iterator, []

    def theirs(loader):
        calls.append(loader)
        return ours(loader)

    DataLoader._get_iterator = theirs
    try:
        instrumentor.uninstrument()
        assert DataLoader._get_iterator is theirs
        data = loader(job)
        assert run_epochs(data, 1) == 8 and calls == [data]
        assert worker_files(job / "telemetry") == []  # ours calls straight through
        assert len(list((job / "inits").iterdir())) == 2  # the user's init, as it was
    finally:
        DataLoader._get_iterator = original


class UnhashableLoader(DataLoader):
    """A DataLoader subclass that compares by value: it has no hash (no weak-key slot)."""

    def __eq__(self, other):
        return self is other

    __hash__ = None


class FixedInitLoader(DataLoader):
    """A DataLoader subclass that refuses a worker_init_fn other than its own."""

    def __setattr__(self, name, value):
        if name == "worker_init_fn" and isinstance(value, WorkerTelemetry):
            raise AttributeError("worker_init_fn is fixed for this loader")
        super().__setattr__(name, value)


@pytest.mark.parametrize("kind", [UnhashableLoader, FixedInitLoader])
def test_a_loader_our_wrapper_cannot_prepare_runs_its_epochs_as_without_us(instrumented, kind,
                                                                           caplog, monkeypatch):
    from yeto_otel.instrumentation import _guard

    monkeypatch.setattr(_guard, "_logged", set())
    data = kind(list(range(8)), batch_size=2, num_workers=2, multiprocessing_context="fork",
                worker_init_fn=RecordInit(instrumented / "inits"))
    with caplog.at_level("WARNING", logger="yeto_otel.instrumentation"):
        assert run_epochs(data) == 16
    assert len(list((instrumented / "inits").iterdir())) == 4  # the user's init, each worker
    assert isinstance(data.worker_init_fn, RecordInit)
    logged = [r.getMessage() for r in caplog.records if r.name == "yeto_otel.instrumentation"]
    assert len(logged) == 1 and "the DataLoader wrapper" in logged[0]


@pytest.mark.parametrize("exporters, expected", [
    ({"OTEL_TRACES_EXPORTER": "otlp_json_file", "OTEL_METRICS_EXPORTER": "otlp_json_file",
      "OTEL_LOGS_EXPORTER": "otlp_json_file"}, 3000),  # local files wait on no one
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "otlp_json_file"}, 3000),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp"}, 30),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp_json_file"}, 30),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, 30),
])
def test_a_worker_waits_briefly_for_a_collector_and_as_its_rank_for_local_files(
        monkeypatch, exporters, expected):
    from yeto_otel.instrumentation._dataloader import worker_exit_flush_ms

    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.delenv(f"OTEL_{signal}_EXPORTER", raising=False)
    for name, value in exporters.items():
        monkeypatch.setenv(name, value)
    assert worker_exit_flush_ms(Settings()) == expected
    assert worker_exit_flush_ms(Settings(exit_flush_timeout_ms=10)) == 10  # never longer
