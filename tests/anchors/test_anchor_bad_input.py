"""Every bad anchor file raises AnchorLoadError naming the file and the cause, is recorded on
the `yeto.resume.anchors` span (status ERROR, exception event, span ended), runs no code from
the file and leaves no anchors (nor their mapping) behind."""

import gc
import os
import pickle
import struct
import zipfile

import pytest
import torch
from opentelemetry.trace import StatusCode

from anchor_testkit import file_mappings, one_span, sha256
from yeto_otel.anchors import AnchorLoadError, load_resume_anchors, save_resume_anchors

MARKER_NAME = "code_ran"


class RunsCode:
    """Unpickling this runs a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def _valid(tmp_path, name="good.pt"):
    path = tmp_path / name
    save_resume_anchors(path, {f"t{i}": torch.randn(256) for i in range(8)})
    return path


def _member_data_offset(path, member_suffix):
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        info = next(i for i in z.infolist() if i.filename.endswith(member_suffix))
        f.seek(info.header_offset)
        header = f.read(30)
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_len + extra_len, info.file_size


# Each builder makes a bad file in tmp_path and returns (path, words the cause must contain).

def missing(tmp_path):
    return tmp_path / "nope.pt", ["no such file"]


def directory(tmp_path):
    (tmp_path / "dir.pt").mkdir()
    return tmp_path / "dir.pt", ["directory"]


def empty(tmp_path):
    (tmp_path / "empty.pt").write_bytes(b"")
    return tmp_path / "empty.pt", ["empty"]


def truncated_zip(tmp_path):
    path = _valid(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path, ["truncated"]


def truncated_zip_tail(tmp_path):  # only the end of the central directory is missing
    path = _valid(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    return path, ["truncated"]


def truncated_legacy(tmp_path):
    path = tmp_path / "legacy_cut.pt"
    torch.save({f"t{i}": torch.randn(1000) for i in range(10)}, path,
               _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path, ["EOF"]


def corrupt_pickle_in_zip(tmp_path):
    path = _valid(tmp_path)
    offset, size = _member_data_offset(path, "data.pkl")
    data = bytearray(path.read_bytes())
    for i in range(offset + size // 3, offset + size // 3 + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path, []


def zip_missing_a_storage(tmp_path):
    good = _valid(tmp_path)
    path = tmp_path / "no_storage.pt"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as dst:
        storages = [i.filename for i in src.infolist() if "/data/" in i.filename]
        assert storages, "a saved anchor file holds at least one storage record"
        for info in src.infolist():
            if info.filename != storages[0]:
                dst.writestr(info, src.read(info))
    return path, []


def foreign_zip(tmp_path):
    path = tmp_path / "docs.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "not a checkpoint")
    return path, []


def text_file(tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("these are not anchors\n")
    return path, ["not a torch checkpoint"]


def safetensors_file(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "anchors.safetensors"
    save_file({"a": torch.randn(4)}, str(path))
    return path, ["not a torch checkpoint"]


def plain_pickle(tmp_path):
    path = tmp_path / "plain.pkl"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    return path, []


def _saved(tmp_path, name, content, legacy=False):
    path = tmp_path / name
    torch.save(content, path, _use_new_zipfile_serialization=not legacy)
    return path


def list_content(tmp_path):
    return _saved(tmp_path, "list.pt", [torch.randn(3), torch.randn(3)]), ["list", "mapping"]


def int_keys(tmp_path):
    return _saved(tmp_path, "int_keys.pt", {0: torch.randn(3), 1: torch.randn(3)}), ["0", "str"]


def non_tensor_value(tmp_path):
    path = _saved(tmp_path, "value.pt", {"a": torch.randn(3), "lr": 0.1})
    return path, ["'lr'", "float", "tensor"]


def non_tensor_value_legacy(tmp_path):
    path = _saved(tmp_path, "value_legacy.pt", {"a": torch.randn(3), "n": [1]}, legacy=True)
    return path, ["'n'", "list"]


def unsupported_version(tmp_path):
    content = {"yeto.resume_anchors": 99, "dtype": "float32", "tensors": {"a": torch.randn(3)}}
    return _saved(tmp_path, "v2.pt", content), ["version", "2"]


def format_without_tensors(tmp_path):
    content = {"yeto.resume_anchors": 1, "dtype": "float32", "tensors": [torch.randn(3)]}
    return _saved(tmp_path, "v1_list.pt", content), ["list", "mapping"]


def code_in_zip_pickle(tmp_path):
    path = _saved(tmp_path, "evil.pt", {"a": torch.randn(3), "b": RunsCode(tmp_path / MARKER_NAME)})
    return path, ["refused", "weights_only"]


def code_in_legacy_pickle(tmp_path):
    path = _saved(tmp_path, "evil_legacy.pt", {"a": RunsCode(tmp_path / MARKER_NAME)},
                  legacy=True)
    return path, ["refused", "weights_only"]


def code_in_plain_pickle(tmp_path):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(RunsCode(tmp_path / MARKER_NAME), protocol=2))
    return path, ["refused"]


BAD_INPUTS = [missing, directory, empty, truncated_zip, truncated_zip_tail, truncated_legacy,
              corrupt_pickle_in_zip, zip_missing_a_storage, foreign_zip, text_file,
              safetensors_file, plain_pickle, list_content, int_keys, non_tensor_value,
              non_tensor_value_legacy, unsupported_version, format_without_tensors,
              code_in_zip_pickle, code_in_legacy_pickle, code_in_plain_pickle]


@pytest.mark.parametrize("mmap_setting", ["1", "0"])
@pytest.mark.parametrize("bad", BAD_INPUTS, ids=lambda f: f.__name__)
def test_bad_input_raises_one_clear_error_and_is_recorded(tmp_path, monkeypatch, provider,
                                                         exporter, bad, mmap_setting):
    monkeypatch.setenv("YETO_DILOCO_RESUME_ANCHOR_MMAP", mmap_setting)
    path, cause_words = bad(tmp_path)
    before = sha256(path) if path.is_file() else None
    result = None
    with pytest.raises(AnchorLoadError) as excinfo:
        result = load_resume_anchors(path, tracer_provider=provider)
    assert result is None  # never partial anchors
    error = excinfo.value
    message = str(error)
    assert str(path) in message and error.path == str(path)
    assert error.reason and error.reason in message
    for word in cause_words:
        assert word in error.reason, (word, error.reason)

    span = one_span(exporter, "yeto.resume.anchors")
    assert span.end_time is not None
    assert span.status.status_code is StatusCode.ERROR
    assert error.reason in span.status.description
    exceptions = [e for e in span.events if e.name == "exception"]
    assert exceptions  # exactly one: test_a_failed_load_records_its_exception_once
    assert exceptions[0].attributes["exception.type"].endswith("AnchorLoadError")
    assert str(path) in exceptions[0].attributes["exception.message"]
    assert span.attributes["yeto.anchors.path"] == os.path.abspath(path)
    for attribute in ("yeto.anchors.dtype", "yeto.anchors.tensor_count",
                      "yeto.anchors.bytes_mapped", "yeto.anchors.bytes_touched"):
        assert attribute not in span.attributes
    load = one_span(exporter, "yeto.resume.anchors.load")
    assert load.parent.span_id == span.context.span_id
    assert load.status.status_code is StatusCode.ERROR

    assert not (tmp_path / MARKER_NAME).exists(), "the file's pickle ran code"
    if before is not None:
        assert sha256(path) == before  # loading never modifies the file
        del excinfo, error
        gc.collect()
        assert file_mappings(path) == []  # nothing of the file stays mapped


def test_a_failed_load_records_its_exception_once(tmp_path, provider, exporter):
    path, _ = text_file(tmp_path)
    with pytest.raises(AnchorLoadError):
        load_resume_anchors(path, tracer_provider=provider)
    for name in ("yeto.resume.anchors", "yeto.resume.anchors.load"):
        events = [e.name for e in one_span(exporter, name).events]
        assert events.count("exception") == 1, (name, events)


def test_the_code_payload_really_runs_without_weights_only(tmp_path):
    # Proves the refusal above is what kept the marker away (the payload is live).
    path, _ = code_in_zip_pickle(tmp_path)
    torch.load(path, weights_only=False)
    assert (tmp_path / MARKER_NAME).exists()


def test_a_good_file_next_to_the_bad_ones_loads(tmp_path):
    path = _valid(tmp_path)
    with load_resume_anchors(path) as anchors:
        assert len(anchors.tensors) == 8


def test_an_anchor_file_saved_under_a_safetensors_name_can_be_loaded(tmp_path):
    # torch.load hands any path ending in .safetensors to safetensors: save_resume_anchors must
    # not write a file load_resume_anchors then cannot read (refuse the name, or load it).
    path = tmp_path / "anchors.safetensors"
    tensors = {"a": torch.randn(5)}
    try:
        save_resume_anchors(path, tensors)
    except ValueError:
        assert not path.exists()
        return
    with load_resume_anchors(path) as anchors:
        assert torch.equal(anchors.tensors["a"], tensors["a"])
