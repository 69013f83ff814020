"""save_resume_anchors: dtype choice, page-aligned own-size storages, atomic write, file mode."""

import os
import signal
import subprocess
import sys
import zipfile

import pytest
import torch

from anchor_testkit import PAGE, one_span, same_bits, sha256, storage_data_offsets
from yeto_otel.anchors import _save as anchor_save
from yeto_otel.anchors import load_resume_anchors, save_resume_anchors
from yeto_otel.settings import ANCHOR_DTYPES, SettingsError


def _anchors():
    return {"layer.0.weight": torch.randn(33, 17), "layer.0.bias": torch.randn(17),
            "layer.1.weight": torch.randn(5, 5, 5)}


def _load(path, provider=None):
    with load_resume_anchors(path, tracer_provider=provider) as anchors:
        return {name: t.clone() for name, t in anchors.tensors.items()}


# dtype -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, "bfloat16", torch.float16, "float64"])
def test_dtype_argument_sets_the_anchor_dtype(tmp_path, dtype, provider, exporter):
    expected = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    tensors = _anchors()
    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, tensors, dtype=dtype)
    loaded = _load(path, provider)
    assert set(loaded) == set(tensors)
    for name, t in tensors.items():
        assert same_bits(loaded[name], t.to(expected))
    span = one_span(exporter, "yeto.resume.anchors")
    assert span.attributes["yeto.anchors.dtype"] == str(expected).removeprefix("torch.")


def test_environment_sets_the_dtype_when_no_argument(tmp_path, monkeypatch, provider, exporter):
    monkeypatch.setenv("YETO_DILOCO_ANCHOR_DTYPE", "bfloat16")
    tensors = _anchors()
    save_resume_anchors(tmp_path / "a.pt", tensors)
    loaded = _load(tmp_path / "a.pt", provider)
    assert all(same_bits(loaded[n], t.to(torch.bfloat16)) for n, t in tensors.items())
    assert one_span(exporter, "yeto.resume.anchors").attributes["yeto.anchors.dtype"] == "bfloat16"


def test_argument_wins_over_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("YETO_DILOCO_ANCHOR_DTYPE", "bfloat16")
    save_resume_anchors(tmp_path / "a.pt", _anchors(), dtype=torch.float64)
    assert {t.dtype for t in _load(tmp_path / "a.pt").values()} == {torch.float64}


def test_empty_environment_value_means_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("YETO_DILOCO_ANCHOR_DTYPE", "")
    tensors = {"a": torch.randn(4, dtype=torch.float64)}
    save_resume_anchors(tmp_path / "a.pt", tensors)
    assert same_bits(_load(tmp_path / "a.pt")["a"], tensors["a"])


def test_bad_environment_value_names_the_variable_and_the_accepted_values(tmp_path, monkeypatch):
    monkeypatch.setenv("YETO_DILOCO_ANCHOR_DTYPE", "fp8")
    with pytest.raises(SettingsError) as excinfo:
        save_resume_anchors(tmp_path / "a.pt", _anchors())
    message = str(excinfo.value)
    assert "YETO_DILOCO_ANCHOR_DTYPE" in message and "'fp8'" in message
    for accepted in ANCHOR_DTYPES:
        assert accepted in message
    assert os.listdir(tmp_path) == []  # nothing written, not even a temp file


def test_bad_dtype_name_argument_lists_the_accepted_values(tmp_path):
    with pytest.raises(SettingsError) as excinfo:
        save_resume_anchors(tmp_path / "a.pt", _anchors(), dtype="int8")
    assert all(accepted in str(excinfo.value) for accepted in ANCHOR_DTYPES)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.bool, 32, object()])
def test_non_floating_dtype_argument_is_a_type_error(tmp_path, dtype):
    with pytest.raises(TypeError, match="dtype"):
        save_resume_anchors(tmp_path / "a.pt", _anchors(), dtype=dtype)
    assert os.listdir(tmp_path) == []


def test_without_argument_or_environment_each_tensor_keeps_its_dtype(tmp_path, provider, exporter):
    tensors = {"f32": torch.randn(8), "bf16": torch.randn(8).to(torch.bfloat16),
               "f64": torch.randn(3, dtype=torch.float64)}
    save_resume_anchors(tmp_path / "a.pt", tensors)
    loaded = _load(tmp_path / "a.pt", provider)
    assert all(same_bits(loaded[n], t) for n, t in tensors.items())
    assert one_span(exporter, "yeto.resume.anchors").attributes["yeto.anchors.dtype"] == "mixed"


def test_a_single_own_dtype_is_recorded(tmp_path, provider, exporter):
    save_resume_anchors(tmp_path / "a.pt", {"a": torch.randn(8).half(), "b": torch.randn(2).half()})
    _load(tmp_path / "a.pt", provider)
    assert one_span(exporter, "yeto.resume.anchors").attributes["yeto.anchors.dtype"] == "float16"


def test_resume_reads_the_dtype_the_file_holds_whatever_the_environment(tmp_path, monkeypatch):
    tensors = _anchors()
    save_resume_anchors(tmp_path / "a.pt", tensors, dtype=torch.bfloat16)
    monkeypatch.setenv("YETO_DILOCO_ANCHOR_DTYPE", "float32")  # today's setting: not the file's
    loaded = _load(tmp_path / "a.pt")
    assert all(same_bits(loaded[n], t.to(torch.bfloat16)) for n, t in tensors.items())


# what is refused ---------------------------------------------------------------------------

@pytest.mark.parametrize("tensors", [
    {"a": [1.0, 2.0]},
    {"a": torch.randn(2), "b": 3.0},
    {"a": None},
], ids=["list", "float", "none"])
def test_non_tensor_value_is_a_type_error(tmp_path, tensors):
    with pytest.raises(TypeError):
        save_resume_anchors(tmp_path / "a.pt", tensors)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", [0, ("a", 1), b"bytes"])
def test_non_str_name_is_a_type_error(tmp_path, name):
    with pytest.raises(TypeError, match="str"):
        save_resume_anchors(tmp_path / "a.pt", {"ok": torch.randn(2), name: torch.randn(2)})
    assert os.listdir(tmp_path) == []


def test_non_mapping_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="mapping"):
        save_resume_anchors(tmp_path / "a.pt", [torch.randn(2)])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.bool])
def test_integer_tensor_is_a_type_error(tmp_path, dtype):
    # Anchors are floating weights; an int or bool tensor in the mapping is a caller bug, and
    # with dtype=bfloat16 it would be silently converted.
    tensors = {"w": torch.randn(4), "step": torch.ones(4, dtype=dtype)}
    with pytest.raises(TypeError):
        save_resume_anchors(tmp_path / "a.pt", tensors)
    assert os.listdir(tmp_path) == []


# layout ------------------------------------------------------------------------------------

def test_every_storage_starts_on_a_page(tmp_path):
    tensors = {f"t{i}": torch.randn(n) for i, n in enumerate([1, 3, 1000, 1025, 7, 4096, 13])}
    tensors["bf16"] = torch.randn(11).to(torch.bfloat16)
    path = tmp_path / "a.pt"
    save_resume_anchors(path, tensors)
    offsets = storage_data_offsets(path)
    # one flat storage per dtype (float32, bfloat16) and the four index columns
    assert len(offsets) == 2 + 4
    assert {name: off % PAGE for name, off in offsets.items()} == {name: 0 for name in offsets}
    # ...and inside its flat storage every anchor starts on a page of its own
    content = torch.load(path, weights_only=True)
    names = content["names"].split("\x00")
    for name, which, offset in zip(names, content["dtype_index"].tolist(),
                                   content["offsets"].tolist()):
        flat = content["storages"][content["dtype_names"][which]]
        assert offset * flat.element_size() % PAGE == 0, name


def test_plain_torch_save_is_not_page_aligned_so_the_check_can_fail(tmp_path):
    path = tmp_path / "plain.pt"
    torch.save({f"t{i}": torch.randn(n) for i, n in enumerate([1, 3, 1000, 7])}, path)
    assert any(off % PAGE for off in storage_data_offsets(path).values())


def test_mapped_tensors_start_on_pages(tmp_path):
    path = tmp_path / "a.pt"
    save_resume_anchors(path, {f"t{i}": torch.randn(n) for i, n in enumerate([1, 3, 1000, 5])})
    with load_resume_anchors(path) as anchors:
        assert anchors.load_mode == "mmap"
        assert [t.data_ptr() % PAGE for t in anchors.tensors.values()] == [0, 0, 0, 0]


def test_views_are_saved_at_their_own_size(tmp_path):
    base = torch.randn(1 << 20)  # 4 MiB storage
    tensors = {"row": base.view(1024, 1024)[7], "column": base.view(1024, 1024)[:, 3],
               "slice": base[100:150]}
    path = tmp_path / "views.pt"
    save_resume_anchors(path, tensors)
    assert os.path.getsize(path) < 64 * 1024  # not the 4 MiB base, not even once
    loaded = _load(path)
    for name, t in tensors.items():
        assert same_bits(loaded[name], t.contiguous())
        assert loaded[name].untyped_storage().nbytes() == t.numel() * t.element_size()
    assert same_bits(base[100:150], tensors["slice"])  # the caller's tensors are untouched


def test_saved_file_is_the_anchor_format(tmp_path):
    path = tmp_path / "a.pt"
    save_resume_anchors(path, {"a": torch.randn(2)}, dtype="bfloat16")
    assert zipfile.is_zipfile(path)
    content = torch.load(path, weights_only=True)
    assert content["yeto.resume_anchors"] == 2
    assert content["dtype"] == "bfloat16"
    assert set(content["storages"]) == {"bfloat16"}
    assert content["names"] == "a"


# atomic write ------------------------------------------------------------------------------

def _leftovers(directory, keep):
    return sorted(set(os.listdir(directory)) - set(keep))


@pytest.mark.parametrize("stop", [MemoryError, KeyboardInterrupt])
@pytest.mark.parametrize("previous", [True, False], ids=["over_previous", "first_save"])
def test_crash_mid_save_keeps_the_previous_file_and_no_temp(tmp_path, monkeypatch, previous,
                                                            stop):
    path = tmp_path / "anchors.pt"
    old = {"a": torch.randn(100)}
    if previous:
        save_resume_anchors(path, old)
        digest = sha256(path)
    real_save = anchor_save.save_page_aligned
    written = []

    def crashing_save(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half an anchor file")
        f.flush()
        written.extend(n for n in os.listdir(tmp_path) if n != "anchors.pt")
        raise stop("killed mid-save")

    # The save's layout write (torch's, page-aligned) crashes half-way.
    monkeypatch.setattr(anchor_save, "save_page_aligned", crashing_save)
    with pytest.raises(stop):
        save_resume_anchors(path, {"a": torch.randn(100), "b": torch.randn(5)})
    monkeypatch.setattr(anchor_save, "save_page_aligned", real_save)

    # the temp file was a sibling in the same directory, and it is gone
    assert len(written) == 1, "the patched layout write did not see one temp file"
    assert not (tmp_path / written[0]).exists()
    if previous:
        assert sha256(path) == digest
        assert same_bits(_load(path)["a"], old["a"])
        assert _leftovers(tmp_path, ["anchors.pt"]) == []
    else:
        assert not path.exists()
        assert os.listdir(tmp_path) == []


def test_save_replaces_the_previous_file(tmp_path):
    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, {"a": torch.zeros(3)})
    new = {"b": torch.randn(3)}
    save_resume_anchors(str(path), new)
    loaded = _load(path)
    assert set(loaded) == {"b"} and same_bits(loaded["b"], new["b"])
    assert os.listdir(tmp_path) == ["anchors.pt"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_saved_file_mode_follows_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        save_resume_anchors(tmp_path / "a.pt", {"a": torch.randn(2)})
        with open(tmp_path / "reference", "wb"):
            pass
    finally:
        os.umask(previous)
    mode = os.stat(tmp_path / "a.pt").st_mode & 0o777
    assert mode == 0o666 & ~umask
    assert mode == os.stat(tmp_path / "reference").st_mode & 0o777


def test_saving_over_a_mapped_file_leaves_the_mapped_reader_its_values(tmp_path):
    # The rename gives the new anchors a new inode: a resume still reading the old file through
    # its mapping keeps the old values (an in-place rewrite would change or SIGBUS them).
    path = tmp_path / "anchors.pt"
    old = {"a": torch.randn(4096)}
    save_resume_anchors(path, old)
    with load_resume_anchors(path) as anchors:
        mapped_inode = os.stat(path).st_ino
        save_resume_anchors(path, {"a": torch.zeros(16)})
        assert os.stat(path).st_ino != mapped_inode
        assert same_bits(anchors.tensors["a"], old["a"])
    assert same_bits(_load(path)["a"], torch.zeros(16))


MAPPED_READER = r"""
import sys
import torch
from yeto_otel.anchors import _save as anchor_save
from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

path, writer = sys.argv[1], sys.argv[2]
save_resume_anchors(path, {"a": torch.ones(1 << 20)})
with load_resume_anchors(path) as anchors:
    if writer == "torch.save in place":
        torch.save({"other": torch.zeros(3)}, path)
    else:
        save_resume_anchors(path, {"other": torch.zeros(3)})
    print(float(anchors.tensors["a"].sum()))
"""


@pytest.mark.parametrize("writer", ["torch.save in place", "save_resume_anchors"])
def test_only_an_in_place_rewrite_kills_a_mapped_reader(tmp_path, writer):
    # What the docs warn of: a writer that truncates the file a rank has mapped (torch.save or
    # open(..., "wb") on its path) makes the rank's next touch of a lost page SIGBUS.
    result = subprocess.run([sys.executable, "-c", MAPPED_READER, str(tmp_path / "a.pt"), writer],
                            capture_output=True, text=True, timeout=120)
    if writer == "torch.save in place":
        assert result.returncode == -signal.SIGBUS, result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert float(result.stdout) == float(1 << 20)


def test_ctrl_c_inside_torch_write_stays_a_keyboard_interrupt(tmp_path, monkeypatch):
    # torch's zip writer turns an exception raised by the file's write() into its own
    # RuntimeError ("enforce fail ... unexpected pos"); a Ctrl-C must come out as a Ctrl-C.
    real_save = anchor_save.save_page_aligned

    class InterruptedWrites:
        def __init__(self, f):
            self.f, self.written = f, 0

        def write(self, data):
            self.written += memoryview(data).nbytes
            if self.written > 1024:  # inside the layout (the anchors' bytes are not torch's)
                raise KeyboardInterrupt
            return self.f.write(data)

        def flush(self):
            self.f.flush()

    monkeypatch.setattr(anchor_save, "save_page_aligned",
                        lambda obj, f: real_save(obj, InterruptedWrites(f)))
    with pytest.raises(KeyboardInterrupt):
        save_resume_anchors(tmp_path / "a.pt", {"a": torch.randn(256 * 1024)})
    assert os.listdir(tmp_path) == []


def test_ctrl_c_while_writing_the_anchors_leaves_nothing(tmp_path, monkeypatch):
    real_pwrite = os.pwrite

    def interrupted(fd, data, offset):
        if memoryview(data).nbytes > 4096:  # an anchor's bytes, not a CRC
            raise KeyboardInterrupt
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_resume_anchors(tmp_path / "a.pt", {"a": torch.randn(256 * 1024)})
    assert os.listdir(tmp_path) == []
