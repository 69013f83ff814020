"""The distro's embedded default: local OTLP JSON files when no collector is configured."""

import os

from yeto_otel.otel import local_exporter_args, local_file_stem
from yeto_otel.settings import LOCAL_EXPORTER, apply_otel_defaults, exports_locally
from zero_code import otlp_attributes, otlp_lines, run_instrumented

SCRIPT = """
import torch
torch.save({"w": torch.randn(8)}, "w.pt")
torch.load("w.pt", mmap=True, weights_only=True)
print("trainer ran")
"""


def test_no_exporter_settings_means_local_files():
    env = {}
    apply_otel_defaults(env)
    assert exports_locally({})
    assert {env[f"OTEL_{s}_EXPORTER"] for s in ("TRACES", "METRICS", "LOGS")} == {LOCAL_EXPORTER}
    assert env["OTEL_METRIC_EXPORT_INTERVAL"] == "10000"


def test_an_endpoint_or_exporter_setting_means_otlp_as_usual():
    for configured in ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},
                       {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
                       {"OTEL_METRICS_EXPORTER": "console"}):
        env = dict(configured)
        apply_otel_defaults(env)
        assert not exports_locally(configured)
        assert LOCAL_EXPORTER not in {env[f"OTEL_{s}_EXPORTER"] for s in ("TRACES", "LOGS")}
    assert not exports_locally({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"})
    assert exports_locally({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "})


def test_file_names_are_per_process_and_safe(tmp_path):
    stem = local_file_stem("node 7/rank-3", pid=42, started=0)
    assert stem == "node_7_rank-3-19700101T000000-42"
    args, directory = local_exporter_args(tmp_path / "new" / "dir", "h/rank-1")
    assert directory.is_dir()
    paths = sorted(os.path.basename(a["stream"].path) for a in args.values())
    assert [p.split("-")[0] for p in paths] == ["logs", "metrics", "traces"]
    assert all(p.endswith(".jsonl") and "h_rank-1" in p for p in paths)
    assert list(directory.iterdir()) == []  # each file is made at its first line


def test_zero_code_with_no_collector_writes_otlp_json_files(tmp_path):
    result = run_instrumented(SCRIPT, {"RANK": "4", "YETO_OTEL_LOCAL_DIR": str(tmp_path / "t")},
                              console=False, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "trainer ran" in result.stdout
    assert "resourceMetrics" not in result.stdout  # not dumped on stdout
    metrics = otlp_lines(tmp_path / "t", "metrics")
    names = {m["name"] for b in metrics for rm in b["resourceMetrics"]
             for sm in rm["scopeMetrics"] for m in sm["metrics"]}
    assert {"yeto.process.memory.rss", "yeto.process.memory.rss_peak"} <= names
    resource = otlp_attributes(metrics[0]["resourceMetrics"][0]["resource"]["attributes"])
    assert resource["service.instance.id"].endswith("/rank-4")
    spans = [s for b in otlp_lines(tmp_path / "t", "traces") for rs in b["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    (load,) = [s for s in spans if s["name"] == "torch.load"]
    attributes = otlp_attributes(load["attributes"])
    assert attributes["yeto.torch_load.mmap"] is True
    assert attributes["yeto.torch_load.bytes_mapped"] > 0


def test_default_directory_is_in_the_working_directory(tmp_path):
    result = run_instrumented("print('ok')", {}, console=False, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert list((tmp_path / "yeto-telemetry").glob("metrics-*.jsonl"))


def test_unusable_local_dir_fails_fast_naming_the_setting(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run_instrumented("print('trainer ran')", {"YETO_OTEL_LOCAL_DIR": str(blocker / "x")},
                              console=False, cwd=str(tmp_path))
    assert result.returncode == 2
    assert "trainer ran" not in result.stdout
    assert result.stderr.startswith("yeto-otel: YETO_OTEL_LOCAL_DIR=")
    assert "cannot be used" in result.stderr and "Traceback" not in result.stderr
