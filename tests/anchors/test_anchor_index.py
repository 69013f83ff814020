"""The version-2 index: a damaged index is refused whole, with the file named."""

import pytest
import torch

from yeto_otel.anchors import AnchorLoadError, load_resume_anchors, save_resume_anchors


def _saved_content(tmp_path):
    path = tmp_path / "good.pt"
    save_resume_anchors(path, {"a": torch.randn(3, 5), "b": torch.randn(7)})
    return torch.load(path, weights_only=True)


def _write(tmp_path, content):
    path = tmp_path / "damaged.pt"
    torch.save(content, path)
    return path


@pytest.mark.parametrize("damage, words", [
    (lambda c: c.pop("offsets"), "incomplete"),
    (lambda c: c.update(names="a"), "inconsistent"),
    (lambda c: c.update(dims=torch.tensor([3, 5], dtype=torch.int64)), "inconsistent"),
    (lambda c: c.update(offsets=torch.tensor([0, 10**9], dtype=torch.int64)), "outside"),
    (lambda c: c.update(offsets=torch.tensor([0, -1024], dtype=torch.int64)), "outside"),
    (lambda c: c.update(dtype_index=torch.tensor([0, 4], dtype=torch.int64)), "no storage"),
    (lambda c: c.update(names="a\x00a"), "twice"),
    (lambda c: c.update(dtype_names=["float64"]), "inconsistent"),
    (lambda c: c.update(storages={"float32": "not a tensor"}), "inconsistent"),
])
def test_damaged_index_is_refused(tmp_path, damage, words):
    content = _saved_content(tmp_path)
    damage(content)
    path = _write(tmp_path, content)
    with pytest.raises(AnchorLoadError) as err:
        load_resume_anchors(path)
    assert str(path) in str(err.value) and words in err.value.reason


def test_shapes_and_values_come_back_from_the_index(tmp_path):
    tensors = {"w": torch.randn(4, 3, 2), "scalar": torch.tensor(2.5), "empty": torch.empty(0, 3),
               "v": torch.randn(5000)}
    path = tmp_path / "a.pt"
    save_resume_anchors(path, tensors)
    with load_resume_anchors(path) as anchors:
        for name, t in tensors.items():
            got = anchors.tensors[name]
            assert got.shape == t.shape and got.is_contiguous()
            assert torch.equal(got, t)


def test_nul_in_a_name_is_refused_at_save(tmp_path):
    with pytest.raises(ValueError, match="NUL"):
        save_resume_anchors(tmp_path / "a.pt", {"bad\x00name": torch.randn(2)})


@pytest.mark.parametrize("tensors", [
    {"": torch.randn(3)},  # joined, a lone "" is an empty string, as no names at all are
    {"": torch.randn(3), "b": torch.randn(2)},
    {"a": torch.randn(3), "": torch.randn(2, 2)},
    {},
], ids=["lone_empty_name", "empty_name_first", "empty_name_last", "no_anchors"])
def test_empty_names_round_trip(tmp_path, tensors):
    path = tmp_path / "a.pt"
    save_resume_anchors(path, tensors)
    with load_resume_anchors(path) as anchors:
        assert list(anchors.tensors) == list(tensors)
        for name, t in tensors.items():
            assert torch.equal(anchors.tensors[name], t)
