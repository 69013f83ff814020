"""Every setting: accepted values, a bad value naming the variable, the value and what is
accepted; defaults; which process reports node metrics."""

from __future__ import annotations

import pytest

from yeto_otel.settings import (
    OTEL_DEFAULTS,
    SETTINGS,
    Settings,
    SettingsError,
    apply_otel_defaults,
    check_sdk_variables,
    load_settings,
)

ACCEPTED = {
    "YETO_OTEL_HOST_ALLOCATOR": [
        ("auto", "auto"), ("cuda", "cuda"), ("npu", "npu"), ("none", "none"),
        ("my_pkg.stats:host_stats", "my_pkg.stats:host_stats"),
        ("mod:Class.method", "mod:Class.method"), ("_m:_f", "_m:_f"),
        ("  cuda\n", "cuda"),
    ],
    "YETO_OTEL_ALLOCATOR_TIMEOUT": [("100", 100), ("1", 1), ("60000", 60000), (" 250 ", 250)],
    "YETO_OTEL_EXIT_FLUSH_TIMEOUT": [("3000", 3000), ("0", 0), ("30000", 30000), (" 500 ", 500)],
    "YETO_OTEL_NODE_METRICS": [("auto", "auto"), ("on", "on"), ("off", "off"), (" off ", "off")],
    "YETO_OTEL_LOCK_DIR": [("/dev/shm", "/dev/shm"), (" /run/lock ", "/run/lock"),
                           ("/tmp/x y", "/tmp/x y")],
    "YETO_DILOCO_HOST_MEM_CENSUS": [("0", False), ("1", True), ("", False), (" 1 ", True)],
    "YETO_OTEL_LOCAL_DIR": [("yeto-telemetry", "yeto-telemetry"), ("/tmp/x y", "/tmp/x y"),
                            ("~/t", "~/t")],
    "YETO_DILOCO_ANCHOR_DTYPE": [("float32", "float32"), ("bfloat16", "bfloat16"),
                                 ("float16", "float16"), ("float64", "float64"), ("", None)],
    "YETO_DILOCO_RESUME_ANCHOR_MMAP": [("0", False), ("1", True), ("", False)],
    "YETO_DILOCO_RESUME_ANCHOR_READAHEAD": [("anchor", "anchor"), ("kernel", "kernel"),
                                            ("off", "off")],
    "RANK": [("0", 0), ("7", 7), ("1023", 1023), ("", None), (" 3 ", 3),
             ("2147483647", 2147483647), ("0007", 7)],
    "LOCAL_RANK": [("0", 0), ("3", 3), ("", None), ("2147483647", 2147483647)],
    "WORLD_SIZE": [("1", 1), ("8", 8), ("4096", 4096), ("", None), ("2147483647", 2147483647)],
    "YETO_OTEL_DATALOADER_WORKERS": [("on", True), ("off", False), (" off ", False)],
    "YETO_OTEL_SEMCONV_METRICS": [("on", True), ("off", False), (" off ", False)],
    "YETO_OTEL_SMAPS_BUDGET": [("0.1", 0.1), ("0", 0.0), ("100", 100.0), ("0.001", 0.001),
                               ("always", float("inf")), (" 2 ", 2.0), ("1e-3", 0.001)],
    "YETO_OTEL_IDENTITY_OWNER": [("3:4242", (3, 4242)), ("-:17", (None, 17)), ("", None),
                                 ("local-2:99", ("local-2", 99))],
    "YETO_OTEL_JOB_ID": [("train-7b", "train-7b"), ("pytorchjob.ns_1", "pytorchjob.ns_1"),
                         ("", None)],
    "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": [("off", False), ("on", True), (" on ", True)],
    "YETO_OTEL_WORKER_LOAD_SPANS": [("off", False), ("on", True), (" on ", True)],
    "YETO_OTEL_EXIT_RECORDS": [("on", True), ("off", False), (" off ", False)],
}

REJECTED = {
    "YETO_OTEL_EXIT_FLUSH_TIMEOUT": ["", "-1", "30001", "1.5", "3s", "inf", "9" * 400],
    "YETO_OTEL_HOST_ALLOCATOR": ["", "CUDA", "Auto", "torch", "rocm", "mod:", ":fn", "1mod:fn",
                                 "mod:fn()", "mod::fn", "mod:fn:x", "mod fn", "mod-x:fn"],
    "YETO_OTEL_ALLOCATOR_TIMEOUT": ["", "0", "-5", "60001", "1.5", "100ms", "inf", "1e3",
                                    "9" * 400],
    "YETO_OTEL_NODE_METRICS": ["", "ON", "1", "0", "yes", "true", "auto,on"],
    "YETO_OTEL_LOCK_DIR": ["", "   ", "locks", "./locks", "~/locks", "/dev/\x00shm"],
    "YETO_DILOCO_HOST_MEM_CENSUS": ["true", "yes", "2", "on", "01", "-1"],
    "YETO_OTEL_LOCAL_DIR": ["", "   "],
    "YETO_DILOCO_ANCHOR_DTYPE": ["fp32", "bf16", "int8", "torch.float32", "Float32", "float"],
    "YETO_DILOCO_RESUME_ANCHOR_MMAP": ["yes", "true", "2", "off"],
    "YETO_DILOCO_RESUME_ANCHOR_READAHEAD": ["0", "1", "on", "Anchor", ""],
    # Beyond what torch.distributed takes (a 32-bit int), int64, and Python's int() digit cap.
    "RANK": ["-1", "abc", "1.5", "0x1", "1e3", "one", "2147483648", "9223372036854775808",
             "99999999999999999999", "9" * 5000, "\u0663"],
    "LOCAL_RANK": ["-3", "x", "2.0", "2147483648", "18446744073709551616"],
    "WORLD_SIZE": ["0", "-2", "x", "8.0", "2147483648", "1" + "0" * 30],
    "YETO_OTEL_DATALOADER_WORKERS": ["", "1", "yes", "ON", "true"],
    "YETO_OTEL_SEMCONV_METRICS": ["", "0", "no", "Off", "false"],
    "YETO_OTEL_SMAPS_BUDGET": ["", "-0.1", "100.5", "nan", "inf", "Always", "never", "0.1%",
                               "1" * 40, "\u0661"],
    "YETO_OTEL_IDENTITY_OWNER": ["4242", "3:", ":4242", "x:1", "3:4a", "-1:2", "3:4:5",
                                 "local-:1", "local-x:1"],
    "YETO_OTEL_JOB_ID": ["a/b", "job id", "x" * 129, "ü"],
    "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": ["", "1", "true", "ON", "yes"],
    "YETO_OTEL_WORKER_LOAD_SPANS": ["", "0", "sampled", "Off", "all"],
    "YETO_OTEL_EXIT_RECORDS": ["", "1", "yes", "On"],
}

FIELD = {
    "YETO_OTEL_HOST_ALLOCATOR": "host_allocator",
    "YETO_OTEL_ALLOCATOR_TIMEOUT": "allocator_timeout_ms",
    "YETO_OTEL_EXIT_FLUSH_TIMEOUT": "exit_flush_timeout_ms",
    "YETO_OTEL_NODE_METRICS": "node_metrics",
    "YETO_OTEL_LOCK_DIR": "lock_dir",
    "YETO_DILOCO_HOST_MEM_CENSUS": "step_log_census",
    "YETO_OTEL_LOCAL_DIR": "local_dir",
    "YETO_DILOCO_ANCHOR_DTYPE": "anchor_dtype",
    "YETO_DILOCO_RESUME_ANCHOR_MMAP": "resume_anchor_mmap",
    "YETO_DILOCO_RESUME_ANCHOR_READAHEAD": "resume_anchor_readahead",
    "RANK": "rank",
    "LOCAL_RANK": "local_rank",
    "WORLD_SIZE": "world_size",
    "YETO_OTEL_DATALOADER_WORKERS": "dataloader_workers",
    "YETO_OTEL_SEMCONV_METRICS": "semconv_metrics",
    "YETO_OTEL_SMAPS_BUDGET": "smaps_budget_percent",
    "YETO_OTEL_IDENTITY_OWNER": "identity_owner",
    "YETO_OTEL_JOB_ID": "job_id",
    "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "exit_flush_on_signals",
    "YETO_OTEL_WORKER_LOAD_SPANS": "worker_load_spans",
    "YETO_OTEL_EXIT_RECORDS": "exit_records",
}

ACCEPTED_TEXT = {s.name: s.accepted for s in SETTINGS}


def test_every_setting_is_covered_here():
    # a new setting must come with accepted and rejected values in this file
    names = {s.name for s in SETTINGS}
    assert names == set(ACCEPTED) == set(REJECTED) == set(FIELD)


@pytest.mark.parametrize("name, raw, expected",
                         [(n, raw, exp) for n, cases in ACCEPTED.items() for raw, exp in cases])
def test_accepted_values(name, raw, expected):
    settings = load_settings({name: raw})
    assert getattr(settings, FIELD[name]) == expected


@pytest.mark.parametrize("name, raw", [(n, raw) for n, bad in REJECTED.items() for raw in bad])
def test_rejected_values_name_variable_value_and_accepted(name, raw):
    with pytest.raises(SettingsError) as info:
        load_settings({name: raw})
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.name, err.value, err.accepted) == (name, raw, ACCEPTED_TEXT[name])
    message = str(err)
    assert message.startswith(f"{name}={raw!r} is not valid")
    assert message.endswith(f"accepted: {ACCEPTED_TEXT[name]}")


def test_defaults_when_nothing_is_set():
    assert load_settings({}) == Settings()
    s = Settings()
    assert (s.host_allocator, s.node_metrics, s.step_log_census, s.rank, s.local_rank,
            s.world_size) == ("auto", "auto", False, None, None, None)
    assert (s.anchor_dtype, s.resume_anchor_mmap, s.resume_anchor_readahead) == \
        (None, True, "anchor")


def test_defaults_match_the_table():
    defaults = {s.name: s.default for s in SETTINGS}
    assert defaults == {"YETO_OTEL_HOST_ALLOCATOR": "auto", "YETO_OTEL_NODE_METRICS": "auto",
                        "YETO_OTEL_LOCK_DIR": "/dev/shm",
                        "YETO_DILOCO_HOST_MEM_CENSUS": "0", "YETO_DILOCO_ANCHOR_DTYPE": None,
                        "YETO_OTEL_LOCAL_DIR": "yeto-telemetry",
                        "YETO_DILOCO_RESUME_ANCHOR_MMAP": "1",
                        "YETO_DILOCO_RESUME_ANCHOR_READAHEAD": "anchor", "RANK": None, "LOCAL_RANK": None,
                        "WORLD_SIZE": None, "YETO_OTEL_DATALOADER_WORKERS": "on",
                        "YETO_OTEL_IDENTITY_OWNER": None, "YETO_OTEL_JOB_ID": None, "YETO_OTEL_ALLOCATOR_TIMEOUT": "100",
                        "YETO_OTEL_EXIT_FLUSH_TIMEOUT": "3000",
                        "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "off",
                        "YETO_OTEL_WORKER_LOAD_SPANS": "off", "YETO_OTEL_EXIT_RECORDS": "on",
                        "YETO_OTEL_SEMCONV_METRICS": "on", "YETO_OTEL_SMAPS_BUDGET": "0.1"}


def test_every_setting_is_documented():
    for s in SETTINGS:
        assert s.description.strip() and s.accepted.strip()


def test_reads_the_process_environment(monkeypatch):
    for name in FIELD:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("YETO_OTEL_NODE_METRICS", "on")
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    monkeypatch.setenv("YETO_OTEL_HOST_ALLOCATOR", "none")
    assert load_settings() == Settings(host_allocator="none", node_metrics="on",
                                       step_log_census=True, rank=5, local_rank=1, world_size=16,
                                       rank_source="torch")


def test_bad_process_environment_raises(monkeypatch):
    monkeypatch.setenv("YETO_OTEL_NODE_METRICS", "sometimes")
    with pytest.raises(SettingsError, match="YETO_OTEL_NODE_METRICS='sometimes'"):
        load_settings()


def test_the_first_bad_setting_in_table_order_is_reported():
    with pytest.raises(SettingsError) as info:
        load_settings({"WORLD_SIZE": "0", "YETO_OTEL_NODE_METRICS": "maybe", "RANK": "x"})
    assert info.value.name == "YETO_OTEL_NODE_METRICS"


def test_unrelated_variables_are_ignored():
    assert load_settings({"OTEL_SERVICE_NAME": "x", "YETO_OTEL_SOMETHING": "?"}) == Settings()


@pytest.mark.parametrize("node_metrics, local_rank, expected", [
    ("auto", None, True), ("auto", "0", True), ("auto", "3", True),
    ("on", None, True), ("on", "0", True), ("on", "3", True),
    ("off", None, False), ("off", "0", False), ("off", "3", False),
])
def test_reports_node_metrics(node_metrics, local_rank, expected):
    """Whether a process may report node metrics; under `auto` every one may, and the node
    duty (tests/census/test_node_duty.py) lets one at a time."""
    env = {"YETO_OTEL_NODE_METRICS": node_metrics}
    if local_rank is not None:
        env["LOCAL_RANK"] = local_rank
    assert load_settings(env).reports_node_metrics is expected


def test_without_a_usable_node_lock_exactly_one_of_eight_local_ranks_falls_back():
    reporters = [r for r in range(8) if load_settings({"LOCAL_RANK": str(r)}).node_fallback]
    assert reporters == [0]
    assert load_settings({}).node_fallback  # a plain process


def test_apply_otel_defaults_fills_only_what_is_unset():
    env = {"OTEL_METRICS_EXPORTER": "console"}
    apply_otel_defaults(env)
    assert env["OTEL_METRICS_EXPORTER"] == "console"
    assert env["OTEL_TRACES_EXPORTER"] == "otlp"
    assert env["OTEL_LOGS_EXPORTER"] == "otlp"
    assert env["OTEL_METRIC_EXPORT_INTERVAL"] == "10000"
    assert set(env) == set(OTEL_DEFAULTS)


@pytest.mark.parametrize("rank, world, ok", [("0", "1", True), ("3", "4", True), ("4", "4", False),
                                             ("9", "4", False), ("7", "", True), ("", "2", True)])
def test_rank_is_below_world_size_when_both_are_set(rank, world, ok):
    env = {"RANK": rank, "WORLD_SIZE": world}
    if ok:
        assert load_settings(env).rank == (int(rank) if rank else None)
        return
    with pytest.raises(SettingsError) as info:
        load_settings(env)
    assert info.value.name == "RANK"
    assert str(info.value).startswith(f"RANK={rank!r} is not valid (WORLD_SIZE is {world}")


SDK_ACCEPTED = [
    {}, {"OTEL_METRIC_EXPORT_INTERVAL": "10000"}, {"OTEL_METRIC_EXPORT_INTERVAL": "0.5"},
    {"OTEL_METRIC_EXPORT_INTERVAL": ""}, {"OTEL_METRIC_EXPORT_TIMEOUT": " 30000 "},
    {"OTEL_BSP_SCHEDULE_DELAY": "5000", "OTEL_BLRP_MAX_QUEUE_SIZE": "2048"},
    {"OTEL_EXPORTER_OTLP_TIMEOUT": "10"}, {"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "2.5"},
    {"OTEL_TRACES_EXPORTER": "none"}, {"OTEL_TRACES_EXPORTER": "NONE"},
    {"OTEL_METRICS_EXPORTER": "console,otlp_json_file"}, {"OTEL_LOGS_EXPORTER": " otlp "},
    {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
    {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
     "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},  # the signal's own protocol wins
    {"OTEL_METRICS_EXPORTER": "otlp_proto_http"},
]

SDK_REJECTED = [
    ("OTEL_METRIC_EXPORT_INTERVAL", "0"), ("OTEL_METRIC_EXPORT_INTERVAL", "-1000"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "nan"), ("OTEL_METRIC_EXPORT_INTERVAL", "inf"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "10s"), ("OTEL_METRIC_EXPORT_INTERVAL", "1e300"),
    ("OTEL_METRIC_EXPORT_TIMEOUT", "0"), ("OTEL_BSP_SCHEDULE_DELAY", "0"),
    ("OTEL_BSP_SCHEDULE_DELAY", "1.5"), ("OTEL_BSP_EXPORT_TIMEOUT", "-1"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "0"), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "x"),
    ("OTEL_BLRP_SCHEDULE_DELAY", "-5"), ("OTEL_BLRP_EXPORT_TIMEOUT", "soon"),
    ("OTEL_BLRP_MAX_QUEUE_SIZE", "-1"), ("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", "0"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "0"), ("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "-3"),
    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "nan"),
    ("OTEL_TRACES_EXPORTER", "bogus"), ("OTEL_METRICS_EXPORTER", "console,bogus"),
    ("OTEL_LOGS_EXPORTER", "otlp,none"), ("OTEL_METRICS_EXPORTER", "prometheus"),
]


@pytest.mark.parametrize("env", SDK_ACCEPTED)
def test_sdk_variables_the_sdk_can_use_pass(env):
    check_sdk_variables(env)


@pytest.mark.parametrize("name, raw", SDK_REJECTED)
def test_sdk_variables_the_sdk_cannot_use_name_the_variable(name, raw):
    with pytest.raises(SettingsError) as info:
        check_sdk_variables({name: raw})
    assert info.value.name == name
    assert str(info.value).startswith(f"{name}={raw.strip()!r} is not valid (")


def test_an_unsupported_otlp_protocol_names_the_protocol_variable():
    with pytest.raises(SettingsError) as info:
        check_sdk_variables({"OTEL_LOGS_EXPORTER": "otlp",
                             "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert info.value.name == "OTEL_EXPORTER_OTLP_PROTOCOL"
    assert info.value.accepted == "grpc, http/protobuf"
