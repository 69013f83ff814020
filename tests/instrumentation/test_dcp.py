"""DcpInstrumentor: one `dcp.load` span per rank per torch.distributed.checkpoint load, with
what the rank read and its plan and read phases as children; the load's own error passes
through; measuring never fails a load; uninstrument() puts torch's functions back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from opentelemetry.trace import StatusCode
from opentelemetry.util._importlib_metadata import entry_points

from yeto_otel import names as span_table
from yeto_otel.instrumentation import DcpInstrumentor, TorchLoadInstrumentor
from yeto_otel.instrumentation import _dcp_phases
from zero_code import traced_run

HERE = Path(__file__).resolve().parent
ORIGINAL_LOAD = dcp.load
DOCUMENTED = {a.name for a in span_table.DCP_LOAD.attributes}
RANKS_TIMEOUT = 240  # two spawned interpreters importing torch on a shared 2-core machine


@pytest.fixture
def instrumented(provider):
    inst = DcpInstrumentor()  # a singleton: always uninstrument in teardown
    inst.instrument(tracer_provider=provider)
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()
    assert dcp.load is ORIGINAL_LOAD and dcp.state_dict_loader.load is ORIGINAL_LOAD


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "ckpt"
    dcp.save({"w": torch.arange(4096, dtype=torch.float32)}, checkpoint_id=str(path))
    return path


def _by_name(spans, name):
    return [s for s in spans if s["name"] == name]


def test_registered_as_an_opentelemetry_instrumentor():
    eps = {ep.name: ep for ep in entry_points(group="opentelemetry_instrumentor")}
    assert eps["yeto_dcp"].load() is DcpInstrumentor


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """Runs dcp_ranks.py once: (its output directory, {rank: its report})."""
    out = tmp_path_factory.mktemp("ranks")
    result = subprocess.run([sys.executable, str(HERE / "dcp_ranks.py"), str(out)],
                            capture_output=True, text=True, timeout=RANKS_TIMEOUT)
    assert result.returncode == 0, result.stderr[-4000:]
    return out, {rank: json.loads((out / f"spans-{rank}.json").read_text()) for rank in (0, 1)}


def _float32_bytes(rank: int) -> tuple[int, int]:
    """(the shared tensor's bytes, this rank's own tensor's bytes) in dcp_ranks.py."""
    sys.path.insert(0, str(HERE))
    try:
        from dcp_ranks import OWN_ELEMENTS, SHARED_ELEMENTS
    finally:
        sys.path.remove(str(HERE))
    return 4 * SHARED_ELEMENTS, 4 * OWN_ELEMENTS[rank]


def test_two_gloo_ranks_each_trace_their_own_load(two_ranks):
    tmp_path, reports = two_ranks
    for rank, report in reports.items():
        assert report["restored"] and report["failure"] == "CheckpointException"
        loads = _by_name(report["spans"], span_table.DCP_LOAD.name)
        ok, failed = sorted(loads, key=lambda s: s["status"] == "ERROR")
        attributes = ok["attributes"]
        assert set(attributes) <= DOCUMENTED
        assert attributes[span_table.DCP_PATH.name] == str(tmp_path / "checkpoint")
        assert attributes[span_table.DCP_RANK.name] == rank
        assert attributes[span_table.DCP_ITEMS_READ.name] == 2  # the shared tensor, its own
        assert attributes[span_table.DCP_FILES_READ.name] in (1, 2)
        payload = sum(_float32_bytes(rank))
        assert payload <= attributes[span_table.DCP_BYTES_READ.name] \
            <= sum(report["file_sizes"].values())
        assert isinstance(attributes[span_table.DCP_ANONYMOUS_DELTA.name], int)
        assert span_table.DCP_RESIDENCY_ERROR.name not in attributes
        plan, = [s for s in _by_name(report["spans"], span_table.DCP_LOAD_PLAN.name)
                 if s["parent"] == ok["span_id"]]
        read, = _by_name(report["spans"], span_table.DCP_LOAD_READ.name)
        assert read["parent"] == ok["span_id"] and read["status"] == "UNSET"
        assert read["attributes"] == {span_table.DCP_ITEMS_READ.name: 2}
        assert ok["start"] <= plan["start"] <= plan["end"] <= read["start"] <= read["end"] \
            <= ok["end"]
        assert failed["status"] == "ERROR" and "exception" in failed["events"]
        assert failed["attributes"][span_table.DCP_PATH.name] == str(tmp_path / "missing")


def _stored(file_sizes: dict) -> int:
    return sum(size for name, size in file_sizes.items() if name.endswith(".distcp"))


def _save_of(report, span) -> tuple[dict, dict]:
    """The plan and write children of a dcp.save span, checked to lie in order within it."""
    plan, = [s for s in _by_name(report["spans"], span_table.DCP_SAVE_PLAN.name)
             if s["parent"] == span["span_id"]]
    write, = [s for s in _by_name(report["spans"], span_table.DCP_SAVE_WRITE.name)
              if s["parent"] == span["span_id"]]
    assert span["start"] <= plan["start"] <= plan["end"] <= write["start"] <= write["end"] \
        <= span["end"]
    assert write["status"] == "UNSET"
    return plan, write


def test_two_gloo_ranks_each_trace_their_own_save_and_async_save(two_ranks):
    out, reports = two_ranks
    documented = {a.name for a in span_table.DCP_SAVE.attributes}
    written = {"checkpoint": 0, "async": 0}
    items = {"checkpoint": 0, "async": 0}
    for rank, report in reports.items():
        saves = _by_name(report["spans"], span_table.DCP_SAVE.name)
        direct, = [s for s in saves if s["parent"] is None]
        call, = _by_name(report["spans"], span_table.DCP_ASYNC_SAVE.name)
        upload, = _by_name(report["spans"], span_table.DCP_ASYNC_SAVE_UPLOAD.name)
        background, = [s for s in saves if s["parent"] == upload["span_id"]]
        assert call["parent"] is None and upload["parent"] == call["span_id"]
        assert upload["status"] == "UNSET" and call["status"] == "UNSET"
        assert call["attributes"][span_table.DCP_PATH.name] == str(out / "async")
        assert call["attributes"][span_table.DCP_RANK.name] == rank
        assert isinstance(call["attributes"][span_table.DCP_ANONYMOUS_DELTA.name], int)
        assert call["start"] <= upload["start"] <= background["start"] <= background["end"] \
            <= upload["end"]
        for name, span in (("checkpoint", direct), ("async", background)):
            attributes = span["attributes"]
            assert set(attributes) <= documented
            assert span_table.DCP_RESIDENCY_ERROR.name not in attributes
            assert attributes[span_table.DCP_PATH.name] == str(out / name)
            assert attributes[span_table.DCP_RANK.name] == rank
            assert attributes[span_table.DCP_FILES_WRITTEN.name] == 1  # one file per rank
            # The shared tensor is written by one of the two ranks.
            assert attributes[span_table.DCP_ITEMS_WRITTEN.name] in (1, 2)
            assert attributes[span_table.DCP_BYTES_WRITTEN.name] >= _float32_bytes(rank)[1]
            assert isinstance(attributes[span_table.DCP_ANONYMOUS_DELTA.name], int)
            _, write = _save_of(report, span)
            assert write["attributes"][span_table.DCP_BYTES_WRITTEN.name] == \
                attributes[span_table.DCP_BYTES_WRITTEN.name]
            written[name] += attributes[span_table.DCP_BYTES_WRITTEN.name]
            items[name] += attributes[span_table.DCP_ITEMS_WRITTEN.name]
    # Every byte of the ranks' data files, each counted by the rank that wrote it.
    assert written["checkpoint"] == _stored(reports[0]["file_sizes"])
    assert written["async"] == _stored(reports[0]["async_file_sizes"])
    assert items == {"checkpoint": 3, "async": 3}


@pytest.fixture
def torch_load_traced(provider):
    inst = TorchLoadInstrumentor()  # a singleton: always uninstrument in teardown
    inst.instrument(tracer_provider=provider)
    yield inst
    inst.uninstrument()


def test_a_dcp_load_makes_no_torch_load_spans_but_counts_its_items(
        instrumented, torch_load_traced, exporter, tmp_path):
    tensors = {f"t{i}": torch.full((256,), float(i)) for i in range(12)}
    dcp.save(tensors, checkpoint_id=str(tmp_path / "many"))
    loaded = {name: torch.zeros(256) for name in tensors}
    dcp.load(loaded, checkpoint_id=str(tmp_path / "many"))  # torch.load once per tensor
    assert all(torch.equal(loaded[name], tensors[name]) for name in tensors)
    torch.save(torch.ones(4), tmp_path / "plain.pt")
    torch.load(tmp_path / "plain.pt", weights_only=True)
    finished = exporter.get_finished_spans()
    torch_loads = [s for s in finished if s.name == span_table.TORCH_LOAD.name]
    assert [s.attributes.get(span_table.TORCH_LOAD_PATH.name) for s in torch_loads] == \
        [str(tmp_path / "plain.pt")]  # only the load outside DCP
    read, = [s for s in finished if s.name == span_table.DCP_LOAD_READ.name]
    assert read.attributes[span_table.DCP_ITEMS_READ.name] == 12


def test_the_loads_own_error_reaches_the_caller_unchanged(instrumented, exporter, checkpoint):
    boom = RuntimeError("reader broke")

    class BrokenReader(dcp.FileSystemReader):
        def read_data(self, plan, planner):
            raise boom

    # DCP gathers each rank's failure into a CheckpointException (a BaseException).
    with pytest.raises(dcp.CheckpointException) as caught:
        dcp.load({"w": torch.zeros(4096)}, storage_reader=BrokenReader(str(checkpoint)))
    assert caught.value.failures[0][0] is boom  # (exception, traceback) per rank
    spans = {s.name: s for s in exporter.get_finished_spans()}
    read, load = spans[span_table.DCP_LOAD_READ.name], spans[span_table.DCP_LOAD.name]
    assert read.status.status_code is StatusCode.ERROR
    assert read.events[0].attributes["exception.message"] == "reader broke"
    assert load.status.status_code is StatusCode.ERROR
    assert load.events[0].attributes["exception.type"].endswith("CheckpointException")


def test_a_failed_measurement_never_fails_the_load(instrumented, exporter, checkpoint,
                                                   monkeypatch, caplog):
    def no_proc():
        raise OSError("no /proc here")

    monkeypatch.setattr(_dcp_phases, "read_anonymous_bytes", no_proc)
    monkeypatch.setattr(_dcp_phases.log_once, "_logged", set())
    for _ in range(2):
        loaded = {"w": torch.zeros(4096)}
        dcp.load(loaded, checkpoint_id=str(checkpoint))
        assert torch.equal(loaded["w"], torch.arange(4096, dtype=torch.float32))
    spans = [s for s in exporter.get_finished_spans() if s.name == span_table.DCP_LOAD.name]
    assert len(spans) == 2
    for span in spans:
        assert "no /proc here" in span.attributes[span_table.DCP_RESIDENCY_ERROR.name]
        assert span_table.DCP_ANONYMOUS_DELTA.name not in span.attributes
        assert span.attributes[span_table.DCP_BYTES_READ.name] > 4 * 4096
    logged = [r for r in caplog.records if r.name == "yeto_otel.dcp"]
    assert len(logged) == 1 and "no /proc here" in logged[0].getMessage()


def test_reader_is_left_as_it_was_and_uninstrument_restores(instrumented, exporter,
                                                            checkpoint):
    reader = dcp.FileSystemReader(str(checkpoint))
    dcp.load({"w": torch.zeros(4096)}, storage_reader=reader)
    assert "read_data" not in vars(reader)
    instrumented.uninstrument()
    assert dcp.load is ORIGINAL_LOAD
    assert not hasattr(dcp.state_dict_loader._load_state_dict, "__yeto_dcp__")
    before = len(exporter.get_finished_spans())
    dcp.load({"w": torch.zeros(4096)}, storage_reader=reader)
    assert len(exporter.get_finished_spans()) == before


def test_uninstrument_leaves_a_wrapper_put_over_ours(provider, exporter, checkpoint):
    inst = DcpInstrumentor()
    inst.instrument(tracer_provider=provider)
    ours, calls = dcp.load, []

    def theirs(*args, **kwargs):
        calls.append(kwargs["checkpoint_id"])
        return ours(*args, **kwargs)

    dcp.load = theirs
    try:
        inst.uninstrument()
        assert dcp.load is theirs and dcp.state_dict_loader.load is ORIGINAL_LOAD
        loaded = {"w": torch.zeros(4096)}
        dcp.load(loaded, checkpoint_id=str(checkpoint))
        assert torch.equal(loaded["w"], torch.arange(4096, dtype=torch.float32))
        assert calls == [str(checkpoint)] and exporter.get_finished_spans() == ()
    finally:
        dcp.load = ORIGINAL_LOAD


def test_suppressed_instrumentation_gets_no_span(instrumented, exporter, checkpoint):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    exporter.clear()  # the checkpoint's own save
    loaded = {"w": torch.zeros(4096)}
    with suppress_instrumentation():
        dcp.load(loaded, checkpoint_id=str(checkpoint))
    assert torch.equal(loaded["w"], torch.arange(4096, dtype=torch.float32))
    assert exporter.get_finished_spans() == ()
    dcp.load({"w": torch.zeros(4096)}, checkpoint_id=str(checkpoint))
    assert span_table.DCP_LOAD.name in [s.name for s in exporter.get_finished_spans()]


def test_zero_code_under_opentelemetry_instrument(tmp_path):
    code = (
        "import torch, torch.distributed.checkpoint as dcp\n"
        f"p = {str(tmp_path / 'zc')!r}\n"
        "dcp.save({'w': torch.ones(1024)}, checkpoint_id=p)\n"
        "d = {'w': torch.zeros(1024)}\n"
        "dcp.load(d, checkpoint_id=p)\n"
        "assert torch.equal(d['w'], torch.ones(1024))\n"
        "print('trainer ran')\n")
    exported = traced_run(code)
    spans = [d for d in exported if d.get("name") == "dcp.load"]
    assert len(spans) == 1
    assert spans[0]["attributes"]["yeto.dcp.path"] == str(tmp_path / "zc")
    assert spans[0]["attributes"]["yeto.dcp.bytes_read"] >= 4 * 1024
    saves = [d for d in exported if d.get("name") == "dcp.save"]
    assert len(saves) == 1 and saves[0]["attributes"]["yeto.dcp.bytes_written"] >= 4 * 1024


def test_a_program_that_never_uses_dcp_gets_it_neither_imported_nor_patched(tmp_path):
    code = (
        "import sys, torch\n"
        f"p = {str(tmp_path / 'plain.pt')!r}\n"
        "torch.save(torch.ones(8), p)\n"
        "torch.load(p, weights_only=True)\n"
        "assert 'torch.distributed.checkpoint' not in sys.modules, 'imported by yeto_dcp'\n"
        "print('trainer ran')\n")
    names = [d.get("name") for d in traced_run(code)]
    assert names == ["torch.load"]  # the other load instrumentors go on as before
