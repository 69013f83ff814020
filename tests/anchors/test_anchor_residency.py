"""Bytes touched against ground truth (smaps Rss of the mapping), and the point of mapping:
on a 256 MiB anchor file, mapped anonymous growth is a small fraction of eager's."""

import json
import os
import subprocess
import sys

import pytest
import torch

from anchor_testkit import file_mappings, one_span, smaps_rss
from yeto_otel.anchors import load_resume_anchors, save_resume_anchors
from yeto_otel.proc import ResidencyProbe

MiB = 1 << 20


def _shards(count: int, mib_each: int = 1) -> dict:
    numel = mib_each * MiB // 4
    return {f"shard.{i:04d}": torch.full((numel,), float(i)) for i in range(count)}


# The largest page-cache folio the kernel maps on one fault (a PMD: 2 MiB on x86-64).
FOLIO_MAX = 2 * MiB


def test_bytes_touched_equals_smaps_rss_of_the_mapping(tmp_path, provider, exporter):
    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, _shards(64))
    with load_resume_anchors(path, tracer_provider=provider) as anchors:
        names = sorted(anchors.tensors)
        for i in range(0, 64, 8):
            assert float(anchors.tensors[names[i]][::1024].sum()) == i * 256
        rss = smaps_rss(path)  # ground truth, read at the same point as the event below
        anchors.fragment_done("after-touching")
        assert smaps_rss(path) == rss  # nothing was touched between the two readings
    span = one_span(exporter, "yeto.resume.anchors")
    event = [e for e in span.events if e.name == "fragment_done"][-1]
    assert event.attributes["yeto.anchors.bytes_touched"] == rss
    assert span.attributes["yeto.anchors.bytes_touched"] == rss
    # The 8 shards, plus what the kernel maps around each fault: fault-around (64 KiB) or a
    # whole large page-cache folio (up to 2 MiB) on either edge of a shard.
    assert 8 * MiB <= rss <= 8 * MiB + 8 * 2 * FOLIO_MAX
    assert rss < os.path.getsize(path) * 5 / 8


def test_bytes_touched_grows_with_each_touched_shard_and_matches_smaps_each_time(tmp_path,
                                                                                provider,
                                                                                exporter):
    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, _shards(16))
    truth = []
    with load_resume_anchors(path, tracer_provider=provider) as anchors:
        for i in (0, 5, 10, 15):
            anchors.tensors[f"shard.{i:04d}"].sum()
            truth.append(smaps_rss(path))
            anchors.fragment_done(i)
    events = [e for e in one_span(exporter, "yeto.resume.anchors").events
              if e.name == "fragment_done"]
    assert [e.attributes["yeto.anchors.bytes_touched"] for e in events] == truth
    assert truth == sorted(set(truth))  # strictly growing: each shard adds pages


def test_probe_finds_only_this_file(tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    save_resume_anchors(a, _shards(2))
    save_resume_anchors(b, _shards(3))
    with load_resume_anchors(a) as anchors_a, load_resume_anchors(b):
        anchors_a.tensors["shard.0000"].sum()
        probe = ResidencyProbe(a)
        residency = probe.measure()
        assert residency.mappings == len(file_mappings(a)) >= 1
        assert residency.bytes_mapped == sum(end - start for start, end in file_mappings(a))
        assert residency.bytes_touched == smaps_rss(a)
        assert ResidencyProbe(b).measure().bytes_touched == smaps_rss(b)
    assert ResidencyProbe(a).measure().bytes_mapped == 0


def test_probe_without_proc_or_file_says_why_and_never_raises(tmp_path):
    path = tmp_path / "a.pt"
    save_resume_anchors(path, _shards(1))
    no_proc = ResidencyProbe(path, proc_root=str(tmp_path / "no_proc"))
    assert no_proc.measure() is None and "FileNotFoundError" in no_proc.error
    missing = ResidencyProbe(tmp_path / "missing.pt")
    assert missing.measure() is None and missing.error


# 256 MiB: mapped vs eager anonymous growth, each in a fresh process -----------------------

CHILD = r"""
import json, sys
if sys.argv[2] == "torch_first":
    import torch  # a trainer has torch imported long before its resume
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from yeto_otel.anchors import load_resume_anchors

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
with load_resume_anchors(sys.argv[1], tracer_provider=provider) as anchors:
    names = sorted(anchors.tensors)
    checksum = 0.0
    for i in range(0, len(names), 8):  # the catch-up reads 1/8 of the shards
        checksum += float(anchors.tensors[names[i]].sum())
        anchors.fragment_done(i)
(span,) = [s for s in exporter.get_finished_spans() if s.name == "yeto.resume.anchors"]
print(json.dumps({"attributes": dict(span.attributes), "checksum": checksum}))
"""

BIG_SHARDS = 256  # x 1 MiB


@pytest.fixture(scope="module")
def big_anchor_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "anchors_256MiB.pt"
    save_resume_anchors(path, _shards(BIG_SHARDS))
    assert os.path.getsize(path) >= 256 * MiB
    return path


def _child(path, mmap_setting, imports="torch_first"):
    env = dict(os.environ, YETO_DILOCO_RESUME_ANCHOR_MMAP=mmap_setting)
    env.pop("YETO_DILOCO_ANCHOR_DTYPE", None)
    env.pop("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), imports], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_mapped_anonymous_growth_is_a_small_fraction_of_eager(big_anchor_file):
    size = os.path.getsize(big_anchor_file)
    mapped = _child(big_anchor_file, "1")
    eager = _child(big_anchor_file, "0")
    expected_checksum = float(sum(i * MiB // 4 for i in range(0, BIG_SHARDS, 8)))
    assert mapped["checksum"] == eager["checksum"] == expected_checksum

    m, e = mapped["attributes"], eager["attributes"]
    assert (m["yeto.anchors.load_mode"], e["yeto.anchors.load_mode"]) == ("mmap", "eager")
    mapped_delta, eager_delta = m["yeto.anchors.anonymous_delta"], e["yeto.anchors.anonymous_delta"]
    assert mapped_delta < 0.05 * size, (mapped_delta, size)
    assert eager_delta > 0.90 * size, (eager_delta, size)
    assert mapped_delta < eager_delta / 10
    # mapped: the whole file mapped, about 1/8 of it touched; eager: nothing mapped, all read
    assert m["yeto.anchors.bytes_mapped"] >= size
    assert size / 8 <= m["yeto.anchors.bytes_touched"] <= size / 8 + BIG_SHARDS // 8 * 2 * FOLIO_MAX
    assert e["yeto.anchors.bytes_mapped"] == 0 and e["yeto.anchors.bytes_touched"] == size


def test_anonymous_delta_does_not_count_torchs_own_import(big_anchor_file):
    # A resume tool whose first torch use is load_resume_anchors: the import of torch itself
    # (~300 MiB of anonymous memory) is not growth caused by the anchors.
    size = os.path.getsize(big_anchor_file)
    mapped = _child(big_anchor_file, "1", imports="anchors_only")
    assert mapped["attributes"]["yeto.anchors.load_mode"] == "mmap"
    assert mapped["attributes"]["yeto.anchors.anonymous_delta"] < 0.05 * size
