"""`yeto.resume.anchors.bytes_mapped` / `.bytes_touched`: the span's numbers as gauges."""

import os

import pytest
import torch
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from yeto_otel.anchors import load_resume_anchors, save_resume_anchors
from yeto_otel.names import RESUME_METRICS

from anchor_testkit import one_span


@pytest.fixture
def reader():
    reader = InMemoryMetricReader()
    yield reader
    reader.shutdown()


@pytest.fixture
def meter_provider(reader):
    return MeterProvider(metric_readers=[reader])


@pytest.fixture
def anchor_file(tmp_path):
    path = tmp_path / "anchors.pt"
    save_resume_anchors(path, {f"t{i}": torch.randn(64 * 1024) for i in range(8)})
    return path


def _points(reader) -> dict[str, list]:
    data = reader.get_metrics_data()
    found = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                found[metric.name] = (metric.unit, list(metric.data.data_points))
    return found


def test_gauges_equal_the_span_attributes(anchor_file, provider, exporter, meter_provider, reader):
    with load_resume_anchors(anchor_file, tracer_provider=provider,
                             meter_provider=meter_provider) as anchors:
        assert _points(reader) == {}  # set when the block ends, not before
        float(anchors.tensors["t0"].sum())
    attrs = one_span(exporter, "yeto.resume.anchors").attributes
    points = _points(reader)
    assert set(points) == {m.name for m in RESUME_METRICS}
    for name, attribute in (("yeto.resume.anchors.bytes_mapped", "yeto.anchors.bytes_mapped"),
                            ("yeto.resume.anchors.bytes_touched", "yeto.anchors.bytes_touched")):
        unit, (point,) = points[name]
        assert unit == "By"
        assert point.value == attrs[attribute] > 0
        assert dict(point.attributes) == {"yeto.anchors.load_mode": "mmap"}


def test_eager_resume_maps_nothing_and_touches_the_file(anchor_file, provider, meter_provider,
                                                        reader, setting):
    setting("YETO_DILOCO_RESUME_ANCHOR_MMAP", "0")
    with load_resume_anchors(anchor_file, tracer_provider=provider,
                             meter_provider=meter_provider):
        pass
    points = _points(reader)
    (mapped,) = points["yeto.resume.anchors.bytes_mapped"][1]
    (touched,) = points["yeto.resume.anchors.bytes_touched"][1]
    assert mapped.value == 0
    assert touched.value == os.path.getsize(anchor_file)
    assert dict(mapped.attributes) == {"yeto.anchors.load_mode": "eager"}


def test_a_later_resume_replaces_the_value(tmp_path, provider, meter_provider, reader):
    small, large = tmp_path / "small.pt", tmp_path / "large.pt"
    save_resume_anchors(small, {"w": torch.zeros(1024)})
    save_resume_anchors(large, {"w": torch.zeros(1024 * 1024)})
    for path in (small, large):
        with load_resume_anchors(path, tracer_provider=provider, meter_provider=meter_provider):
            pass
    (mapped,) = _points(reader)["yeto.resume.anchors.bytes_mapped"][1]
    assert mapped.value >= os.path.getsize(large)


def test_failing_gauges_never_fail_the_resume(anchor_file, provider, meter_provider, reader,
                                              monkeypatch):
    from opentelemetry.sdk.metrics._internal.instrument import _Gauge

    calls = []

    def broken(self, amount, attributes=None, context=None):
        calls.append(amount)
        raise RuntimeError("exporter bug")

    monkeypatch.setattr(_Gauge, "set", broken)
    with load_resume_anchors(anchor_file, tracer_provider=provider,
                             meter_provider=meter_provider) as anchors:
        float(anchors.tensors["t1"].sum())
    assert calls  # the gauges were reached, failed, and the block still ended normally
