"""The `yeto.resume.anchors` residency span and its `.load` child, through the SDK exporter;
the block's lifetime; loading never modifies the file."""

import gc
import math
import os

import pytest
import torch
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from anchor_testkit import PAGE, file_mappings, one_span, sha256
from yeto_otel import names as span_table
from yeto_otel.anchors import ResumeAnchors, load_resume_anchors, save_resume_anchors

N_TENSORS = 16
NUMEL = 64 * 1024  # 256 KiB each in float32


@pytest.fixture
def anchor_file(tmp_path):
    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, {f"shard.{i}": torch.randn(NUMEL) for i in range(N_TENSORS)})
    return path


def _documented(spec) -> set[str]:
    return {a.name for a in spec.attributes}


def test_mapped_span_attributes(anchor_file, provider, exporter):
    size = os.path.getsize(anchor_file)
    with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
        assert isinstance(anchors, ResumeAnchors)
        for i in range(0, N_TENSORS, 4):
            float(anchors.tensors[f"shard.{i}"].sum())
            anchors.fragment_done(i)
    span = one_span(exporter, "yeto.resume.anchors")
    attrs = dict(span.attributes)
    # every documented attribute but the error-only one, and nothing undocumented
    assert set(attrs) == _documented(span_table.RESUME_ANCHORS) - {"yeto.anchors.residency_error"}
    assert attrs["yeto.anchors.path"] == os.path.abspath(anchor_file)
    assert attrs["yeto.anchors.file_size"] == size
    assert attrs["yeto.anchors.load_mode"] == "mmap"
    assert attrs["yeto.anchors.dtype"] == "float32"
    assert attrs["yeto.anchors.tensor_count"] == N_TENSORS
    # torch maps the whole file once: its size rounded up to pages
    assert attrs["yeto.anchors.bytes_mapped"] == math.ceil(size / PAGE) * PAGE
    touched = attrs["yeto.anchors.bytes_touched"]
    read = 4 * NUMEL * 4
    # the shards read, plus what the kernel maps around each fault (fault-around, or a whole
    # large page-cache folio of up to 2 MiB at either edge of a shard): never the whole file
    assert read <= touched <= min(read + 4 * 2 * 2 * 1024 * 1024, attrs["yeto.anchors.bytes_mapped"])
    assert isinstance(attrs["yeto.anchors.anonymous_delta"], int)
    assert attrs["yeto.anchors.fragments_done"] == 4
    assert span.status.status_code is StatusCode.UNSET
    assert span.end_time is not None

    load = one_span(exporter, "yeto.resume.anchors.load")
    assert load.parent is not None and load.parent.span_id == span.context.span_id
    assert load.context.trace_id == span.context.trace_id
    assert span.start_time <= load.start_time <= load.end_time <= span.end_time
    assert dict(load.attributes) == {"yeto.anchors.tensor_count": N_TENSORS}
    assert set(load.attributes) <= _documented(span_table.RESUME_ANCHORS_LOAD)
    assert span.instrumentation_scope.name == "yeto_otel.anchors"


def test_eager_span_attributes(anchor_file, provider, exporter, setting):
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", "0")
    size = os.path.getsize(anchor_file)
    with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
        assert file_mappings(anchor_file) == []
        anchors.fragment_done("only")
    attrs = dict(one_span(exporter, "yeto.resume.anchors").attributes)
    assert attrs["yeto.anchors.load_mode"] == "eager"
    assert attrs["yeto.anchors.bytes_mapped"] == 0
    assert attrs["yeto.anchors.bytes_touched"] == size
    assert attrs["yeto.anchors.file_size"] == size
    assert attrs["yeto.anchors.tensor_count"] == N_TENSORS
    assert attrs["yeto.anchors.fragments_done"] == 1


def test_eager_fallback_span_attributes(tmp_path, provider, exporter):
    path = tmp_path / "legacy.pt"
    torch.save({"a": torch.randn(1000), "b": torch.randn(10)}, path,
               _use_new_zipfile_serialization=False)
    with load_resume_anchors(path, tracer_provider=provider):
        pass
    attrs = dict(one_span(exporter, "yeto.resume.anchors").attributes)
    assert attrs["yeto.anchors.load_mode"] == "eager_fallback"
    assert attrs["yeto.anchors.bytes_mapped"] == 0
    assert attrs["yeto.anchors.bytes_touched"] == os.path.getsize(path)
    assert attrs["yeto.anchors.fragments_done"] == 0


def test_one_fragment_done_event_per_call_with_growing_bytes_touched(anchor_file, provider,
                                                                     exporter):
    ids = [3, "fragment-b", 0, 7, 7]
    with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
        for k, fragment in enumerate(ids):
            float(anchors.tensors[f"shard.{k * 3}"].sum())
            anchors.fragment_done(fragment)
    span = one_span(exporter, "yeto.resume.anchors")
    events = [e for e in span.events if e.name == "fragment_done"]
    assert [e.attributes["yeto.fragment.id"] for e in events] == ids
    touched = [e.attributes["yeto.anchors.bytes_touched"] for e in events]
    assert touched == sorted(touched)
    assert touched[0] >= NUMEL * 4 and touched[-1] > touched[0]
    assert touched[-1] <= span.attributes["yeto.anchors.bytes_touched"]
    assert span.attributes["yeto.anchors.fragments_done"] == len(ids)
    documented = {a.name for a in span_table.FRAGMENT_DONE.attributes}
    assert all(set(e.attributes) == documented for e in events)


def test_exception_in_the_block_is_recorded_and_propagates(anchor_file, provider, exporter):
    with pytest.raises(KeyError, match="shard.99"):
        with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
            anchors.tensors["shard.99"]
    span = one_span(exporter, "yeto.resume.anchors")
    assert span.status.status_code is StatusCode.ERROR
    assert "KeyError" in span.status.description
    exceptions = [e for e in span.events if e.name == "exception"]
    assert len(exceptions) == 1
    assert exceptions[0].attributes["exception.type"] == "KeyError"
    assert "yeto.anchors.bytes_touched" in span.attributes  # the window still closes normally
    with pytest.raises(RuntimeError):
        anchors.tensors


def test_anchors_span_is_current_inside_the_block(anchor_file, provider, exporter):
    tracer = provider.get_tracer("catch-up")
    outside = trace.get_current_span()
    with tracer.start_as_current_span("restart") as restart:
        with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
            assert trace.get_current_span() is anchors.span
            with tracer.start_as_current_span("catch_up.fragment"):
                pass
        assert trace.get_current_span() is restart
    assert trace.get_current_span() is outside
    spans = {s.name: s for s in exporter.get_finished_spans()}
    anchors_span = spans["yeto.resume.anchors"]
    assert spans["catch_up.fragment"].parent.span_id == anchors_span.context.span_id
    assert anchors_span.parent.span_id == spans["restart"].context.span_id


def test_block_end_releases_the_tensors_and_the_mapping(anchor_file, provider):
    with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
        kept = anchors.tensors["shard.5"]
        assert len(file_mappings(anchor_file)) >= 1
    with pytest.raises(RuntimeError, match="released"):
        anchors.tensors
    assert file_mappings(anchor_file), "the test's own tensor still holds the mapping"
    del kept
    gc.collect()
    assert file_mappings(anchor_file) == []


def test_close_without_a_block_ends_the_span_once(anchor_file, provider, exporter):
    anchors = load_resume_anchors(anchor_file, tracer_provider=provider)
    assert anchors.tensors["shard.0"].numel() == NUMEL
    assert not [s for s in exporter.get_finished_spans() if s.name == "yeto.resume.anchors"]
    anchors.close()
    anchors.close()
    assert one_span(exporter, "yeto.resume.anchors").status.status_code is StatusCode.UNSET
    gc.collect()
    assert file_mappings(anchor_file) == []


def test_writing_into_a_mapped_tensor_never_changes_the_file(anchor_file, provider):
    digest = sha256(anchor_file)
    before = os.stat(anchor_file)
    with load_resume_anchors(anchor_file, tracer_provider=provider) as anchors:
        t = anchors.tensors["shard.2"]
        assert anchors.load_mode == "mmap"
        t.fill_(42.0)
        anchors.tensors["shard.3"][::1000] = -1.0
        assert float(t[-1]) == 42.0  # the write went somewhere: private copy-on-write pages
        del t
    gc.collect()
    after = os.stat(anchor_file)
    assert sha256(anchor_file) == digest
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns, before.st_size, before.st_ino)
    with load_resume_anchors(anchor_file) as anchors:  # a second load sees the saved values
        assert float(anchors.tensors["shard.2"][-1]) != 42.0


def test_default_tracer_provider_is_the_global_one(anchor_file):
    # without tracer_provider= the API's global provider is used (a no-op one here): no error
    with load_resume_anchors(anchor_file) as anchors:
        anchors.fragment_done(1)
        assert len(anchors.tensors) == N_TENSORS
