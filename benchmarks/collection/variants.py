"""The variants timed through the OpenTelemetry SDK: the census, psutil anchors A and B, and
the SDK alone; each set-up returns a `Variant` (timed callable, teardown). `sanity` checks that
each exports and reads what it should before anything is timed."""

from __future__ import annotations

import shutil
import tempfile
from typing import Callable

import psutil
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from yeto_otel.census import CENSUS, CENSUS_ERRORS, Instrument, Source
from yeto_otel.instrumentation import HostMemoryInstrumentor
from yeto_otel.settings import Settings
from yeto_otel.testing import HostAllocatorStandIn

# A CUDA build's host allocator stats (`.freed` > 0, so every `.current` is a gauge).
ALLOCATOR_REF = "yeto_otel.testing:realistic"

# The anchors stand in for our own six process/node rows (not the semantic-conventions twins,
# not the memory cgroup's rows, the age of the smaps_rollup values nor the uptime, which no
# file read makes: psutil has nothing for the first ones).
_PROCESS_NODE = tuple(m for m in CENSUS if m.source not in (Source.ALLOCATOR, Source.CGROUP)
                      and not m.semconv and not m.sample_age and not m.derived)
_ALLOCATOR = tuple(m for m in CENSUS if m.source is Source.ALLOCATOR)
assert len(_PROCESS_NODE) == 6 and len(_ALLOCATOR) == 18


def _creator(meter, instrument: Instrument):
    return {
        Instrument.UP_DOWN_COUNTER: meter.create_observable_up_down_counter,
        Instrument.GAUGE: meter.create_observable_gauge,
        Instrument.COUNTER: meter.create_observable_counter,
    }[instrument]


class Variant:
    """One timed callable, its teardown, and what was measured of it."""

    def __init__(self, key: str, label: str, call: Callable[[], object],
                 close: Callable[[], None] = lambda: None):
        self.key, self.label, self.call, self.close = key, label, call, close
        self.samples: list[int] = []
        self.round_medians: list[float] = []


def _points(data) -> tuple[int, int]:
    metrics = points = 0
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                metrics += 1
                points += len(m.data.data_points)
    return metrics, points


def setup_census() -> Variant:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrumentor = HostMemoryInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:  # a singleton: clear an earlier set-up
        instrumentor.uninstrument()
    lock_dir = tempfile.mkdtemp(prefix="yeto-bench-locks-")
    # A lock directory of its own, so this process is elected for its memory cgroup and the
    # collection includes the cgroup's reads, whatever else on the host holds that duty.
    instrumentor.instrument(meter_provider=provider, settings=Settings(
        host_allocator=ALLOCATOR_REF, node_metrics="on", lock_dir=lock_dir))

    def close() -> None:
        instrumentor.uninstrument()
        provider.shutdown()
        shutil.rmtree(lock_dir, ignore_errors=True)

    return Variant("census", "census (HostMemoryInstrumentor)", reader.get_metrics_data, close)


def _allocator_callbacks(counter: list[int]):
    """The 18 allocator instruments, one fake-allocator query shared per collection."""
    state: dict = {}
    first = _ALLOCATOR[0].name

    def make(m):
        field = m.field

        def cb(_o: CallbackOptions):
            if m.name == first:
                counter[1] += 1
                state["stats"] = HostAllocatorStandIn.realistic_stats()
            return [Observation(state["stats"][field])]
        return cb
    return {m.name: make(m) for m in _ALLOCATOR}


def _register_anchor(meter, callback_for, counter: list[int]) -> None:
    """The six process/node instruments with the given callbacks, and the allocator's 18."""
    for m in _PROCESS_NODE:
        _creator(meter, m.instrument)(m.name, callbacks=[callback_for(m)], unit=m.unit)
    alloc = _allocator_callbacks(counter)
    for m in _ALLOCATOR:
        _creator(meter, m.instrument)(m.name, callbacks=[alloc[m.name]], unit=m.unit)


def setup_anchor_a(counter: list[int]) -> Variant:
    """One memory_full_info() + one virtual_memory() per collection, shared by six callbacks."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench.anchor_a")
    proc = psutil.Process()
    shared: dict = {}
    # psutil has no VmHWM, Anonymous or Private_Dirty: stand-ins of the same cost (values are
    # not compared, only the reads). The first callback the SDK calls refreshes the reads
    # (the SDK calls callbacks in registration order; checked by the call counter).
    pick = {
        "yeto.process.memory.rss": lambda: shared["full"].rss,
        "yeto.process.memory.rss_peak": lambda: shared["full"].rss,
        "yeto.process.memory.anonymous": lambda: shared["full"].uss,
        "yeto.process.memory.private_dirty": lambda: shared["full"].pss,
        "yeto.node.memory.available": lambda: shared["vm"].available,
        "yeto.node.memory.anon_pages": lambda: shared["vm"].used,
    }
    first = _PROCESS_NODE[0].name

    def make(m):
        value = pick[m.name]

        def cb(_o: CallbackOptions):
            if m.name == first:
                counter[0] += 1
                shared["full"] = proc.memory_full_info()
                shared["vm"] = psutil.virtual_memory()
            return [Observation(value())]
        return cb

    _register_anchor(meter, make, counter)
    return Variant("anchor_a", "anchor A: psutil, one call each", reader.get_metrics_data,
                   provider.shutdown)


def setup_anchor_b(counter: list[int]) -> Variant:
    """Each callback calls psutil itself (contrib system-metrics pattern)."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench.anchor_b")
    proc = psutil.Process()

    def counted(fn):
        def wrapped():
            counter[0] += 1
            return fn()
        return wrapped

    pick = {
        "yeto.process.memory.rss": counted(lambda: proc.memory_info().rss),
        "yeto.process.memory.rss_peak": counted(lambda: proc.memory_info().rss),
        "yeto.process.memory.anonymous": counted(lambda: proc.memory_full_info().uss),
        "yeto.process.memory.private_dirty": counted(lambda: proc.memory_full_info().pss),
        "yeto.node.memory.available": counted(lambda: psutil.virtual_memory().available),
        "yeto.node.memory.anon_pages": counted(lambda: psutil.virtual_memory().used),
    }

    def make(m):
        value = pick[m.name]

        def cb(_o: CallbackOptions):
            return [Observation(value())]
        return cb

    _register_anchor(meter, make, counter)
    return Variant("anchor_b", "anchor B: psutil, contrib pattern", reader.get_metrics_data,
                   provider.shutdown)


def setup_sdk_only() -> Variant:
    """The census's exact instrument set, observing constants: the SDK's share of a collection."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("bench.sdk_only")
    for m in CENSUS:
        value = 123_456_789

        def cb(_o: CallbackOptions, value=value):
            return [Observation(value)]
        _creator(meter, m.instrument)(m.name, callbacks=[cb], unit=m.unit)
    sources = ("allocator", "meminfo", "smaps_rollup", "status")

    def errors(_o: CallbackOptions):
        return [Observation(0, {"source": s}) for s in sources]
    _creator(meter, CENSUS_ERRORS.instrument)(CENSUS_ERRORS.name, callbacks=[errors],
                                              unit=CENSUS_ERRORS.unit)
    return Variant("sdk_only", "SDK only: census instruments, constant values",
                   reader.get_metrics_data, provider.shutdown)


def sanity(variants: dict[str, Variant], counter: list[int]) -> dict:
    """Check that every SDK variant exports what it should and reads what it should."""
    out = {}
    for key in ("census", "anchor_a", "anchor_b", "sdk_only"):
        v = variants[key]
        before = list(counter)
        data = v.call()
        metrics, points = _points(data)
        out[key] = {"metrics": metrics, "points": points,
                    "psutil_calls": counter[0] - before[0], "allocator_queries": counter[1] - before[1]}
    metrics, points = len(CENSUS) + 1, len(CENSUS) + 4  # + errors with 4 sources
    if out["census"]["metrics"] != metrics or out["census"]["points"] != points:
        raise SystemExit(f"census exported {out['census']}; expected {metrics} metrics, "
                         f"{points} points: the set-up is wrong")
    if out["anchor_a"]["psutil_calls"] != 1 or out["anchor_b"]["psutil_calls"] != 6:
        raise SystemExit(f"psutil call counts are not as designed: {out}")
    census = HostMemoryInstrumentor().census
    # status read once per collection, not once per instrument; smaps_rollup within its
    # budget (YETO_OTEL_SMAPS_BUDGET), so at most as often.
    files = census.reader.proc_files
    n0 = {source: pf.reads for source, pf in files.items()}
    variants["census"].call()
    variants["census"].call()
    for source in (Source.STATUS, Source.SMAPS_ROLLUP):
        out["census"][f"{source.label}_reads_per_collection"] = \
            (files[source].reads - n0[source]) / 2
    return out
