"""Host allocator sources (fake torch / torch_npu injected into sys.modules), the defensive
stats reader, and the evidence that decides when `.current` is a gauge."""

from __future__ import annotations

import logging
import math
import sys
import types

import pytest

from yeto_otel.census import (
    AllocatorSource,
    GaugeEvidence,
    read_allocator_stats,
    resolve_allocator,
)
from yeto_otel.census import ALLOCATOR_COUNTERS, ALLOCATOR_STATS
from yeto_otel.settings import SettingsError
from yeto_otel.testing import HostAllocatorStandIn, settable

STATS = {"active_bytes.current": 5, "active_bytes.freed": 1, "num_host_alloc": 3}


class ImportRecorder:
    """A meta path finder that records (and refuses) imports of the accelerator modules."""

    def __init__(self):
        self.attempts: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "torch_npu"):
            self.attempts.append(name)
        return None


@pytest.fixture
def no_accelerator(monkeypatch):
    """Neither torch nor torch_npu imported; imports of them are recorded."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    recorder = ImportRecorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    return recorder


class FakeCuda:
    def __init__(self, initialised=False, stats=None, raises=False):
        self.initialised = initialised
        self.stats = STATS if stats is None else stats
        self.raises = raises
        self.stats_calls = 0
        self.emptied = 0

    def is_initialized(self):
        if self.raises:
            raise RuntimeError("half-imported torch")
        return self.initialised

    def host_memory_stats(self):
        self.stats_calls += 1
        return self.stats

    def host_empty_cache(self):
        self.emptied += 1


def fake_torch(monkeypatch, *, with_accelerator=True, **cuda_kwargs):
    torch = types.ModuleType("torch")
    torch.cuda = FakeCuda(**cuda_kwargs)
    if with_accelerator:
        torch.accelerator = types.SimpleNamespace(emptied=0)

        def empty_host_cache():
            torch.accelerator.emptied += 1
        torch.accelerator.empty_host_cache = empty_host_cache
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def fake_torch_npu(monkeypatch, *, legacy=False, stats=None):
    torch_npu = types.ModuleType("torch_npu")
    npu = types.SimpleNamespace(emptied=0, calls=0)
    result = {"active_bytes.current": 9} if stats is None else stats

    def stats_fn():
        npu.calls += 1
        return result

    def empty():
        npu.emptied += 1
    if legacy:
        npu.pin_memory_stats = stats_fn
        npu.empty_pin_memory_cache = empty
    else:
        npu.host_memory_stats = stats_fn
        npu.host_empty_cache = empty
    torch_npu.npu = npu
    monkeypatch.setitem(sys.modules, "torch_npu", torch_npu)
    return torch_npu


# --- resolve_allocator -------------------------------------------------------------------

def test_none_is_no_source():
    assert resolve_allocator("none") is None


def test_auto_without_torch_gives_empty_stats_and_imports_nothing(no_accelerator):
    source = resolve_allocator("auto")
    assert isinstance(source, AllocatorSource) and source.name == "auto"
    assert source.query() == {}
    assert source.query() == {}
    source.empty_cache()  # nothing to empty; must not raise
    assert no_accelerator.attempts == []
    assert "torch" not in sys.modules and "torch_npu" not in sys.modules


def test_auto_with_torch_but_cuda_not_initialised(no_accelerator, monkeypatch):
    torch = fake_torch(monkeypatch, initialised=False)
    source = resolve_allocator("auto")
    assert source.query() == {}
    assert torch.cuda.stats_calls == 0  # not even asked: asking could initialise CUDA
    source.empty_cache()
    assert torch.accelerator.emptied == 0


def test_auto_picks_up_cuda_initialised_after_start(no_accelerator, monkeypatch):
    torch = fake_torch(monkeypatch, initialised=False)
    source = resolve_allocator("auto")
    assert source.query() == {}
    torch.cuda.initialised = True
    assert source.query() == STATS
    assert torch.cuda.stats_calls == 1
    assert source.empty_cache() is True
    assert torch.accelerator.emptied == 1


def test_auto_with_a_torch_whose_cuda_check_raises(no_accelerator, monkeypatch):
    fake_torch(monkeypatch, raises=True)
    assert resolve_allocator("auto").query() == {}


def test_auto_falls_back_to_npu(no_accelerator, monkeypatch):
    torch = fake_torch(monkeypatch, initialised=False)
    torch_npu = fake_torch_npu(monkeypatch)
    source = resolve_allocator("auto")
    assert source.query() == {"active_bytes.current": 9}
    assert torch.cuda.stats_calls == 0
    source.empty_cache()
    assert torch_npu.npu.emptied == 1 and torch.accelerator.emptied == 0


def test_auto_prefers_initialised_cuda_over_npu(no_accelerator, monkeypatch):
    fake_torch(monkeypatch, initialised=True)
    torch_npu = fake_torch_npu(monkeypatch)
    assert resolve_allocator("auto").query() == STATS
    assert torch_npu.npu.calls == 0


def test_cuda_source_follows_initialisation(no_accelerator, monkeypatch):
    torch = fake_torch(monkeypatch, initialised=False)
    source = resolve_allocator("cuda")
    assert source.name == "cuda"
    assert source.query() == {}
    source.empty_cache()
    assert torch.accelerator.emptied == 0
    torch.cuda.initialised = True
    assert source.query() == STATS
    assert source.empty_cache() is True
    assert torch.accelerator.emptied == 1


def test_cuda_empty_cache_falls_back_to_torch_cuda(no_accelerator, monkeypatch):
    torch = fake_torch(monkeypatch, initialised=True, with_accelerator=False)
    resolve_allocator("cuda").empty_cache()
    assert torch.cuda.emptied == 1


def test_cuda_without_torch_is_a_settings_error(no_accelerator, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError, always
    with pytest.raises(SettingsError) as info:
        resolve_allocator("cuda")
    message = str(info.value)
    assert message.startswith("YETO_OTEL_HOST_ALLOCATOR='cuda' is not valid")
    assert "cannot import torch" in message
    assert "accepted: `auto`, `cuda`, `npu`, `none`, or `module:function`" in message
    assert info.value.name == "YETO_OTEL_HOST_ALLOCATOR"


def test_npu_without_torch_npu_is_a_settings_error(no_accelerator, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    with pytest.raises(SettingsError) as info:
        resolve_allocator("npu")
    assert "YETO_OTEL_HOST_ALLOCATOR='npu'" in str(info.value)
    assert "cannot import torch_npu" in str(info.value)


@pytest.mark.parametrize("legacy", [False, True])
def test_npu_current_and_legacy_names(no_accelerator, monkeypatch, legacy):
    torch_npu = fake_torch_npu(monkeypatch, legacy=legacy, stats={"num_host_alloc": 4})
    source = resolve_allocator("npu")
    assert source.name == "npu"
    assert source.query() == {"num_host_alloc": 4}
    assert source.empty_cache() is True
    assert torch_npu.npu.emptied == 1


def test_npu_without_any_stats_function(no_accelerator, monkeypatch):
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.npu = types.SimpleNamespace()
    monkeypatch.setitem(sys.modules, "torch_npu", torch_npu)
    source = resolve_allocator("npu")
    assert source.query() == {}
    source.empty_cache()


def test_module_function(monkeypatch):
    monkeypatch.setattr(settable, "stats", {"num_host_free": 8})
    source = resolve_allocator("yeto_otel.testing:settable")
    assert source.name == "yeto_otel.testing:settable"
    assert source.query() == {"num_host_free": 8}
    assert source.empty_cache() is False  # a bare callable cannot release the cache


def test_module_dotted_attribute():
    source = resolve_allocator("yeto_otel.testing:HostAllocatorStandIn.full_stats")
    assert source.query() == HostAllocatorStandIn.full_stats()


@pytest.mark.parametrize("choice, why", [
    ("no_such_module_for_yeto_tests:stats", "cannot import no_such_module_for_yeto_tests"),
    ("yeto_otel.testing:missing", "yeto_otel.testing has no attribute missing"),
    ("yeto_otel.testing:settable.missing", "yeto_otel.testing has no attribute settable.missing"),
    ("yeto_otel.testing:__all__", "__all__ is not callable"),
])
def test_module_function_errors(choice, why):
    with pytest.raises(SettingsError) as info:
        resolve_allocator(choice)
    message = str(info.value)
    assert message.startswith(f"YETO_OTEL_HOST_ALLOCATOR={choice!r} is not valid")
    assert why in message
    assert "accepted:" in message
    assert info.value.name == "YETO_OTEL_HOST_ALLOCATOR" and info.value.value == choice


# --- read_allocator_stats ----------------------------------------------------------------

def all_known_keys() -> list[str]:
    return [f"{s}.{f}" for s in ALLOCATOR_STATS for f in ("current", "peak", "allocated",
                                                          "freed")] + list(ALLOCATOR_COUNTERS)


def test_keeps_every_known_key():
    raw = {key: i for i, key in enumerate(all_known_keys())}
    values, problems = read_allocator_stats(raw)
    assert values == raw and problems == []
    assert len(values) == 18


def test_ignores_unknown_and_renamed_keys_silently():
    raw = {
        "active_bytes.current": 10,
        "active_bytes.now": 11,            # a renamed .current: not ours, not a problem
        "host_alloc_time.total": "x",      # timings are not read at all
        "num_host_allocs": 3,              # plural rename
        "Active_Bytes.current": 4,         # case matters
    }
    values, problems = read_allocator_stats(raw)
    assert values == {"active_bytes.current": 10}
    assert problems == []


def test_empty_dict_is_normal():
    assert read_allocator_stats({}) == ({}, [])


@pytest.mark.parametrize("junk", ["12", None, math.nan, math.inf, -math.inf, -1, -0.5, True,
                                  False, [1], {"current": 1}, 1 + 2j, b"1"])
def test_reports_junk_values(junk):
    values, problems = read_allocator_stats({"active_bytes.current": junk, "num_host_alloc": 2})
    assert values == {"num_host_alloc": 2}
    assert problems == [f"allocator key active_bytes.current holds {junk!r}, expected a count"]


@pytest.mark.parametrize("value, kept", [(2 ** 63 - 1, True), (2 ** 63, False),
                                         (10 ** 400, False), (1e300, True)],
                         ids=["2**63-1", "2**63", "10**400", "1e300"])
def test_counts_must_fit_an_otlp_int64(value, kept):
    """OTLP int data points are sfixed64: 2**63 makes protobuf raise "Value out of range" in
    the exporter and drops the whole batch. 10**400 today even raises OverflowError from
    math.isfinite() here (see report)."""
    values, problems = read_allocator_stats({"num_host_alloc": value})
    assert (values == {"num_host_alloc": value}) is kept
    assert (problems == []) is kept


@pytest.mark.parametrize("raw", [None, [], [("num_host_alloc", 1)], "x", 3, object()])
def test_reports_a_result_that_is_not_a_mapping(raw):
    values, problems = read_allocator_stats(raw)
    assert values == {}
    assert problems == [f"allocator returned {type(raw).__name__}, expected a dict"]


def test_accepts_any_mapping_and_float_counts():
    raw = types.MappingProxyType({"active_bytes.peak": 2.5, "num_host_free": 0})
    assert read_allocator_stats(raw) == ({"active_bytes.peak": 2.5, "num_host_free": 0}, [])


# --- GaugeEvidence ------------------------------------------------------------------------

@pytest.fixture
def allocator_log(caplog):
    caplog.set_level(logging.INFO, logger="yeto_otel.allocator")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "yeto_otel.allocator"]


def test_freed_that_stays_zero_is_never_a_gauge(allocator_log):
    evidence = GaugeEvidence()
    for current in (1, 5, 50, 500):
        evidence.observe({"active_bytes.current": current, "active_bytes.allocated": current,
                          "active_bytes.freed": 0})
        assert not evidence.is_gauge("active_bytes")
    assert allocator_log() == []


def test_no_freed_key_is_no_evidence():
    evidence = GaugeEvidence()
    evidence.observe({"active_bytes.current": 3})
    evidence.observe({"active_bytes.current": 1})  # even a falling current is not proof
    assert not evidence.is_gauge("active_bytes")


def test_freed_that_moves_makes_a_gauge_for_good(allocator_log):
    evidence = GaugeEvidence()
    evidence.observe({"active_bytes.freed": 0})
    assert not evidence.is_gauge("active_bytes")
    evidence.observe({"active_bytes.freed": 64})
    assert evidence.is_gauge("active_bytes")
    evidence.observe({"active_bytes.freed": 0})  # reset_accumulated_host_memory_stats
    assert evidence.is_gauge("active_bytes")
    evidence.observe({"active_bytes.freed": 128})
    evidence.observe({})
    assert evidence.is_gauge("active_bytes")
    messages = allocator_log()
    assert len(messages) == 1
    assert "active_bytes.freed moves" in messages[0]
    assert "active_bytes.current is exported as a gauge" in messages[0]


def test_non_zero_freed_on_first_look_is_proof():
    # the census started late: frees were already counted before we looked
    evidence = GaugeEvidence()
    evidence.observe({"allocations.freed": 7})
    assert evidence.is_gauge("allocations")


def test_stats_are_judged_independently(allocator_log):
    evidence = GaugeEvidence()
    evidence.observe({f"{s}.freed": 0 for s in ALLOCATOR_STATS})
    evidence.observe({"active_bytes.freed": 0, "allocated_bytes.freed": 4096,
                      "allocations.freed": 0, "active_requests.freed": 1})
    assert {s for s in ALLOCATOR_STATS if evidence.is_gauge(s)} == \
        {"allocated_bytes", "active_requests"}
    evidence.observe({"active_bytes.freed": 0, "allocated_bytes.freed": 0,
                      "allocations.freed": 2, "active_requests.freed": 0})
    assert {s for s in ALLOCATOR_STATS if evidence.is_gauge(s)} == \
        {"allocated_bytes", "active_requests", "allocations"}
    assert not evidence.is_gauge("active_bytes")
    messages = allocator_log()
    assert len(messages) == 3
    assert sorted(m.split(".freed")[0].split(": ")[1] for m in messages) == \
        ["active_requests", "allocated_bytes", "allocations"]
