"""save_resume_anchors lays its storages out on pages without touching torch's process-wide
save settings: a torch.save on another thread during an anchor save writes exactly what it
would without it; the torch names this relies on are checked here, so a torch release that
moves them fails loudly, and the save then still writes a correct (unaligned) file."""

import logging
import os
import threading
import zipfile

import pytest
import torch
import torch.serialization
from torch.utils.serialization import config as torch_serialization_config

from anchor_testkit import PAGE, same_bits, storage_data_offsets
from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

DEADLINE = 60  # seconds: another thread on a shared 2-core machine
TORCH_DEFAULT_ALIGNMENT = 64


def _alignment_record(path) -> str:
    with zipfile.ZipFile(path) as z:
        (name,) = [n for n in z.namelist() if n.endswith("/.storage_alignment")]
        return z.read(name).decode()


def _plain_checkpoint() -> dict:
    return {f"t{i}": torch.randn(n) for i, n in enumerate([1, 3, 1000, 7])}


class _HeldFile:
    """The anchor save's temp file, which holds the save at its first write (torch's zip
    writer writing the layout) until `release` is set."""

    def __init__(self, f, inside: threading.Event, release: threading.Event, settings: list):
        self._f, self._inside, self._release, self._settings = f, inside, release, settings

    on_hold = None  # what runs on the saving thread while the save is held, if anything

    def write(self, data):
        if not self._inside.is_set():
            self._settings.append(torch_serialization_config.save.storage_alignment)
            self._inside.set()
            if self.on_hold is not None:
                self.on_hold()
            assert self._release.wait(DEADLINE), "the other save never finished"
        return self._f.write(data)

    def __enter__(self):
        self._f.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self._f.__exit__(*exc_info)

    def __getattr__(self, name):
        return getattr(self._f, name)


ANCHORS = {f"a{i}": torch.randn(n) for i, n in enumerate([1, 1000, 5])}


def _held_anchor_save(tmp_path, monkeypatch, start_other) -> list:
    """save_resume_anchors(ANCHORS), held at its first layout write until `release` is set;
    `start_other(inside, release)` starts what runs meanwhile. Returns torch's alignment
    setting as the held save saw it."""
    inside, release, settings = threading.Event(), threading.Event(), []
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda *a, **kw: _HeldFile(real_fdopen(*a, **kw), inside,
                                                                 release, settings))
    finished = start_other(inside, release)
    save_resume_anchors(tmp_path / "anchors.pt", ANCHORS)
    finished()
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    return settings


def _other_save_in_a_thread(path, failures: list):
    def start(inside, release):
        def other_save():
            try:
                assert inside.wait(DEADLINE), "the anchor save never started writing"
                torch.save(_plain_checkpoint(), path)  # while the anchor save is held
            except BaseException as exc:
                failures.append(exc)
            finally:
                release.set()

        thread = threading.Thread(target=other_save)
        thread.start()
        return lambda: thread.join(DEADLINE)

    return start


def _check_both_files(tmp_path, other_path) -> None:
    assert _alignment_record(other_path) == str(TORCH_DEFAULT_ALIGNMENT)
    other_offsets = storage_data_offsets(other_path).values()
    assert all(offset % TORCH_DEFAULT_ALIGNMENT == 0 for offset in other_offsets)
    assert any(offset % PAGE for offset in other_offsets)  # laid out as torch's default
    # ...and the anchor file is page-aligned all the same, and says so for its loaders
    anchors = tmp_path / "anchors.pt"
    assert _alignment_record(anchors) == str(PAGE)
    assert all(offset % PAGE == 0 for offset in storage_data_offsets(anchors).values())
    with load_resume_anchors(anchors) as loaded:
        assert all(same_bits(loaded.tensors[name], t) for name, t in ANCHORS.items())
        assert all(t.data_ptr() % PAGE == 0 for t in loaded.tensors.values())


def test_a_torch_save_in_another_thread_keeps_torchs_own_alignment(tmp_path, monkeypatch):
    """Where torch's save settings are process-wide, setting the alignment around the anchor
    save made this save write with the page as its alignment."""
    other_path, failures = tmp_path / "other.pt", []
    settings = _held_anchor_save(tmp_path, monkeypatch,
                                 _other_save_in_a_thread(other_path, failures))
    assert failures == []
    _check_both_files(tmp_path, other_path)
    # torch's setting, as the anchor save wrote its layout and after: untouched
    assert settings == [TORCH_DEFAULT_ALIGNMENT]
    assert torch_serialization_config.save.storage_alignment == TORCH_DEFAULT_ALIGNMENT


def test_a_torch_save_in_a_signal_handler_keeps_torchs_own_alignment(tmp_path, monkeypatch):
    """A trainer's own handler that saves a checkpoint on a signal (a preemption notice) runs
    on the main thread, in the middle of whatever it was doing: here an anchor save. It must
    write the checkpoint as torch would without the anchor save around it. The handler's save
    is made where a signal's handler would run: on the saving thread, nested inside the anchor
    save's write (a real signal lands there only as the scheduler allows)."""
    other_path, failures = tmp_path / "other.pt", []

    def start(inside, release):
        def preemption_handler():
            try:
                torch.save(_plain_checkpoint(), other_path)
            except BaseException as exc:
                failures.append(exc)
            finally:
                release.set()

        monkeypatch.setattr(_HeldFile, "on_hold", staticmethod(preemption_handler))
        return lambda: None

    settings = _held_anchor_save(tmp_path, monkeypatch, start)
    assert failures == []
    _check_both_files(tmp_path, other_path)
    assert settings == [TORCH_DEFAULT_ALIGNMENT]


def test_the_torch_names_the_aligned_layout_needs_are_there():
    """Fails when a torch release moves what the page-aligned save is built on: torch's
    pickling step `torch.serialization._save(obj, zip_file, pickle_module, pickle_protocol,
    _disable_byteorder_record)`, the zip writer `torch._C.PyTorchFileWriter(file, crc32,
    alignment)`, and the `.storage_alignment` record the loaders read."""
    from yeto_otel.anchors import _aligned_save

    assert _aligned_save.torch_save_step() is not None, \
        "torch.serialization._save or torch._C.PyTorchFileWriter moved: see anchors/_aligned_save.py"
    import io

    buffer = io.BytesIO()
    with torch.serialization.skip_data():
        _aligned_save.save_page_aligned({"w": torch.empty(3)}, buffer)
    buffer.seek(0)
    assert _alignment_record(buffer) == str(PAGE)


def test_when_torchs_private_step_moved_the_save_is_correct_but_unaligned(tmp_path, monkeypatch,
                                                                       caplog):
    from yeto_otel.anchors import _aligned_save

    real = torch.serialization._save

    def moved(*args):  # a release whose pickling step takes other parameters
        return real(*args)

    monkeypatch.setattr(torch.serialization, "_save", moved)
    monkeypatch.setattr(_aligned_save, "_fallback_logged", False)
    anchors = {f"a{i}": torch.randn(n) for i, n in enumerate([1, 1000, 5])}
    with caplog.at_level(logging.WARNING, logger="yeto_otel.anchors"):
        for name in ("one.pt", "two.pt"):
            save_resume_anchors(tmp_path / name, anchors)
            with load_resume_anchors(tmp_path / name) as loaded:
                assert all(same_bits(loaded.tensors[n], t) for n, t in anchors.items())
    assert _alignment_record(tmp_path / "one.pt") == str(TORCH_DEFAULT_ALIGNMENT)
    warnings = [r.getMessage() for r in caplog.records if r.name == "yeto_otel.anchors"]
    assert len(warnings) == 1 and "not page-aligned" in warnings[0]


def test_a_torch_that_writes_no_alignment_record_is_a_clear_error(tmp_path, monkeypatch):
    real = torch.serialization._save

    class NoAlignmentRecord:
        def __init__(self, writer):
            self._writer = writer

        def write_record(self, name, data, size):
            if name != ".storage_alignment":
                self._writer.write_record(name, data, size)

        def __getattr__(self, name):
            return getattr(self._writer, name)

    def save_step(obj, zip_file, pickle_module, pickle_protocol, _disable_byteorder_record):
        real(obj, NoAlignmentRecord(zip_file), pickle_module, pickle_protocol,
             _disable_byteorder_record)

    monkeypatch.setattr(torch.serialization, "_save", save_step)
    with pytest.raises(RuntimeError, match=r"\.storage_alignment"):
        save_resume_anchors(tmp_path / "a.pt", {"w": torch.randn(10)})
    assert os.listdir(tmp_path) == []
