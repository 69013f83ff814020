"""The accelerator host (pinned) allocator: where its counters come from and what they mean.

Sources return the flat dict of `torch.cuda.host_memory_stats()` (`active_bytes.current`,
`num_host_alloc`, ...). Key names have changed across releases, so every key is optional.

Whether a stat's `.current` is a gauge is decided by evidence: on some builds frees never
reach `active_bytes.freed`, and `.current` is then every byte ever handed out. A `.current`
is trusted as a gauge only once this process has seen its `.freed` move.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
import threading
from typing import Callable, Mapping

from ._bounded_call import BoundedCall, CallFailed
from ._table import ALLOCATOR_KEYS, ALLOCATOR_STATS
from ..settings import HOST_ALLOCATOR_ACCEPTED, Settings, SettingsError

__all__ = ["AllocatorSource", "GaugeEvidence", "read_allocator_stats", "resolve_allocator",
           "unresolved_allocator"]

_log = logging.getLogger("yeto_otel.allocator")

StatsFn = Callable[[], object]

_SETTING = "YETO_OTEL_HOST_ALLOCATOR"
_CALLABLE_ACCEPTED = "`module:function` naming a callable"
DEFAULT_TIMEOUT_MS = Settings().allocator_timeout_ms


def _plain(raw: object) -> object:
    # Copied on the query's thread, so a mapping of the user's whose methods raise (anything,
    # SystemExit included) fails there, not in the census's reader.
    return dict(raw.items()) if isinstance(raw, Mapping) and type(raw) is not dict else raw


class AllocatorSource:
    """A named way to query the host allocator; `query()` returns the raw flat stats or {}.

    Each query is bounded (`timeout_ms`, YETO_OTEL_ALLOCATOR_TIMEOUT): see `_bounded_call`.
    `query()` raises only `Exception`s: what the query raised, or `CallFailed` when it timed
    out, is still stuck in an abandoned query, or raised a `BaseException`.
    """

    def __init__(self, name: str, query: StatsFn, empty_cache: Callable[[], None] | None = None,
                 *, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        self.name = name
        self._query = BoundedCall(lambda: _plain(query()), timeout_ms / 1000,
                                  f"host allocator {name!r}")
        self._empty_cache = empty_cache

    def query(self) -> object:
        return self._query()

    def latest(self) -> object:
        """Without waiting (the step log): the last finished query's answer, raised as `query()`
        raises it, and a new query started when none runs; `CallPending` before the first
        answer (see `BoundedCall.latest`)."""
        return self._query.latest()

    def empty_cache(self) -> bool:
        """Release the host cache to the OS. False where this source cannot."""
        if self._empty_cache is None:
            return False
        self._empty_cache()
        return True


def _cuda_initialised() -> object | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return torch if torch.cuda.is_initialized() else None
    except Exception:  # a half-imported or exotic torch: treat as no CUDA
        return None


def _cuda_stats() -> object:
    torch = _cuda_initialised()
    return torch.cuda.host_memory_stats() if torch is not None else {}


def _cuda_empty_cache() -> None:
    torch = _cuda_initialised()
    if torch is None:
        return
    accel = getattr(torch, "accelerator", None)
    if accel is not None and hasattr(accel, "empty_host_cache"):
        accel.empty_host_cache()  # raises RuntimeError on CPU-only builds: guarded by callers
    elif hasattr(torch.cuda, "host_empty_cache"):
        torch.cuda.host_empty_cache()


def _npu_module():
    torch_npu = sys.modules.get("torch_npu")
    return getattr(torch_npu, "npu", None) if torch_npu is not None else None


def _npu_stats() -> object:
    npu = _npu_module()
    if npu is None:
        return {}
    # Older builds called it pin_memory_stats.
    fn = getattr(npu, "host_memory_stats", None) or getattr(npu, "pin_memory_stats", None)
    return fn() if fn is not None else {}


def _npu_empty_cache() -> None:
    npu = _npu_module()
    if npu is None:
        return
    fn = getattr(npu, "host_empty_cache", None) or getattr(npu, "empty_pin_memory_cache", None)
    if fn is not None:
        fn()


def _auto_stats() -> object:
    if _cuda_initialised() is not None:
        return _cuda_stats()
    if _npu_module() is not None:
        return _npu_stats()
    return {}


def _auto_empty_cache() -> None:
    if _cuda_initialised() is not None:
        _cuda_empty_cache()
    elif _npu_module() is not None:
        _npu_empty_cache()


def _import_module_for(choice: str, module: str) -> object:
    try:
        return importlib.import_module(module)
    except (Exception, SystemExit) as exc:  # a module that fails to import fails in any way
        raise SettingsError(_SETTING, choice, HOST_ALLOCATOR_ACCEPTED,
                            f"cannot import {module}: {type(exc).__name__}: {exc}") from None


def _callable_named(choice: str) -> StatsFn:
    module_name, _, attr = choice.partition(":")
    target: object = _import_module_for(choice, module_name)
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except Exception as exc:  # AttributeError, or whatever a module __getattr__ raises
            raise SettingsError(_SETTING, choice, _CALLABLE_ACCEPTED,
                                f"{module_name} has no attribute {attr}: {exc}") from None
    if not callable(target):
        raise SettingsError(_SETTING, choice, _CALLABLE_ACCEPTED,
                            f"{attr} is not callable: it is a {type(target).__name__}")
    return target


def resolve_allocator(choice: str, *, timeout_ms: int = DEFAULT_TIMEOUT_MS
                      ) -> AllocatorSource | None:
    """Turn the `YETO_OTEL_HOST_ALLOCATOR` value into a source (None for `none`); a value that
    cannot be resolved raises `SettingsError` (the distro checks this at start).

    `auto` never imports torch: it looks at what the trainer has already imported, at every
    query, so CUDA initialised after start-up is still picked up. `cuda` and `npu` import
    their module here, at start, so a missing one is an error now rather than silence later.
    """
    if choice == "none":
        return None
    if choice == "auto":
        return AllocatorSource("auto", _auto_stats, _auto_empty_cache, timeout_ms=timeout_ms)
    if choice == "cuda":
        _import_module_for(choice, "torch")
        return AllocatorSource("cuda", _cuda_stats, _cuda_empty_cache, timeout_ms=timeout_ms)
    if choice == "npu":
        _import_module_for(choice, "torch_npu")
        return AllocatorSource("npu", _npu_stats, _npu_empty_cache, timeout_ms=timeout_ms)
    return AllocatorSource(choice, _callable_named(choice), timeout_ms=timeout_ms)


def unresolved_allocator(choice: str, error: SettingsError) -> AllocatorSource:
    """A source for a setting that could not be resolved, for callers that must not raise (the
    step log): every query fails with `error`'s message, so the census goes on without the
    allocator and counts, and logs once, why."""
    reason = str(error)

    def query() -> object:
        raise CallFailed(reason)  # a new one each time: a re-raised one grows its traceback

    return AllocatorSource(choice, query)


_INT64_LIMIT = 2 ** 63  # OTLP integer points are int64; a larger one breaks the whole export


def _is_count(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value < _INT64_LIMIT
    return isinstance(value, float) and math.isfinite(value) and value >= 0


def read_allocator_stats(raw: object) -> tuple[dict[str, int | float], list[str]]:
    """Keep the known keys that hold usable numbers.

    Returns (values, problems). Missing keys are normal (older builds, CPU builds return {})
    and are not problems; a result that is not a mapping, or a known key holding something
    other than a finite non-negative number, is.
    """
    if not isinstance(raw, Mapping):
        return {}, [f"allocator returned {type(raw).__name__}, expected a dict"]
    values: dict[str, int | float] = {}
    problems = []
    for key in ALLOCATOR_KEYS:
        if key not in raw:
            continue
        value = raw[key]
        if not _is_count(value):
            problems.append(f"allocator key {key} holds {value!r}, expected a count")
            continue
        values[key] = value
    return values, problems


class GaugeEvidence:
    """Remembers, per stat, whether this process has seen its `.freed` move."""

    def __init__(self) -> None:
        self._first_freed: dict[str, float] = {}
        self._gauges: set[str] = set()
        self._lock = threading.Lock()

    def observe(self, values: Mapping[str, int | float]) -> None:
        for stat in ALLOCATOR_STATS:
            freed = values.get(f"{stat}.freed")
            if freed is None or stat in self._gauges:
                continue
            with self._lock:
                first = self._first_freed.setdefault(stat, freed)
                # Counters start at zero with the process (and on reset), so a non-zero
                # .freed, or one that changed, is proof that frees are being counted.
                if freed != 0 or freed != first:
                    self._gauges.add(stat)
                    _log.info("host allocator: %s.freed moves, so %s.current is exported as a "
                              "gauge from now on", stat, stat)

    def is_gauge(self, stat: str) -> bool:
        return stat in self._gauges
