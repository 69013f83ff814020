"""DcpInstrumentor on saves: a `dcp.save` span per save with what the rank wrote; an
`async_save` returns at once and its upload span ends when the returned future completes;
the save's own error passes through; measuring never fails a save; uninstrument() puts
torch's functions back. (The real 2-rank gloo save and async_save are in test_dcp.py.)"""

import threading
import time

import pytest
import torch
import torch.distributed.checkpoint as dcp
from opentelemetry.trace import StatusCode

from yeto_otel import names as span_table
from yeto_otel.instrumentation import DcpInstrumentor
from yeto_otel.instrumentation import _dcp_phases

ORIGINAL_SAVE = dcp.save
ORIGINAL_ASYNC_SAVE = dcp.async_save
DEADLINE = 60  # seconds: a background thread on a shared 2-core machine


@pytest.fixture
def instrumented(provider):
    inst = DcpInstrumentor()  # a singleton: always uninstrument in teardown
    inst.instrument(tracer_provider=provider)
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()
    assert dcp.save is ORIGINAL_SAVE and dcp.state_dict_saver.save is ORIGINAL_SAVE
    assert dcp.async_save is ORIGINAL_ASYNC_SAVE


class GatedWriter(dcp.FileSystemWriter):
    """Writes once `gate` is set, or raises `failure` instead."""

    def __init__(self, path, gate: threading.Event, failure: BaseException | None = None):
        super().__init__(path)
        self.gate, self.failure = gate, failure

    def write_data(self, plan, planner):
        if not self.gate.wait(DEADLINE):
            raise TimeoutError("the test never opened the gate")
        if self.failure is not None:
            raise self.failure
        return super().write_data(plan, planner)


def _named(exporter, name):
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _wait_for(exporter, name):
    deadline = time.monotonic() + DEADLINE
    while not _named(exporter, name):
        assert time.monotonic() < deadline, f"no {name} span"
        time.sleep(0.01)
    span, = _named(exporter, name)
    return span


def _data_bytes(directory) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.suffix == ".distcp")


def test_a_save_has_its_span_with_what_it_wrote(instrumented, exporter, tmp_path):
    dcp.save({"w": torch.arange(4096, dtype=torch.float32), "b": torch.ones(7)},
             checkpoint_id=str(tmp_path / "c"))
    save, = _named(exporter, span_table.DCP_SAVE.name)
    plan, = _named(exporter, span_table.DCP_SAVE_PLAN.name)
    write, = _named(exporter, span_table.DCP_SAVE_WRITE.name)
    attributes = save.attributes
    assert set(attributes) <= {a.name for a in span_table.DCP_SAVE.attributes}
    assert attributes[span_table.DCP_PATH.name] == str(tmp_path / "c")
    assert attributes[span_table.DCP_ITEMS_WRITTEN.name] == 2
    assert attributes[span_table.DCP_FILES_WRITTEN.name] == 1
    assert attributes[span_table.DCP_BYTES_WRITTEN.name] == _data_bytes(tmp_path / "c")
    assert plan.parent.span_id == write.parent.span_id == save.context.span_id
    assert plan.end_time <= write.start_time
    assert save.status.status_code is StatusCode.UNSET


def test_async_save_returns_at_once_and_its_upload_ends_with_the_future(
        instrumented, exporter, tmp_path):
    gate = threading.Event()
    future = dcp.async_save({"w": torch.arange(4096, dtype=torch.float32)},
                            storage_writer=GatedWriter(str(tmp_path / "a"), gate))
    try:
        # The call is over and traced while the upload still waits on the gate.
        call, = _named(exporter, span_table.DCP_ASYNC_SAVE.name)
        assert not future.done()
        assert not _named(exporter, span_table.DCP_ASYNC_SAVE_UPLOAD.name)
        assert call.attributes[span_table.DCP_PATH.name] == str(tmp_path / "a")
        assert isinstance(call.attributes[span_table.DCP_ANONYMOUS_DELTA.name], int)
    finally:
        gate.set()
    future.result(timeout=DEADLINE)
    upload = _wait_for(exporter, span_table.DCP_ASYNC_SAVE_UPLOAD.name)
    save, = _named(exporter, span_table.DCP_SAVE.name)
    assert upload.parent.span_id == call.context.span_id
    assert save.parent.span_id == upload.context.span_id  # across the executor's thread
    assert save.context.trace_id == call.context.trace_id
    assert call.end_time <= save.end_time <= upload.end_time
    assert upload.status.status_code is StatusCode.UNSET
    assert save.attributes[span_table.DCP_BYTES_WRITTEN.name] == _data_bytes(tmp_path / "a")


def test_a_failed_upload_is_recorded_and_the_future_keeps_its_error(
        instrumented, exporter, tmp_path):
    gate = threading.Event()
    gate.set()
    boom = OSError(28, "No space left on device")
    future = dcp.async_save({"w": torch.ones(64)},
                            storage_writer=GatedWriter(str(tmp_path / "f"), gate, boom))
    # DCP gathers each rank's failure into a CheckpointException (a BaseException).
    with pytest.raises(dcp.CheckpointException) as caught:
        future.result(timeout=DEADLINE)
    assert caught.value.failures[0][0] is boom
    upload = _wait_for(exporter, span_table.DCP_ASYNC_SAVE_UPLOAD.name)
    assert upload.status.status_code is StatusCode.ERROR
    assert upload.events[0].attributes["exception.type"].endswith("CheckpointException")
    write, = _named(exporter, span_table.DCP_SAVE_WRITE.name)
    assert write.status.status_code is StatusCode.ERROR
    assert write.events[0].attributes["exception.message"] == str(boom)
    call, = _named(exporter, span_table.DCP_ASYNC_SAVE.name)
    assert call.status.status_code is StatusCode.UNSET  # the call itself went well


def test_the_saves_own_error_reaches_the_caller_unchanged(instrumented, exporter, tmp_path):
    gate = threading.Event()
    gate.set()
    boom = RuntimeError("writer broke")
    with pytest.raises(dcp.CheckpointException) as caught:
        dcp.save({"w": torch.ones(64)},
                 storage_writer=GatedWriter(str(tmp_path / "e"), gate, boom))
    assert caught.value.failures[0][0] is boom
    save, = _named(exporter, span_table.DCP_SAVE.name)
    write, = _named(exporter, span_table.DCP_SAVE_WRITE.name)
    assert write.status.status_code is StatusCode.ERROR
    assert write.events[0].attributes["exception.message"] == "writer broke"
    assert save.status.status_code is StatusCode.ERROR
    assert save.events[0].attributes["exception.type"].endswith("CheckpointException")


def test_a_failed_measurement_never_fails_the_save(instrumented, exporter, tmp_path,
                                                   monkeypatch, caplog):
    def no_proc():
        raise OSError("no /proc here")

    monkeypatch.setattr(_dcp_phases, "read_anonymous_bytes", no_proc)
    monkeypatch.setattr(_dcp_phases.log_once, "_logged", set())
    for name in ("one", "two"):
        dcp.save({"w": torch.ones(1024)}, checkpoint_id=str(tmp_path / name))
        loaded = {"w": torch.zeros(1024)}
        dcp.load(loaded, checkpoint_id=str(tmp_path / name))
        assert torch.equal(loaded["w"], torch.ones(1024))
    saves = _named(exporter, span_table.DCP_SAVE.name)
    assert len(saves) == 2
    for save in saves:
        assert "no /proc here" in save.attributes[span_table.DCP_RESIDENCY_ERROR.name]
        assert span_table.DCP_ANONYMOUS_DELTA.name not in save.attributes
        assert save.attributes[span_table.DCP_BYTES_WRITTEN.name] > 4 * 1024
    logged = [r for r in caplog.records if r.name == "yeto_otel.dcp"]
    assert len(logged) == 1 and "no /proc here" in logged[0].getMessage()


def test_uninstrument_restores_save_and_async_save(instrumented, exporter, tmp_path):
    writer = dcp.FileSystemWriter(str(tmp_path / "w"))
    dcp.save({"w": torch.ones(8)}, storage_writer=writer)
    assert "write_data" not in vars(writer)  # the writer is left as it was
    held = dcp.save  # taken before uninstrument, as `from ... import save` would
    instrumented.uninstrument()
    assert dcp.save is ORIGINAL_SAVE and dcp.async_save is ORIGINAL_ASYNC_SAVE
    assert not hasattr(dcp.state_dict_saver._save_state_dict, "__yeto_dcp__")
    before = len(exporter.get_finished_spans())
    dcp.save({"w": torch.ones(8)}, checkpoint_id=str(tmp_path / "again"))
    held({"w": torch.ones(8)}, checkpoint_id=str(tmp_path / "held"))  # straight through
    dcp.async_save({"w": torch.ones(8)}, checkpoint_id=str(tmp_path / "later")).result(
        timeout=DEADLINE)
    assert len(exporter.get_finished_spans()) == before


def test_suppressed_instrumentation_gets_no_span(instrumented, exporter, tmp_path):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    state = {"w": torch.arange(64, dtype=torch.float32)}
    with suppress_instrumentation():
        dcp.save(state, checkpoint_id=str(tmp_path / "s"))
        future = dcp.async_save(state, checkpoint_id=str(tmp_path / "a"))
    future.result(timeout=DEADLINE)
    for name in ("s", "a"):
        loaded = {"w": torch.zeros(64)}
        dcp.state_dict_loader.load(loaded, checkpoint_id=str(tmp_path / name))
        assert torch.equal(loaded["w"], state["w"])
    # ...nor any span of the async_save's upload or of its background save, whose thread
    # does not inherit the caller's suppression
    assert [s.name for s in exporter.get_finished_spans()
            if s.name.startswith(("dcp.async_save", "dcp.save"))] == []


def test_the_background_save_is_matched_by_its_writer_object_not_only_its_id():
    """A key made from id(writer) could match a new writer that reuses a freed one's id:
    the offer holds the writer weakly and a save with another writer does not take it."""
    import threading

    from yeto_otel.instrumentation._dcp_async import _Handoff

    class Writer:
        pass

    handoff, offered, other, context = _Handoff(), Writer(), Writer(), object()
    key = ("writer", 1234)  # the same key for both writers, as a reused id would give
    handoff.offer(key, context, offered)
    taken = []
    for writer in (other, offered):
        thread = threading.Thread(target=lambda w=writer: taken.append(handoff.take(key, w)))
        thread.start()
        thread.join()
    assert taken == [None, context]
