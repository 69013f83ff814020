"""The three load modes return bitwise-identical anchors: mmap (default), eager
(YETO_DILOCO_RESUME_ANCHOR_MMAP=0) and eager_fallback (a legacy non-zip checkpoint)."""

import logging
import zipfile

import pytest
import torch

from anchor_testkit import file_mappings, one_span, random_bits, same_bits
from yeto_otel.anchors import load_resume_anchors, save_resume_anchors
from yeto_otel.settings import SettingsError


def _reference() -> dict:
    """Anchors whose bytes are random (NaN payloads, -0.0, inf, subnormals) in every float dtype."""
    return {
        "f32": random_bits(4097, torch.float32, seed=1).view(17, 241),
        "bf16": random_bits(3001, torch.bfloat16, seed=2),
        "f16": random_bits(513, torch.float16, seed=3).view(27, 19),
        "f64": random_bits(257, torch.float64, seed=4),
        "scalar": torch.tensor(-0.0),
        "specials": torch.tensor([float("nan"), float("inf"), -float("inf"), 1e-45, -0.0]),
    }


def _load(path, provider=None):
    with load_resume_anchors(path, tracer_provider=provider) as anchors:
        mode = anchors.load_mode
        copies = {name: t.clone() for name, t in anchors.tensors.items()}
    return mode, copies


@pytest.fixture
def files(tmp_path):
    ref = _reference()
    zipped = tmp_path / "anchors.pt"
    save_resume_anchors(zipped, ref)
    legacy = tmp_path / "legacy.pt"
    torch.save(ref, legacy, _use_new_zipfile_serialization=False)
    assert zipfile.is_zipfile(zipped) and not zipfile.is_zipfile(legacy)
    return ref, zipped, legacy


def _assert_bitwise(loaded, ref):
    assert set(loaded) == set(ref)
    for name, t in ref.items():
        assert same_bits(loaded[name], t), name


def test_three_modes_are_bitwise_identical(files, setting, provider, exporter):
    ref, zipped, legacy = files
    mapped_mode, mapped = _load(zipped, provider)
    fallback_mode, fallback = _load(legacy, provider)
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", "0")
    eager_mode, eager = _load(zipped, provider)
    assert (mapped_mode, eager_mode, fallback_mode) == ("mmap", "eager", "eager_fallback")
    for loaded in (mapped, eager, fallback):
        _assert_bitwise(loaded, ref)
    spans = [s for s in exporter.get_finished_spans() if s.name == "yeto.resume.anchors"]
    assert [s.attributes["yeto.anchors.load_mode"] for s in spans] == ["mmap", "eager_fallback",
                                                                       "eager"]


def test_mapped_is_the_default_and_one_enables_it(files, setting):
    _, zipped, _ = files
    assert _load(zipped)[0] == "mmap"
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", "1")
    assert _load(zipped)[0] == "mmap"


def test_mapped_tensors_are_file_backed_and_eager_ones_are_not(files, setting):
    _, zipped, _ = files

    def in_file_mapping(t):
        return any(start <= t.data_ptr() < end for start, end in file_mappings(zipped))

    with load_resume_anchors(zipped) as anchors:
        assert all(in_file_mapping(t) for t in anchors.tensors.values())
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", "0")
    with load_resume_anchors(zipped) as anchors:
        assert not any(in_file_mapping(t) for t in anchors.tensors.values())


def test_legacy_file_is_read_with_a_warning(files, caplog):
    _, _, legacy = files
    with caplog.at_level(logging.WARNING, logger="yeto_otel.anchors"):
        mode, _ = _load(legacy)
    assert mode == "eager_fallback"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(str(legacy) in r.getMessage() and "legacy" in r.getMessage() for r in warnings)


def test_legacy_file_with_mapping_disabled_is_plain_eager_without_warning(files, setting,
                                                                         caplog):
    ref, _, legacy = files
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", "0")
    with caplog.at_level(logging.WARNING, logger="yeto_otel.anchors"):
        mode, loaded = _load(legacy)
    assert mode == "eager"
    _assert_bitwise(loaded, ref)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_legacy_file_in_the_anchor_format_keeps_its_recorded_dtype(tmp_path, provider, exporter):
    ref = {"w": random_bits(64, torch.bfloat16, seed=9)}
    path = tmp_path / "legacy_format.pt"
    torch.save({"yeto.resume_anchors": 1, "dtype": "bfloat16", "tensors": ref}, path,
               _use_new_zipfile_serialization=False)
    mode, loaded = _load(path, provider)
    assert mode == "eager_fallback"
    _assert_bitwise(loaded, ref)
    assert one_span(exporter, "yeto.resume.anchors").attributes["yeto.anchors.dtype"] == "bfloat16"


def test_plain_name_to_tensor_zip_checkpoint_loads_mapped(tmp_path, provider, exporter):
    ref = {"a": random_bits(100, torch.float32, seed=5), "b": random_bits(7, torch.bfloat16)}
    path = tmp_path / "other_tool.pt"
    torch.save(ref, path)
    mode, loaded = _load(path, provider)
    assert mode == "mmap"
    _assert_bitwise(loaded, ref)
    assert one_span(exporter, "yeto.resume.anchors").attributes["yeto.anchors.dtype"] == "mixed"


def test_empty_mapping_round_trips(tmp_path):
    save_resume_anchors(tmp_path / "a.pt", {})
    assert _load(tmp_path / "a.pt") == ("mmap", {})


@pytest.mark.parametrize("value", ["2", "yes", "true"])
def test_bad_mmap_setting_is_a_settings_error(files, setting, value):
    _, zipped, _ = files
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", value)
    with pytest.raises(SettingsError, match="YETO_DILOCO_RESUME_ANCHOR_MMAP"):
        load_resume_anchors(zipped)
