"""How a mapped resume reads the file (YETO_DILOCO_RESUME_ANCHOR_READAHEAD / `readahead=`):
`anchor` (default) asks for each anchor's pages when the catch-up first takes it, `kernel`
leaves the kernel's read-around, `off` advises the mapping MADV_RANDOM. Cold resumes are made
by evicting the anchor file's pages (posix_fadvise DONTNEED after fsync), not the machine's."""

import logging
import math
import os
from collections import OrderedDict

import pytest
import torch

from anchor_testkit import file_mappings, one_span, smaps_rss
from yeto_otel.anchors import _prefetch, _resume, load_resume_anchors, save_resume_anchors
from yeto_otel.proc import evict_from_page_cache

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
NUMEL = MiB // 4 + 100  # not a whole number of pages: each anchor ends in a partial page
WHOLE_PAGES = math.ceil(NUMEL * 4 / PAGE) * PAGE
TAKEN = [f"shard.{i:04d}" for i in range(3, 32, 8)]  # every 8th, as a fragment's catch-up


def _save(path, count=32):
    save_resume_anchors(path, {f"shard.{i:04d}": torch.full((NUMEL,), float(i))
                               for i in range(count)})


def _vm_flags(path) -> list[set[str]]:
    """VmFlags of each of this file's mappings (/proc/self/smaps); `rr` is MADV_RANDOM."""
    starts = {start for start, _ in file_mappings(path)}
    flags, current = [], None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                current = int(head.split("-")[0], 16) in starts
            elif head == "VmFlags:" and current:
                flags.append(set(line.split()[1:]))
    return flags


def _cold_catch_up(path, provider, **kwargs) -> int:
    """A cold resume that takes every 8th anchor and reads it whole; the bytes touched."""
    evict_from_page_cache(path)
    with load_resume_anchors(path, tracer_provider=provider, **kwargs) as anchors:
        for name in TAKEN:
            assert float(anchors.tensors[name][-1]) == float(name[-4:])
            anchors.tensors[name].sum()
        return smaps_rss(path)


def _span(exporter):
    return one_span(exporter, "yeto.resume.anchors").attributes


def test_anchor_is_the_default_and_prefetches_exactly_the_anchors_taken(tmp_path, provider,
                                                                        exporter):
    path = tmp_path / "anchors.pt"
    _save(path)
    touched = _cold_catch_up(path, provider)
    attributes = _span(exporter)
    assert attributes["yeto.anchors.readahead"] == "anchor"
    assert attributes["yeto.anchors.bytes_prefetched"] == len(TAKEN) * WHOLE_PAGES
    # Each anchor starts on a page of its own: its pages, plus the zip index's few.
    assert len(TAKEN) * WHOLE_PAGES <= touched <= len(TAKEN) * WHOLE_PAGES + 16 * PAGE


def test_off_advises_the_mapping_random_and_maps_only_the_pages_read(tmp_path, provider,
                                                                     exporter, setting):
    path = tmp_path / "anchors.pt"
    _save(path)
    setting("YETO_DILOCO_RESUME_ANCHOR_READAHEAD", "off")
    with load_resume_anchors(path, tracer_provider=provider):
        flags = _vm_flags(path)
    assert flags and all("rr" in f for f in flags)
    exporter.clear()
    touched = _cold_catch_up(path, provider)
    assert _span(exporter)["yeto.anchors.readahead"] == "off"
    assert "yeto.anchors.bytes_prefetched" not in _span(exporter)
    assert len(TAKEN) * WHOLE_PAGES <= touched <= len(TAKEN) * WHOLE_PAGES + 16 * PAGE


def test_kernel_leaves_the_mapping_alone(tmp_path, provider, exporter):
    path = tmp_path / "anchors.pt"
    _save(path, count=4)
    with load_resume_anchors(path, readahead="kernel", tracer_provider=provider) as anchors:
        flags = _vm_flags(path)
        assert type(anchors.tensors) is dict
    assert flags and all("rr" not in f for f in flags)
    assert _span(exporter)["yeto.anchors.readahead"] == "kernel"


def test_walking_every_anchor_prefetches_nothing(tmp_path, provider, exporter):
    path = tmp_path / "anchors.pt"
    _save(path, count=8)
    with load_resume_anchors(path, tracer_provider=provider) as anchors:
        tensors = anchors.tensors
        assert isinstance(tensors, dict)
        copied, merged = dict(tensors), {**tensors}
        walked = [t for _, t in tensors.items()] + list(tensors.values()) + list(tensors)
        assert len(copied) == len(merged) == 8 and len(walked) == 24
        assert tensors.bytes_advised == 0
        tensors.get("shard.0001")
        tensors.get("no such anchor")
        tensors["shard.0001"]  # taken twice: advised once
    assert _span(exporter)["yeto.anchors.bytes_prefetched"] == WHOLE_PAGES


def test_eager_resume_has_no_readahead_attributes(tmp_path, provider, exporter):
    path = tmp_path / "anchors.pt"
    _save(path, count=2)
    with load_resume_anchors(path, mode="eager", readahead="off", tracer_provider=provider):
        pass
    assert "yeto.anchors.readahead" not in _span(exporter)
    assert "yeto.anchors.bytes_prefetched" not in _span(exporter)


def test_a_bad_readahead_argument_is_refused(tmp_path):
    with pytest.raises(ValueError, match="readahead must be one of"):
        load_resume_anchors(tmp_path / "anchors.pt", readahead="sometimes")


def test_refused_advice_never_fails_the_resume_and_says_why(tmp_path, provider, exporter,
                                                            monkeypatch, caplog):
    def refuse(*args):
        raise OSError(22, "madvise over 4096 bytes: Invalid argument")

    monkeypatch.setattr(_resume, "advise_random_access", refuse)
    monkeypatch.setattr(_prefetch, "advise_will_need", refuse)
    path = tmp_path / "anchors.pt"
    _save(path, count=4)
    with caplog.at_level(logging.WARNING, logger="yeto_otel.anchors"):
        for readahead in ("off", "anchor"):
            with load_resume_anchors(path, readahead=readahead,
                                     tracer_provider=provider) as anchors:
                for name in ("shard.0001", "shard.0002"):
                    assert float(anchors.tensors[name].sum()) == float(name[-1]) * NUMEL
    off, anchor = (s.attributes for s in exporter.get_finished_spans()
                   if s.name == "yeto.resume.anchors")
    assert off["yeto.anchors.readahead"] == "kernel"  # what was in effect
    assert anchor["yeto.anchors.bytes_prefetched"] == 0
    assert "cannot turn off read-ahead" in caplog.text
    assert caplog.text.count("cannot prefetch the anchors") == 1  # once per resume


def test_anchors_saved_or_copied_are_an_ordered_dict(tmp_path, provider):
    """A checkpoint holding the anchors must not name the prefetching class: torch.load's
    weights_only refuses unknown classes, and a reader may not have yeto-otel. They come
    back as an OrderedDict, as a state_dict does."""
    import copy
    import pickle

    path = tmp_path / "anchors.pt"
    _save(path, count=2)
    with load_resume_anchors(path, tracer_provider=provider) as anchors:
        saved = tmp_path / "state.pt"
        torch.save({"anchors": anchors.tensors}, saved)
        assert type(pickle.loads(pickle.dumps(anchors.tensors))) is OrderedDict
        assert type(copy.copy(anchors.tensors)) is OrderedDict
        assert anchors.tensors.bytes_advised == 0  # saving and copying read nothing ahead
    state = torch.load(saved, weights_only=True)
    assert type(state["anchors"]) is OrderedDict
    assert list(state["anchors"]) == ["shard.0000", "shard.0001"]
    assert float(state["anchors"]["shard.0001"][0]) == 1.0
