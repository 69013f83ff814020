"""TorchLoadInstrumentor: a `torch.load` span around every torch.load call; uninstrument()
puts torch's own function back; torch is patched when imported later."""

import io
import json
import logging
import math
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch.serialization
from opentelemetry.trace import StatusCode
from opentelemetry.util._importlib_metadata import entry_points

from yeto_otel import names as span_table
from zero_code import traced_run
from yeto_otel.instrumentation import TorchLoadInstrumentor, _guard

ORIGINAL_LOAD = torch.load
ORIGINAL_SERIALIZATION_LOAD = torch.serialization.load
DOCUMENTED = {a.name for a in span_table.TORCH_LOAD.attributes}


@pytest.fixture
def instrumented(provider):
    inst = TorchLoadInstrumentor()  # a singleton: always uninstrument in teardown
    inst.instrument(tracer_provider=provider)
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()
    assert torch.load is ORIGINAL_LOAD


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.randn(64, 64), "b": torch.randn(64)}, path)
    return path


def _load_spans(exporter):
    return [s for s in exporter.get_finished_spans() if s.name == "torch.load"]


def test_registered_as_an_opentelemetry_instrumentor():
    eps = {ep.name: ep for ep in entry_points(group="opentelemetry_instrumentor")}
    assert eps["yeto_torch_load"].load() is TorchLoadInstrumentor


def test_torch_is_the_same_function_before_instrumenting():
    assert ORIGINAL_LOAD is ORIGINAL_SERIALIZATION_LOAD


def test_path_str_mapped(instrumented, exporter, checkpoint):
    result = torch.load(str(checkpoint), mmap=True, weights_only=True)
    assert torch.equal(result["b"], torch.load(checkpoint, weights_only=True)["b"])
    first = _load_spans(exporter)[0]
    size = os.path.getsize(checkpoint)
    assert dict(first.attributes) == {
        "yeto.torch_load.path": str(checkpoint),
        "yeto.torch_load.file_size": size,
        "yeto.torch_load.mmap": True,
        "yeto.torch_load.bytes_mapped": math.ceil(size / 4096) * 4096,
    }
    assert set(first.attributes) <= DOCUMENTED
    assert first.status.status_code is StatusCode.UNSET


def test_pathlike_eager(instrumented, exporter, checkpoint):
    torch.load(pathlib.Path(checkpoint), weights_only=True)
    (span,) = _load_spans(exporter)
    assert dict(span.attributes) == {"yeto.torch_load.path": str(checkpoint),
                                     "yeto.torch_load.file_size": os.path.getsize(checkpoint),
                                     "yeto.torch_load.mmap": False}


def test_relative_path_is_recorded_absolute(instrumented, exporter, checkpoint, monkeypatch):
    monkeypatch.chdir(checkpoint.parent)
    torch.load(checkpoint.name, weights_only=True, mmap=True)
    (span,) = _load_spans(exporter)
    assert span.attributes["yeto.torch_load.path"] == str(checkpoint)


def test_an_open_file_is_recorded_with_its_path_and_size(instrumented, exporter, checkpoint):
    """Lightning resumes with `with open(path, "rb") as f: torch.load(f)`."""
    expected = torch.load(checkpoint, weights_only=True)
    exporter.clear()
    with open(checkpoint, "rb") as f:
        result = torch.load(f, weights_only=True)
    assert torch.equal(result["w"], expected["w"])
    (span,) = _load_spans(exporter)
    assert dict(span.attributes) == {"yeto.torch_load.path": str(checkpoint),
                                     "yeto.torch_load.file_size": os.path.getsize(checkpoint),
                                     "yeto.torch_load.mmap": False}


def test_a_buffer_gets_a_span_without_path_or_size(instrumented, exporter, checkpoint):
    result = torch.load(io.BytesIO(checkpoint.read_bytes()), weights_only=True)
    assert result["b"].shape == (64,)
    (span,) = _load_spans(exporter)
    assert dict(span.attributes) == {"yeto.torch_load.mmap": False}


def test_the_files_position_is_left_where_the_caller_put_it(instrumented, exporter, tmp_path):
    # A legacy checkpoint after a header of the caller's own: torch reads from where the file
    # is positioned, so the load only works if nothing of ours moved it.
    path = tmp_path / "with-header.pt"
    with open(path, "wb") as f:
        f.write(b"caller's own header\n")
        torch.save({"a": torch.arange(5.0)}, f, _use_new_zipfile_serialization=False)
    with open(path, "rb") as f:
        f.readline()
        result = torch.load(f, weights_only=True)
    assert torch.equal(result["a"], torch.arange(5.0))
    (span,) = _load_spans(exporter)
    assert span.attributes["yeto.torch_load.path"] == str(path)
    assert span.attributes["yeto.torch_load.file_size"] == os.path.getsize(path)


def test_a_file_known_by_its_descriptor_only_has_its_size(instrumented, exporter, checkpoint,
                                                           tmp_path):
    with os.fdopen(os.open(checkpoint, os.O_RDONLY), "rb") as f:  # named by its fd number
        torch.load(f, weights_only=True)
    moved = tmp_path / "moved.pt"
    with open(checkpoint, "rb") as f:
        os.rename(checkpoint, moved)  # the name now names nothing...
        torch.load(f, weights_only=True)
    with open(moved, "rb") as f:
        os.rename(moved, checkpoint)
        torch.save({"other": torch.ones(1)}, moved)  # ...or another file
        torch.load(f, weights_only=True)
    size = os.path.getsize(checkpoint)
    assert [dict(s.attributes) for s in _load_spans(exporter)] == [
        {"yeto.torch_load.file_size": size, "yeto.torch_load.mmap": False}] * 3


class _NameRaises(io.BytesIO):
    @property
    def name(self):
        raise RuntimeError("no name here")

    def fileno(self):
        raise RuntimeError("no descriptor either")


def test_a_file_object_that_fails_our_lookups_still_loads(instrumented, exporter, checkpoint,
                                                          caplog, monkeypatch):
    monkeypatch.setattr(_guard, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="yeto_otel.instrumentation"):
        for _ in range(2):
            result = torch.load(_NameRaises(checkpoint.read_bytes()), weights_only=True)
            assert result["w"].shape == (64, 64)
    assert [s.name for s in _load_spans(exporter)] == ["torch.load"] * 2
    logged = [r.getMessage() for r in caplog.records if r.name == "yeto_otel.instrumentation"]
    assert len(logged) == 1 and "no descriptor either" in logged[0]


def test_torch_serialization_load_is_traced_too(instrumented, exporter, checkpoint):
    assert torch.serialization.load is torch.load
    torch.serialization.load(checkpoint, weights_only=True)
    assert len(_load_spans(exporter)) == 1


def test_failing_load_records_the_error_and_reraises(instrumented, exporter, tmp_path):
    missing = tmp_path / "missing.pt"
    with pytest.raises(FileNotFoundError):
        torch.load(missing, weights_only=True)
    with open(tmp_path / "legacy.pt", "wb") as f:
        torch.save({"a": torch.randn(2)}, f, _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="mmap can only be used"):
        torch.load(tmp_path / "legacy.pt", mmap=True, weights_only=True)
    no_file, legacy = _load_spans(exporter)
    for span, kind in ((no_file, "FileNotFoundError"), (legacy, "RuntimeError")):
        assert span.status.status_code is StatusCode.ERROR
        exceptions = [e for e in span.events if e.name == "exception"]
        assert len(exceptions) == 1 and exceptions[0].attributes["exception.type"] == kind
    assert "yeto.torch_load.file_size" not in no_file.attributes
    assert no_file.attributes["yeto.torch_load.path"] == str(missing)
    assert legacy.attributes["yeto.torch_load.mmap"] is True
    assert "yeto.torch_load.bytes_mapped" not in legacy.attributes


def test_wrapper_keeps_torchs_signature_and_doc(instrumented):
    assert torch.load is not ORIGINAL_LOAD
    assert torch.load.__wrapped__ is ORIGINAL_LOAD
    assert torch.load.__name__ == "load" and torch.load.__doc__ == ORIGINAL_LOAD.__doc__


def test_uninstrument_restores_torch_load_exactly(provider, exporter, checkpoint):
    inst = TorchLoadInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        assert torch.load is not ORIGINAL_LOAD
        assert torch.serialization.load is torch.load
    finally:
        inst.uninstrument()
    assert torch.load is ORIGINAL_LOAD
    assert torch.serialization.load is ORIGINAL_SERIALIZATION_LOAD
    torch.load(checkpoint, weights_only=True)
    assert _load_spans(exporter) == []


def test_uninstrument_leaves_a_wrapper_put_over_ours(provider, exporter, checkpoint):
    """Another library wrapped torch.load after us: uninstrument leaves its wrapper in place,
    which keeps working through ours, now calling straight through; instrumented anew, each
    load has one span again."""
    inst = TorchLoadInstrumentor()
    inst.instrument(tracer_provider=provider)
    ours, calls = torch.load, []

    def theirs(*args, **kwargs):
        calls.append(args[0])
        return ours(*args, **kwargs)

    torch.load = theirs
    try:
        inst.uninstrument()
        assert torch.load is theirs
        assert torch.serialization.load is ORIGINAL_SERIALIZATION_LOAD
        assert torch.equal(torch.load(checkpoint, weights_only=True)["b"],
                           ORIGINAL_LOAD(checkpoint, weights_only=True)["b"])
        assert calls == [checkpoint] and _load_spans(exporter) == []
        inst.instrument(tracer_provider=provider)
        torch.load(checkpoint, weights_only=True)
        inst.uninstrument()
        assert torch.load is theirs and len(calls) == 2
        assert len(_load_spans(exporter)) == 1
    finally:
        torch.load = ORIGINAL_LOAD


def test_instrument_again_after_uninstrument(provider, exporter, checkpoint):
    inst = TorchLoadInstrumentor()
    for _ in range(2):
        inst.instrument(tracer_provider=provider)
        try:
            torch.load(checkpoint, weights_only=True)
        finally:
            inst.uninstrument()
        assert torch.load is ORIGINAL_LOAD
    assert len(_load_spans(exporter)) == 2


def test_resume_anchor_loads_nest_under_the_load_span(instrumented, provider, exporter, tmp_path):
    from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, {"a": torch.randn(100)})
    with load_resume_anchors(path, tracer_provider=provider):
        pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["torch.load"].parent.span_id == spans["yeto.resume.anchors.load"].context.span_id
    assert spans["torch.load"].attributes["yeto.torch_load.mmap"] is True
    assert spans["torch.load"].attributes["yeto.torch_load.bytes_mapped"] > 0


LATE_IMPORT = r"""
import json, sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from yeto_otel.instrumentation import TorchLoadInstrumentor, _guard

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
inst = TorchLoadInstrumentor()
inst.instrument(tracer_provider=provider)
report = {"torch_before": "torch" in sys.modules}
import torch
import torch.serialization
report["wrapped"] = hasattr(torch.load, "__wrapped__")
report["serialization_wrapped"] = torch.serialization.load is torch.load
report["watchers_left"] = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "ImportWatch"]
torch.save({"a": torch.ones(3)}, sys.argv[1])
torch.load(sys.argv[1], weights_only=True, mmap=True)
report["spans"] = [(s.name, dict(s.attributes)) for s in exporter.get_finished_spans()]
original = torch.load.__wrapped__
inst.uninstrument()
report["restored"] = torch.load is original and torch.serialization.load is original
print(json.dumps(report))
"""


def test_torch_imported_after_instrument_is_patched_on_import(tmp_path):
    path = tmp_path / "late.pt"
    done = subprocess.run([sys.executable, "-c", LATE_IMPORT, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["torch_before"] is False
    assert report["wrapped"] is True and report["serialization_wrapped"] is True
    assert report["watchers_left"] == []
    (name, attributes), = report["spans"]
    assert name == "torch.load"
    assert attributes["yeto.torch_load.path"] == str(path)
    assert attributes["yeto.torch_load.mmap"] is True
    assert attributes["yeto.torch_load.bytes_mapped"] > 0
    assert report["restored"] is True


UNINSTRUMENT_BEFORE_IMPORT = r"""
import sys
from yeto_otel.instrumentation import TorchLoadInstrumentor, _guard
inst = TorchLoadInstrumentor()
inst.instrument()
inst.uninstrument()
assert not [f for f in sys.meta_path if type(f).__name__ == "ImportWatch"]
import torch
assert not hasattr(torch.load, "__wrapped__"), "patched after uninstrument"
print("ok")
"""


def test_uninstrument_before_torch_is_imported_leaves_torch_alone():
    done = subprocess.run([sys.executable, "-c", UNINSTRUMENT_BEFORE_IMPORT], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]


ZERO_CODE = r"""
import sys
assert "torch" not in sys.modules
import torch
torch.save({"a": torch.ones(8)}, PATH)
torch.load(PATH, mmap=True, weights_only=True)
print("trainer ran")
"""


def test_zero_code_traces_torch_load(tmp_path):
    code = f"PATH = {str(tmp_path / 'zc.pt')!r}\n" + ZERO_CODE
    spans = [d for d in traced_run(code) if d.get("name") == "torch.load"]
    assert len(spans) == 1
    attributes = spans[0]["attributes"]
    assert attributes["yeto.torch_load.path"] == str(tmp_path / "zc.pt")
    assert attributes["yeto.torch_load.mmap"] is True
    assert attributes["yeto.torch_load.bytes_mapped"] > 0


def test_an_anchor_save_makes_no_torch_load_span(instrumented, exporter, tmp_path):
    """save_resume_anchors looks up its own layout with a meta-device torch.load: not a
    checkpoint load of the trainer's, so it gets no span (OpenTelemetry's suppression)."""
    from yeto_otel.anchors import save_resume_anchors

    save_resume_anchors(tmp_path / "anchors.pt", {"w": torch.ones(8)})
    assert _load_spans(exporter) == []


def test_suppressed_instrumentation_gets_no_span(instrumented, exporter, checkpoint):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        torch.load(checkpoint, weights_only=True)
    assert _load_spans(exporter) == []
    torch.load(checkpoint, weights_only=True)
    assert len(_load_spans(exporter)) == 1
