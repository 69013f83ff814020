"""HostMemoryInstrumentor: in-process, and with no code change under opentelemetry-instrument."""

import socket

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.util._importlib_metadata import entry_points

from census_harness import collected
from yeto_otel.census import NodeDuty, node_duty_key
from yeto_otel.instrumentation import HostMemoryInstrumentor
from yeto_otel.settings import Settings, SettingsError
from zero_code import console_exports, metrics_by_name, run_instrumented

SCRIPT = "import time; x = bytearray(32 << 20); print('trainer ran')"


@pytest.fixture
def instrumentor():
    inst = HostMemoryInstrumentor()
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()


def test_registered_as_an_opentelemetry_instrumentor():
    eps = {ep.name: ep for ep in entry_points(group="opentelemetry_instrumentor")}
    assert eps["yeto_host_memory"].load() is HostMemoryInstrumentor


def test_takes_meter_provider_and_uninstrument_stops_reads(instrumentor):
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrumentor.instrument(meter_provider=provider,
                            settings=Settings(host_allocator="none", node_metrics="on"))
    names = set(collected(reader))
    assert {"yeto.process.memory.rss", "yeto.node.memory.anon_pages"} <= names
    files = instrumentor.census.reader.proc_files
    reads = {s: f.reads for s, f in files.items()}
    instrumentor.uninstrument()
    collected(reader)
    assert {s: f.reads for s, f in files.items()} == reads
    assert instrumentor.census is None


def test_bad_setting_raises_at_instrument(instrumentor, monkeypatch):
    monkeypatch.setenv("YETO_OTEL_HOST_ALLOCATOR", "no_such_module_xyz:stats")
    with pytest.raises(SettingsError, match="YETO_OTEL_HOST_ALLOCATOR"):
        instrumentor.instrument(meter_provider=MeterProvider())


def test_zero_code_exports_the_census_with_its_kinds(tmp_path):
    # A lock directory of its own: no other process of this host holds the node here.
    result = run_instrumented(SCRIPT, {"RANK": "3", "LOCAL_RANK": "0", "WORLD_SIZE": "8",
                                       "YETO_OTEL_LOCK_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "trainer ran" in result.stdout
    metrics, resource = metrics_by_name(console_exports(result.stdout))
    for name in ("yeto.process.memory.rss", "yeto.process.memory.anonymous",
                 "yeto.process.memory.private_dirty", "yeto.node.memory.available",
                 "yeto.node.memory.anon_pages"):
        data = metrics[name]["data"]
        assert data["is_monotonic"] is False, name          # UpDownCounter
        assert data["aggregation_temporality"] == 2, name   # cumulative
        assert data["data_points"][0]["value"] > 0
    peak = metrics["yeto.process.memory.rss_peak"]["data"]
    assert "is_monotonic" not in peak                        # Gauge
    assert peak["data_points"][0]["value"] >= 32 << 20
    assert metrics["yeto.census.errors"]["data"]["is_monotonic"] is True
    assert resource["service.instance.id"] == f"{socket.gethostname()}/rank-3"
    assert resource["host.name"] == socket.gethostname()
    assert (resource["yeto.rank"], resource["yeto.local_rank"], resource["yeto.world_size"]) \
        == (3, 0, 8)


@pytest.mark.parametrize("local_rank", ["0", "5"])
def test_zero_code_reports_node_metrics_only_while_it_holds_the_node(tmp_path, local_rank):
    """Any local rank reports the node when no other process of the host does; none (not even
    local rank 0) while another process holds the node's duty."""
    env = {"RANK": local_rank, "LOCAL_RANK": local_rank, "YETO_OTEL_LOCK_DIR": str(tmp_path)}
    holder = NodeDuty(node_duty_key(), fallback=False, directory=str(tmp_path))
    try:
        assert holder.held()
        result = run_instrumented(SCRIPT, env)
    finally:
        holder.close()
    assert result.returncode == 0, result.stderr
    metrics, resource = metrics_by_name(console_exports(result.stdout))
    assert "yeto.process.memory.rss" in metrics
    assert not [n for n in metrics if n.startswith("yeto.node.")]
    assert resource["service.instance.id"].endswith(f"/rank-{local_rank}")
    result = run_instrumented(SCRIPT, env)  # the holder has gone
    assert result.returncode == 0, result.stderr
    metrics, _ = metrics_by_name(console_exports(result.stdout))
    assert "yeto.node.memory.anon_pages" in metrics


def test_zero_code_user_resource_attributes_win():
    result = run_instrumented(SCRIPT, {
        "RANK": "1", "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=mine,team=pretrain",
        "OTEL_SERVICE_NAME": "island-a"})
    assert result.returncode == 0, result.stderr
    _, resource = metrics_by_name(console_exports(result.stdout))
    assert resource["service.instance.id"] == "mine"
    assert resource["team"] == "pretrain"
    assert resource["service.name"] == "island-a"
    assert resource["yeto.rank"] == 1


def test_zero_code_can_be_disabled():
    result = run_instrumented(SCRIPT, {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "yeto_host_memory"})
    assert result.returncode == 0, result.stderr
    metrics, _ = metrics_by_name(console_exports(result.stdout))
    assert not [n for n in metrics if n.startswith("yeto.")]


def test_zero_code_bad_setting_fails_fast_with_one_clear_line():
    result = run_instrumented(SCRIPT, {"YETO_OTEL_NODE_METRICS": "sometimes"})
    assert result.returncode == 2
    assert "trainer ran" not in result.stdout
    assert result.stderr.strip() == (
        "yeto-otel: YETO_OTEL_NODE_METRICS='sometimes' is not valid (expected auto, on or off); "
        "accepted: `auto`, `on`, `off`")


def test_zero_code_allocator_from_a_callable():
    code = ("from yeto_otel import testing; testing.settable.stats.update("
            "{'active_bytes.current': 5, 'active_bytes.allocated': 9, 'active_bytes.freed': 4,"
            " 'allocated_bytes.current': 70, 'allocated_bytes.allocated': 70,"
            " 'allocated_bytes.freed': 0}); print('trainer ran')")
    result = run_instrumented(code, {"YETO_OTEL_HOST_ALLOCATOR": "yeto_otel.testing:settable"})
    assert result.returncode == 0, result.stderr
    metrics, _ = metrics_by_name(console_exports(result.stdout))
    assert metrics["yeto.host_allocator.active_bytes.current"]["data"]["data_points"][0]["value"] == 5
    assert "yeto.host_allocator.allocated_bytes.current" not in metrics
    assert metrics["yeto.host_allocator.allocated_bytes.allocated"]["data"]["is_monotonic"] is True
