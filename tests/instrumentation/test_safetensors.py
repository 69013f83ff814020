"""SafetensorsInstrumentor: spans for safetensors.torch.load_file, safetensors.torch.load and
safetensors.safe_open with what each mapped, touched and copied; the load's own errors pass
through; uninstrument() puts safetensors' own functions back."""

import gc
import json
import logging
import math
import mmap
import os
import subprocess
import sys

import pytest
import safetensors
import safetensors.torch
import torch
from opentelemetry.trace import StatusCode
from opentelemetry.util._importlib_metadata import entry_points

from yeto_otel import names as span_table
from yeto_otel.instrumentation import SafetensorsInstrumentor
from zero_code import traced_run

ORIGINAL_SAFE_OPEN = safetensors.safe_open
ORIGINAL_LOAD_FILE = safetensors.torch.load_file
ORIGINAL_LOAD = safetensors.torch.load
DOCUMENTED = {span.name: {a.name for a in span.attributes} for span in span_table.SPANS}
ST = "yeto.safetensors."


def _pages(size: int) -> int:
    return math.ceil(size / mmap.PAGESIZE) * mmap.PAGESIZE


@pytest.fixture
def instrumented(provider):
    inst = SafetensorsInstrumentor()  # a singleton: always uninstrument in teardown
    inst.instrument(tracer_provider=provider)
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()
    assert safetensors.safe_open is ORIGINAL_SAFE_OPEN
    assert safetensors.torch.load_file is ORIGINAL_LOAD_FILE


@pytest.fixture
def shard(tmp_path):
    """A 4 MiB tensor and two small ones, in a file nothing else has mapped."""
    path = tmp_path / "model.safetensors"
    safetensors.torch.save_file({"big": torch.randn(1024, 1024), "bias": torch.randn(1024),
                                 "scale": torch.ones(3)}, path)
    gc.collect()  # mappings of earlier tests' files are gone; this one was never mapped
    return path


def _spans(exporter, name):
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _check_documented(span):
    assert set(span.attributes) <= DOCUMENTED[span.name]


def test_registered_as_an_opentelemetry_instrumentor():
    eps = {ep.name: ep for ep in entry_points(group="opentelemetry_instrumentor")}
    assert eps["yeto_safetensors"].load() is SafetensorsInstrumentor


def test_load_file_span_measures_the_mapping(instrumented, exporter, shard):
    tensors = safetensors.torch.load_file(shard)
    assert torch.equal(tensors["scale"], torch.ones(3))
    (span,) = _spans(exporter, "safetensors.load_file")
    attributes = dict(span.attributes)
    size = os.path.getsize(shard)
    assert {k: attributes.pop(k) for k in (ST + "bytes_touched", ST + "anonymous_delta")}
    assert attributes == {ST + "path": str(shard), ST + "file_size": size, ST + "device": "cpu",
                          ST + "backend": "mmap", ST + "tensor_count": 3,
                          ST + "bytes_mapped": _pages(size)}
    assert 0 <= span.attributes[ST + "bytes_touched"] <= _pages(size)
    assert isinstance(span.attributes[ST + "anonymous_delta"], int)
    _check_documented(span)
    assert span.status.status_code is StatusCode.UNSET
    # its own safe_open is part of it, not a span of its own
    assert [s.name for s in exporter.get_finished_spans()] == ["safetensors.load_file"]


# Run in a fresh interpreter: in a long test process, memory that earlier tests freed may still
# be resident and be reused for the copies, which would hide them from the RssAnon delta.
_LOAD_BYTES_CHILD = """
import json, sys
import safetensors.torch, torch
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from yeto_otel.instrumentation import SafetensorsInstrumentor
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
SafetensorsInstrumentor().instrument(tracer_provider=provider)
data = open(sys.argv[1], "rb").read()
tensors = safetensors.torch.load(data)
assert tensors["huge"].shape == (4096, 4096)
(span,) = [s for s in exporter.get_finished_spans() if s.name == "safetensors.load"]
print(json.dumps(dict(span.attributes), default=str))
"""


def test_load_of_bytes_measures_the_copies(tmp_path):
    path = tmp_path / "large.safetensors"
    safetensors.torch.save_file({"huge": torch.ones(4096, 4096), "one": torch.ones(1)}, path)
    result = subprocess.run([sys.executable, "-c", _LOAD_BYTES_CHILD, str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    attributes = json.loads(result.stdout.strip().splitlines()[-1])
    assert attributes[ST + "data_size"] == os.path.getsize(path)
    assert attributes[ST + "tensor_count"] == 2
    # the tensors are copies out of `data` (64 MiB), still held when the span ends
    assert attributes[ST + "anonymous_delta"] >= 48 << 20
    assert not {ST + "path", ST + "bytes_mapped", ST + "bytes_touched"} & set(attributes)


def test_safe_open_partial_read_touches_part_of_the_file(instrumented, exporter, shard):
    with safetensors.safe_open(shard, framework="pt") as handle:
        rows = handle.get_slice("big")[0:2]
        assert rows.shape == (2, 1024)
        assert sorted(handle.keys()) == ["bias", "big", "scale"]  # passed to the real handle
        assert _spans(exporter, "safetensors.safe_open") == []  # open until the block ends
    (span,) = _spans(exporter, "safetensors.safe_open")
    size = os.path.getsize(shard)
    assert span.attributes[ST + "path"] == str(shard)
    assert span.attributes[ST + "file_size"] == size
    assert span.attributes[ST + "tensor_count"] == 3
    assert span.attributes[ST + "tensors_read"] == 1
    assert span.attributes[ST + "bytes_mapped"] == _pages(size)
    assert 0 < span.attributes[ST + "bytes_touched"] <= _pages(size)
    _check_documented(span)
    assert span.status.status_code is StatusCode.UNSET


def test_safe_open_without_with_ends_when_collected(instrumented, exporter, shard):
    handle = safetensors.safe_open(str(shard), "pt")
    handle.get_tensor("bias")
    handle.get_tensor("scale")
    assert _spans(exporter, "safetensors.safe_open") == []
    del handle
    gc.collect()
    (span,) = _spans(exporter, "safetensors.safe_open")
    assert span.attributes[ST + "tensors_read"] == 2


def test_the_loads_own_errors_pass_through_and_are_recorded(instrumented, exporter, tmp_path,
                                                            shard):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(FileNotFoundError) as traced:
        safetensors.torch.load_file(missing)
    with pytest.raises(FileNotFoundError) as plain:
        ORIGINAL_LOAD_FILE(missing)
    assert str(traced.value) == str(plain.value)
    with pytest.raises(safetensors.SafetensorError):
        safetensors.torch.load(b"not a safetensors file")
    with pytest.raises(FileNotFoundError):
        safetensors.safe_open(missing, framework="pt")
    with pytest.raises(KeyError, match="raised in the block"):
        with safetensors.safe_open(shard, framework="pt"):
            raise KeyError("raised in the block")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["safetensors.load_file", "safetensors.load",
                                       "safetensors.safe_open", "safetensors.safe_open"]
    kinds = ["FileNotFoundError", "SafetensorError", "FileNotFoundError", "KeyError"]
    for span, kind in zip(spans, kinds):
        assert span.status.status_code is StatusCode.ERROR
        (exception,) = [e for e in span.events if e.name == "exception"]
        assert exception.attributes["exception.type"].rsplit(".", 1)[-1] == kind
    assert spans[0].attributes[ST + "path"] == str(missing)
    assert ST + "file_size" not in spans[0].attributes


def test_a_measuring_failure_is_logged_once_and_the_load_goes_on(instrumented, exporter, shard,
                                                                 monkeypatch, caplog):
    from yeto_otel.instrumentation import _load_residency
    from yeto_otel.proc import ProcReadError

    def no_proc(*args, **kwargs):
        raise ProcReadError("/proc/self/status: no such file")

    monkeypatch.setattr(_load_residency, "read_anonymous_bytes", no_proc)
    monkeypatch.setattr(_load_residency.log_once, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="yeto_otel.safetensors"):
        for _ in range(3):
            assert safetensors.torch.load_file(shard)["scale"].sum() == 3
    spans = _spans(exporter, "safetensors.load_file")
    assert len(spans) == 3
    for span in spans:
        assert "no such file" in span.attributes[ST + "residency_error"]
        assert ST + "anonymous_delta" not in span.attributes
        assert span.attributes[ST + "bytes_mapped"] > 0  # what could be measured still is
        assert span.status.status_code is StatusCode.UNSET
    assert len([r for r in caplog.records if "cannot measure" in r.getMessage()]) == 1


def test_uninstrument_restores_safetensors_exactly(provider, exporter, shard):
    inst = SafetensorsInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        held = safetensors.safe_open  # as `from safetensors import safe_open` would keep it
        assert held is not ORIGINAL_SAFE_OPEN
        assert safetensors.torch.load_file is not ORIGINAL_LOAD_FILE
        assert safetensors.torch.load is not ORIGINAL_LOAD
    finally:
        inst.uninstrument()
    assert safetensors.safe_open is ORIGINAL_SAFE_OPEN
    assert safetensors.torch.safe_open is ORIGINAL_SAFE_OPEN
    assert safetensors.torch.load_file is ORIGINAL_LOAD_FILE
    assert safetensors.torch.load is ORIGINAL_LOAD
    safetensors.torch.load_file(shard)
    with held(shard, framework="pt") as handle:  # a wrapper still held calls straight through
        assert type(handle) is ORIGINAL_SAFE_OPEN
    assert exporter.get_finished_spans() == ()


def test_uninstrument_leaves_a_wrapper_put_over_ours(provider, exporter, shard):
    inst = SafetensorsInstrumentor()
    inst.instrument(tracer_provider=provider)
    ours, calls = safetensors.torch.load_file, []

    def theirs(*args, **kwargs):
        calls.append(args[0])
        return ours(*args, **kwargs)

    safetensors.torch.load_file = theirs
    try:
        inst.uninstrument()
        assert safetensors.torch.load_file is theirs
        assert safetensors.safe_open is ORIGINAL_SAFE_OPEN
        assert torch.equal(safetensors.torch.load_file(shard)["scale"], torch.ones(3))
        assert calls == [shard] and exporter.get_finished_spans() == ()
    finally:
        safetensors.torch.load_file = ORIGINAL_LOAD_FILE


def test_suppressed_instrumentation_gets_no_span(instrumented, exporter, shard):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    data = shard.read_bytes()
    with suppress_instrumentation():
        loaded = safetensors.torch.load_file(shard)
        copied = safetensors.torch.load(data)
        with safetensors.safe_open(shard, framework="pt") as handle:
            opened = handle.get_tensor("bias")
            assert type(handle) is ORIGINAL_SAFE_OPEN  # the real handle, not ours
    assert exporter.get_finished_spans() == ()
    assert torch.equal(loaded["bias"], ORIGINAL_LOAD_FILE(shard)["bias"])
    assert torch.equal(copied["big"], loaded["big"]) and torch.equal(opened, loaded["bias"])
    safetensors.torch.load_file(shard)  # and outside the block, traced again
    assert [s.name for s in exporter.get_finished_spans()] == ["safetensors.load_file"]


def test_instrument_again_after_uninstrument(provider, exporter, shard):
    inst = SafetensorsInstrumentor()
    for _ in range(2):
        inst.instrument(tracer_provider=provider)
        try:
            safetensors.torch.load_file(shard)
        finally:
            inst.uninstrument()
    assert len(_spans(exporter, "safetensors.load_file")) == 2


ZERO_CODE = r"""
import sys
assert "safetensors" not in sys.modules, "imported by the instrumentor"
import torch
from safetensors import safe_open
from safetensors.torch import load, load_file, save_file
save_file({"a": torch.ones(8), "b": torch.zeros(4)}, PATH)
load_file(PATH)
load(open(PATH, "rb").read())
with safe_open(PATH, framework="pt") as f:
    f.get_tensor("a")
print("trainer ran")
"""


def _zero_code_spans(tmp_path, disabled: str):
    path = str(tmp_path / "zc.safetensors")
    spans = [d for d in traced_run(f"PATH = {path!r}\n" + ZERO_CODE, disabled)
             if d.get("name", "").startswith("safetensors.")]
    return {d["name"]: d for d in spans}, [d["name"] for d in spans], path


def test_zero_code_traces_safetensors(tmp_path):
    spans, order, path = _zero_code_spans(tmp_path, "yeto_host_memory")
    # load_file's own safe_open (safetensors.torch imported the wrapper) is no span of its own
    assert order == ["safetensors.load_file", "safetensors.load", "safetensors.safe_open"]
    assert spans["safetensors.load_file"]["attributes"][ST + "path"] == path
    assert spans["safetensors.load_file"]["attributes"][ST + "tensor_count"] == 2
    assert spans["safetensors.load_file"]["attributes"][ST + "bytes_mapped"] > 0
    assert spans["safetensors.load"]["attributes"][ST + "tensor_count"] == 2
    assert spans["safetensors.safe_open"]["attributes"][ST + "tensors_read"] == 1


def test_zero_code_disabled_by_its_entry_point_name(tmp_path):
    _, order, _ = _zero_code_spans(tmp_path, "yeto_host_memory,yeto_safetensors")
    assert order == []
