"""`yeto-otel demo` and examples/train.py, driven as a user would: subprocesses, real files."""

from __future__ import annotations

import glob
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest
from repo_paths import ROOT

MiB = 1 << 20


def clean_env(local_dir, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "YETO_")) and k not in ("RANK", "LOCAL_RANK",
                                                                   "WORLD_SIZE")}
    env["YETO_OTEL_LOCAL_DIR"] = str(local_dir)
    env.update(extra)
    return env


def demo(cwd, local_dir, *args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "yeto_otel.cli", "demo", *args], cwd=cwd,
                          env=clean_env(local_dir, **(env or {})), capture_output=True,
                          text=True, timeout=timeout)


# --- OTLP JSON ---------------------------------------------------------------------------------

def _value(v: dict):
    if "intValue" in v:
        return int(v["intValue"])  # OTLP JSON writes 64-bit integers as strings
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    return v


def _attrs(items) -> dict:
    return {a["key"]: _value(a["value"]) for a in items or ()}


def spans_in(directory) -> list[dict]:
    spans = []
    for path in glob.glob(os.path.join(directory, "traces-*.jsonl")):
        for line in pathlib.Path(path).read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        spans.append({"name": span["name"],
                                      "attributes": _attrs(span.get("attributes")),
                                      "events": [(e["name"], _attrs(e.get("attributes")))
                                                 for e in span.get("events", [])],
                                      "start": int(span["startTimeUnixNano"]),
                                      "end": int(span["endTimeUnixNano"])})
    return spans


def metric_points(directory, name) -> list[dict]:
    points = []
    for path in glob.glob(os.path.join(directory, "metrics-*.jsonl")):
        for line in pathlib.Path(path).read_text().splitlines():
            for rm in json.loads(line)["resourceMetrics"]:
                for sm in rm["scopeMetrics"]:
                    for m in sm["metrics"]:
                        if m["name"] == name:
                            data = m.get("sum") or m.get("gauge") or {}
                            points.extend(data.get("dataPoints", []))
    return points


# --- one demo run, shared ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("demo")
    local = cwd / "telemetry"
    result = demo(cwd, local, "--size", "32MiB", "--steps", "5", "--step-size", "8MiB",
                  "--step-seconds", "0", "--compare-eager", "--json")
    assert result.returncode == 0, result.stderr
    return result, json.loads(result.stdout), local


def test_demo_exits_zero_with_progress_on_stderr(run):
    result, summary, _ = run
    assert "Traceback" not in result.stderr
    for expected in ("saving 1,869 FP32 anchors", "mapped restart: load_resume_anchors mapped",
                     "caught up fragment 4/4", "step 5/5", "flushing telemetry"):
        assert expected in result.stderr
    assert summary["shards"] == 1869 and summary["size"] == 32 * MiB
    assert not os.path.exists(summary["anchor_file"])  # the temporary anchor file is gone


def test_the_readme_main_job_prints_no_warnings(run):
    """The README's main job (demo, then report) says only what it is doing: no warning from
    torch, the SDK or us on a machine set up by the README's own command."""
    result, _, local = run
    noise = [line for line in result.stderr.splitlines() if not line.startswith("[demo ")]
    assert noise == []
    report = subprocess.run([sys.executable, "-m", "yeto_otel.cli", "report", str(local)],
                            env=clean_env(local), capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert report.stderr == ""
    assert report.stdout.strip() == str((local / "report.html").resolve())


def test_resume_span_in_the_local_traces(run):
    _, summary, local = run
    spans = spans_in(local)
    resumes = [s for s in spans if s["name"] == "yeto.resume.anchors"]
    mapped = next(s for s in resumes if s["attributes"]["yeto.anchors.load_mode"] == "mmap")
    a = mapped["attributes"]
    assert a["yeto.anchors.bytes_mapped"] > 0
    assert a["yeto.anchors.tensor_count"] == 1869
    assert 0 < a["yeto.anchors.bytes_touched"] < a["yeto.anchors.file_size"] / 2
    done = [attrs for name, attrs in mapped["events"] if name == "fragment_done"]
    assert len(done) == 4 == a["yeto.anchors.fragments_done"]
    assert [d["yeto.fragment.id"] for d in done] == summary["fragments_behind"]
    loads = [s for s in spans if s["name"] == "torch.load"]
    assert any(s["attributes"]["yeto.torch_load.mmap"] for s in loads)
    assert len([s for s in spans if s["name"] == "demo.step"]) == 5


def test_summary_numbers_are_the_spans(run):
    _, summary, local = run
    by_mode = {s["attributes"]["yeto.anchors.load_mode"]: s for s in spans_in(local)
               if s["name"] == "yeto.resume.anchors"}
    for key, mode in (("restart", "mmap"), ("eager_restart", "eager")):
        span, reported = by_mode[mode], summary[key]
        a = span["attributes"]
        assert reported["load_mode"] == mode
        for field in ("file_size", "bytes_mapped", "bytes_touched", "anonymous_delta",
                      "tensor_count", "fragments_done"):
            assert reported[field] == a[f"yeto.anchors.{field}"], field
        assert reported["restart_seconds"] == pytest.approx((span["end"] - span["start"]) / 1e9,
                                                            abs=1e-5)
    assert summary["telemetry_local"] and str(local) in summary["telemetry"]
    assert summary["next"] == f"yeto-otel report {local}"


def test_eager_costs_the_file_in_anonymous_memory_mapped_does_not(run):
    _, summary, _ = run
    mapped, eager = summary["restart"], summary["eager_restart"]
    size = mapped["file_size"]
    assert eager["bytes_mapped"] == 0 and eager["bytes_touched"] == size
    assert eager["anonymous_delta"] > 0.8 * size
    assert mapped["anonymous_delta"] < 0.1 * size
    assert eager["anonymous_delta"] > 8 * max(mapped["anonymous_delta"], MiB)


def test_census_metrics_and_step_log(run):
    _, summary, local = run
    points = metric_points(local, "yeto.process.memory.rss")
    assert points and all(int(p["asInt"]) > 0 for p in points)
    step_logs = glob.glob(os.path.join(local, "steplog-*.jsonl"))
    assert step_logs == [summary["step_log"]]
    # Same stem as this process's telemetry files, so the report can pair them.
    stem = os.path.basename(summary["step_log"])[len("steplog-"):]
    assert os.path.exists(os.path.join(local, f"traces-{stem}"))
    records = [json.loads(line) for line in pathlib.Path(step_logs[0]).read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    for r in records:
        assert r["host_mem.vm_rss_bytes"] > 0 and isinstance(r["loss"], float)
        assert r["time_unix_nano"] > 0


def test_text_summary_is_readable(tmp_path):
    result = demo(tmp_path, tmp_path / "tel", "--size", "8MiB", "--shards", "64", "--steps",
                  "2", "--step-size", "1MiB", "--step-seconds", "0", "--dir", str(tmp_path / "a"),
                  "--keep")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for expected in ("load mode       mmap", "bytes mapped", "bytes touched", "anonymous delta",
                     "restart time", f"local OTLP JSON files in {tmp_path / 'tel'}",
                     f"step log        {tmp_path / 'tel'}/steplog-",
                     f"next: yeto-otel report {tmp_path / 'tel'}"):
        assert expected in out, expected
    assert (tmp_path / "a" / "anchors-rank0.pt").exists()  # --keep


@pytest.mark.parametrize("args, message", [
    (["--size", "lots"], "--size 'lots' is not a size"),
    (["--steps", "-1"], "--steps -1 is not valid: must be at least 0"),
    (["--shards", "10"], "--shards 10 is too few"),
    (["--size", "1KiB"], "is too small for 1,869 FP32 shards"),
    # sizes beyond what a float or the machine holds: refused before anything is allocated
    (["--step-size", "1TiB"], "--step-size 1TiB is too large: the steps hold up to 4 of them "
                              "(4.0 TiB) at once"),
    (["--step-size", "1" + "0" * 400], "--step-size '10000000000000000000…' is too large "
                                       "(at most 1,024.0 TiB)"),
    (["--size", "2000TiB"], "--size '2000TiB' is too large (at most 1,024.0 TiB)"),
    (["--seed", "9" * 30], f"--seed {'9' * 30} is not valid: must be at most 4,294,967,295"),
])
def test_bad_flags_are_one_message(tmp_path, args, message):
    result = demo(tmp_path, tmp_path / "tel", *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("yeto-otel: ") and message in result.stderr
    assert not (tmp_path / "tel").exists()  # nothing was created


def test_bad_setting_is_one_line(tmp_path):
    result = demo(tmp_path, tmp_path / "tel", "--size", "8MiB",
                  env={"YETO_OTEL_NODE_METRICS": "bogus"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "yeto-otel: YETO_OTEL_NODE_METRICS='bogus' is not valid (expected auto, on or off); "
        "accepted: `auto`, `on`, `off`"]


# --- against a collector, unchanged ------------------------------------------------------------

class _Collector(http.server.BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_demo_sends_otlp_to_a_configured_collector(tmp_path):
    _Collector.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        result = demo(tmp_path, tmp_path / "tel", "--size", "8MiB", "--shards", "64",
                      "--steps", "2", "--step-size", "1MiB", "--step-seconds", "0", "--json",
                      env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert not summary["telemetry_local"] and endpoint in summary["telemetry"]
    # Shutdown flushed both signals before the summary was printed.
    assert "/v1/traces" in _Collector.received and "/v1/metrics" in _Collector.received
    files = sorted(os.listdir(tmp_path / "tel"))
    assert len(files) == 1 and files[0].startswith("steplog-")  # only the step log is local


# --- examples/train.py -------------------------------------------------------------------------

def test_example_zero_code_exports_census_and_torch_load(tmp_path):
    instrument = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    assert instrument, "opentelemetry-instrument is not installed beside this python"
    script = str(ROOT / "examples" / "train.py")
    local = tmp_path / "tel"
    anchors = tmp_path / "anchors.pt"
    made = subprocess.run([sys.executable, script, "--steps", "2", "--save-anchors",
                           str(anchors)], cwd=tmp_path, env=clean_env(local),
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert not local.exists()  # not instrumented: no telemetry at all
    result = subprocess.run([instrument, sys.executable, script, "--steps", "3", "--resume",
                             str(anchors), "--step-log", str(local / "steplog-train.jsonl")],
                            cwd=tmp_path, env=clean_env(local, YETO_DILOCO_HOST_MEM_CENSUS="1"),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "resumed from" in result.stdout and "(mmap)" in result.stdout
    spans = spans_in(local)
    load = next(s for s in spans if s["name"] == "torch.load")
    assert load["attributes"]["yeto.torch_load.path"] == str(anchors)
    assert load["attributes"]["yeto.torch_load.bytes_mapped"] > 0
    assert any(s["name"] == "yeto.resume.anchors" for s in spans)
    assert metric_points(local, "yeto.process.memory.rss")
    assert metric_points(local, "yeto.process.memory.anonymous")
    records = [json.loads(line) for line in (local / "steplog-train.jsonl").read_text()
               .splitlines()]
    assert len(records) == 3 and all("host_mem.vm_rss_bytes" in r for r in records)
