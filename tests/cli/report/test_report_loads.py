"""The checkpoint loads beside the anchor restarts: safetensors, DCP and torch.load spans made by
the real instrumentors (in this process, written to a local traces file the way the embedded
default names it) land in the restart chart, each in its kind's legend group with its own
bars, and on the timeline; a load inside a restart or inside a DataLoader worker does not get
a group of its own, and a number a span does not have is no bar, never a zero."""

from __future__ import annotations

import calendar
import json
import re
import warnings
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import HOST_NAME, SERVICE_INSTANCE_ID, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from report_testkit import plotly_or_skip, report
from repo_paths import FIXTURES

from yeto_otel import names
from yeto_otel.cli.report import Roster, build_html, charts, load_telemetry
from yeto_otel.cli.report._restart_chart import _labels
from yeto_otel.otel import RANK_ATTRIBUTE, JsonLinesWriter, Span, local_file_stem
from yeto_otel.units import format_bytes

RANK = "h/rank-0"
ST_FILE, ST_OPEN = names.SAFETENSORS_LOAD_FILE.name, names.SAFETENSORS_SAFE_OPEN.name
DCP, DCP_SAVE, TORCH = names.DCP_LOAD.name, names.DCP_SAVE.name, names.TORCH_LOAD.name
RESTART = names.RESUME_ANCHORS.name


def _anchors(checkpoints: Path) -> Path:
    """An anchor file, saved before anything is instrumented: the report is about the restart
    from it."""
    import torch

    from yeto_otel.anchors import save_resume_anchors

    anchors = checkpoints / "anchors.pt"
    save_resume_anchors(anchors, {f"a{n}": torch.randn(64, 1024) for n in range(4)})
    return anchors


def _checkpoint_loads(checkpoints: Path, anchors: Path, provider) -> None:
    """A mapped anchor restart, then every kind of checkpoint load (and a DCP save), each
    instrumented."""
    import safetensors
    import safetensors.torch
    import torch
    import torch.distributed.checkpoint as dcp

    from yeto_otel.anchors import load_resume_anchors

    with load_resume_anchors(anchors, mode="mmap", tracer_provider=provider) as resumed:
        float(resumed.tensors["a1"].sum())
    shard = checkpoints / "model.safetensors"
    safetensors.torch.save_file({"w": torch.randn(512, 1024), "b": torch.randn(8)}, shard)
    safetensors.torch.load_file(shard)
    with safetensors.safe_open(shard, framework="pt") as handle:
        handle.get_tensor("b")
    plain = checkpoints / "plain.pt"
    torch.save({"x": torch.randn(256, 1024)}, plain)
    torch.load(plain, weights_only=True)  # read whole: nothing mapped, no bytes-mapped number
    torch.load(plain, weights_only=True, mmap=True)
    with warnings.catch_warnings():  # "no process group: a single process", as meant here
        warnings.simplefilter("ignore", UserWarning)
        dcp.save({"w": torch.arange(65536, dtype=torch.float32)},
                 checkpoint_id=str(checkpoints / "dcp"))
        dcp.load({"w": torch.zeros(65536, dtype=torch.float32)},
                 checkpoint_id=str(checkpoints / "dcp"))


@pytest.fixture(scope="module")
def loads_dir(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter

    from yeto_otel.instrumentation import (DcpInstrumentor, SafetensorsInstrumentor,
                                           TorchLoadInstrumentor)

    directory = tmp_path_factory.mktemp("telemetry")
    writer = JsonLinesWriter(directory / f"traces-{local_file_stem(RANK)}.jsonl")
    provider = TracerProvider(resource=Resource.create(
        {SERVICE_INSTANCE_ID: RANK, HOST_NAME: "h", RANK_ATTRIBUTE: 0}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(stream=writer)))
    instrumentors = [SafetensorsInstrumentor(), DcpInstrumentor(), TorchLoadInstrumentor()]
    with pytest.MonkeyPatch.context() as env:
        for name in ("YETO_DILOCO_RESUME_ANCHOR_MMAP", "YETO_DILOCO_RESUME_ANCHOR_READAHEAD",
                     "YETO_DILOCO_ANCHOR_DTYPE"):
            env.delenv(name, raising=False)
        checkpoints = tmp_path_factory.mktemp("checkpoints")
        anchors = _anchors(checkpoints)
        for inst in instrumentors:  # singletons: each uninstrumented below, whatever happens
            inst.instrument(tracer_provider=provider)
        try:
            _checkpoint_loads(checkpoints, anchors, provider)
        finally:
            for inst in instrumentors:
                if inst.is_instrumented_by_opentelemetry:
                    inst.uninstrument()
            provider.shutdown()
            writer.close()
    return directory


@pytest.fixture(scope="module")
def figures(loads_dir):
    plotly_or_skip()
    data = load_telemetry(loads_dir)
    return data, dict(charts(data, Roster(data)))


def _bars(fig) -> dict[tuple[str, str], object]:
    """(legend group, slot) -> bar trace of the restart chart."""
    return {(t.legendgroup, t.offsetgroup): t for t in fig.data}


def test_loads_stand_beside_the_restart_with_their_own_bars(figures):
    data, drawn = figures
    fig = drawn["restart-bytes"]
    bars = _bars(fig)
    # the restart and one group per outermost load, in time order; the restart's own
    # torch.load (under yeto.resume.anchors.load) is part of the restart
    labels = list(fig.layout.xaxis.categoryarray)
    # "<rank><br><time> <kind>", with " #2" after a label that two loads in one millisecond
    # would share
    kinds = [re.sub(r" #\d+$", "", label.split("<br>", 1)[1].split(" ", 1)[1])
             for label in labels]
    assert kinds == ["mmap", ST_FILE, ST_OPEN, TORCH, TORCH, DCP_SAVE, DCP], labels
    assert {group for group, _ in bars} == {RESTART, ST_FILE, ST_OPEN, TORCH, DCP_SAVE, DCP}
    # every kind in its legend group, titled with its span name; a measure keeps its slot
    # (and colour) whatever the kind; the kind is the pattern
    colors: dict[str, set] = {}
    for (group, slot), trace in bars.items():
        assert trace.legendgrouptitle.text == group
        colors.setdefault(slot, set()).add(trace.marker.color)
    assert all(len(c) == 1 for c in colors.values()) and len(colors) == 5, colors
    assert {bars[(g, "touched")].marker.pattern.shape for g in (RESTART, ST_FILE, ST_OPEN)} \
        == {"", "/", "\\"}
    assert {slot for group, slot in bars if group == ST_FILE} == {"size", "mapped", "touched",
                                                                 "anonymous"}
    assert {slot for group, slot in bars if group == DCP} == {"stored", "anonymous"}
    assert bars[(DCP_SAVE, "stored")].name == "stored bytes written"
    assert {slot for group, slot in bars if group == TORCH} == {"size", "mapped"}


def test_bars_hold_the_spans_numbers_and_none_where_a_span_has_none(figures):
    data, drawn = figures
    fig = drawn["restart-bytes"]
    bars = _bars(fig)
    scale = {"MiB": 2**20, "KiB": 2**10, "GiB": 2**30}[fig.layout.yaxis.title.text]
    spans = {}
    for _, span in data.spans:
        spans.setdefault(span.name, []).append(span)
    (load_file,) = spans[ST_FILE]
    touched = bars[(ST_FILE, "touched")]
    assert touched.y[0] * scale == load_file.attributes[names.SAFETENSORS_BYTES_TOUCHED.name]
    assert bars[(ST_FILE, "mapped")].y[0] * scale == \
        load_file.attributes[names.SAFETENSORS_BYTES_MAPPED.name] > 0
    (dcp_load,) = spans[DCP]
    stored = dcp_load.attributes[names.DCP_BYTES_READ.name]
    assert bars[(DCP, "stored")].y[0] * scale == stored >= 65536 * 4  # the tensor, pickled
    # the eager torch.load mapped nothing and says nothing about it: no bar, not a zero bar
    mapped = bars[(TORCH, "mapped")]
    assert list(mapped.y)[0] is None and list(mapped.text)[0] == ""
    assert list(mapped.y)[1] > 0
    # the hover text: kind, path, tensors and duration
    hover = touched.hovertext[0]
    for text in (ST_FILE, "model.safetensors", "tensors: 2", "duration ", "% of mapped"):
        assert text in hover, (text, hover)
    dcp_hover = bars[(DCP, "stored")].hovertext[0]
    for text in ("items read: 1", "files read: 1", f"stored bytes read {format_bytes(stored)}",
                 names.DCP_LOAD_PLAN.name, names.DCP_LOAD_READ.name):
        assert text in dcp_hover, (text, dcp_hover)


def test_loads_and_their_phases_are_on_the_timeline(figures):
    data, drawn = figures
    lanes = {t.name: t for t in drawn["census-process"].data if t.type == "bar"}
    for name in (RESTART, ST_FILE, ST_OPEN, DCP, names.DCP_LOAD_PLAN.name,
                 names.DCP_LOAD_READ.name, TORCH, DCP_SAVE, names.DCP_SAVE_WRITE.name):
        assert name in lanes and set(lanes[name].y) == {"rank 0"}, name
    # the restart's own torch.load is on the timeline too: 2 plain loads + the restart's
    assert len(lanes[TORCH].x) == 3
    page, _ = build_html(data)
    header = page[page.index("<header>"):page.index("</header>")]
    assert "not plotted" not in header  # every load span is drawn somewhere


def test_worker_loads_stay_off_the_restart_chart():
    """The DataLoader workers' torch.load calls are on their lanes, not beside the restarts."""
    plotly_or_skip()
    data = load_telemetry(FIXTURES / "telemetry-workers")
    fig = dict(charts(data))["restart-bytes"]
    assert {t.legendgroup for t in fig.data} == {RESTART}
    assert len(fig.layout.xaxis.categoryarray) == 2  # the two ranks' restarts


T0 = calendar.timegm((2026, 1, 1, 0, 0, 0)) * 1_000_000_000


def _span(name: str, span_id: str, parent: str, at_ms: int, attributes: dict) -> dict:
    return {"traceId": "ab" * 16, "spanId": span_id, "parentSpanId": parent, "name": name,
            "kind": 1, "startTimeUnixNano": str(T0 + at_ms * 1_000_000),
            "endTimeUnixNano": str(T0 + (at_ms + 5) * 1_000_000),
            "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int)
                            else {"stringValue": v}} for k, v in attributes.items()],
            "status": {}}


def test_a_load_with_no_numbers_is_a_group_without_bars_and_says_why(tmp_path):
    """A safetensors load whose measuring failed (no /proc) has only its file size: no
    mapped, touched or anonymous bar, and the hover says why; a load nested in another load
    is part of it."""
    plotly_or_skip()
    error = "no /proc/self/pagemap"
    spans = [
        _span(TORCH, "01" * 8, "", 0, {names.TORCH_LOAD_PATH.name: "/c/m.safetensors"}),
        _span(ST_FILE, "02" * 8, "01" * 8, 1, {names.SAFETENSORS_PATH.name: "/c/m.safetensors",
                                               names.SAFETENSORS_FILE_SIZE.name: 3 << 20,
                                               names.SAFETENSORS_RESIDENCY_ERROR.name: error}),
    ]
    traces = tmp_path / f"traces-{local_file_stem(RANK)}.jsonl"
    batch = {"resourceSpans": [{"resource": {"attributes": [
        {"key": SERVICE_INSTANCE_ID, "value": {"stringValue": RANK}}]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
    traces.write_text(json.dumps(batch) + "\n")
    result = report(tmp_path, "-o", tmp_path / "page.html")
    assert result.returncode == 0, result.stderr
    data = load_telemetry(tmp_path)
    # the outer torch.load is the load; the safetensors read it handed on is inside it
    assert "restart-bytes" not in dict(charts(data))  # torch.load said no size: no bar at all
    spans[0]["parentSpanId"] = "ff" * 8  # its parent is in no file: the load is outermost
    spans[1]["parentSpanId"] = ""
    traces.write_text(json.dumps(batch) + "\n")
    fig = dict(charts(load_telemetry(tmp_path)))["restart-bytes"]
    assert [label.rsplit(" ", 1)[-1] for label in fig.layout.xaxis.categoryarray] == [
        TORCH, ST_FILE]
    assert [(t.legendgroup, t.offsetgroup) for t in fig.data] == [(ST_FILE, "size")]
    assert f"residency not measured: {error}" in fig.data[0].hovertext[0]


def test_two_loads_in_one_millisecond_get_labels_of_their_own():
    def load(start_ns: int) -> Span:
        return Span(resource={}, scope="", name=TORCH, trace_id="t", span_id=str(start_ns),
                    parent_span_id="", start_ns=start_ns, end_ns=start_ns + 1, attributes={})

    same_ms = 1_796_398_111_729_000_000
    labels = _labels([("rank 0", load(same_ms)), ("rank 0", load(same_ms + 300_000)),
                      ("rank 0", load(same_ms + 600_000)), ("rank 1", load(same_ms))])
    assert len(set(labels)) == 4, labels
    assert labels[1] == f"{labels[0]} #2" and labels[2] == f"{labels[0]} #3", labels
    assert labels[3].startswith("rank 1<br>") and labels[3].endswith(TORCH), labels
