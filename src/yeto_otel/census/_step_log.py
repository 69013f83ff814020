"""The host-memory census in the trainer's step log (sync rank 0 only).

With YETO_DILOCO_HOST_MEM_CENSUS=1 each step record gets this rank's, its memory cgroup's
(usage, limit, anon, file, OOM kills) and this node's memory and every host-allocator counter under the stable `host_mem.*` keys listed in
docs/metrics.md. Unset or `0` leaves the record untouched: same keys, same values.

The record is made on the training thread, and on the sync rank every other rank waits for
it at the next collective: its reader never waits (`CensusReader(wait=False)`), so the
record carries the latest values the census has, not necessarily ones read for this step.
And it reads within a time budget, since a step can take a few milliseconds: the rank's own
memory (/proc/self/status) at most every 250 ms, the node's, the memory cgroup's and the host
allocator's (eight files and a query) at most once a second; in between a record carries the
last values read, and each group's age in seconds. Measured right after a training step (which
has flushed the CPU's caches: everything costs several times what it does in a tight loop), a
record whose reads are not due costs ~25 µs (a dict update; ~4 µs warm), one that reads the
rank's own memory ~0.2 ms, one that also reads the shared sources ~0.4 ms.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..settings import Settings, SettingsError, current_settings
from ._allocator import unresolved_allocator
from ._cgroup import CgroupCensus
from ._quantity import Kind
from ._snapshot import CensusReader, CensusSnapshot
from ._table import ALLOCATOR_STATS, CENSUS, allocator_metric, gauge_flag_key

__all__ = ["add_census_to_step_log"]

# How often the step log reads the sources that are not the rank's own (the node, its memory
# cgroup, the host allocator): ~0.2 ms together after a step, too much for every step of a few
# milliseconds, and none of them is the step's own. Their age is in the record.
SHARED_REFRESH_S = 1.0
# How often it reads the rank's own memory (a take: /proc/self/status and the snapshot, ~0.2 ms
# after a step): for every step of 250 ms or more, and at most 0.1% of the training thread's
# time for shorter ones (every 50 ms, it was 0.4%: 1% of a 12 ms step with the rest).
OWN_REFRESH_S = 0.25
# (metric name, step-log key, the point of a row with many, age key), in table order.
_ROWS = tuple((m.name, m.step_log_key, m.step_log_point, m.step_log_age_key)
              for m in CENSUS if m.step_log_key)
_GAUGE_FLAGS = tuple((allocator_metric(stat, "current").name, gauge_flag_key(stat))
                     for stat in ALLOCATOR_STATS)


def _rows_of(reader: CensusReader) -> tuple:
    """The step-log rows this reader can fill (not the allocator's when it has none, ...)."""
    names = {m.name for m in reader.metrics}
    return tuple(row for row in _ROWS if row[0] in names)

# Told the step of every record on every rank (the exit record's `note_step`, set by
# yeto_otel.exits when this process keeps one): a store into memory, no system call.
_step_hook: Callable[[object], None] | None = None


def set_step_hook(hook: Callable[[object], None] | None) -> None:
    global _step_hook
    _step_hook = hook


_reader: CensusReader | None = None
_reader_settings: Settings | None = None  # the settings object it was last asked for
_reader_rows: tuple = _ROWS
_reader_choice: tuple[str, int] | None = None
_lock = threading.Lock()


def _sync_rank(rank: int | None, settings: Settings) -> int:
    if rank is not None:
        return rank
    torch = sys.modules.get("torch")  # never import torch for this
    if torch is not None:
        try:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                return dist.get_rank()
        except Exception:
            pass
    return settings.rank if settings.rank is not None else 0


def _census_reader(settings: Settings) -> tuple[CensusReader, tuple]:
    """The step log's reader for these settings, and its rows."""
    global _reader, _reader_rows, _reader_choice, _reader_settings
    reader = _reader
    if reader is not None and settings is _reader_settings:
        return reader, _reader_rows  # the process's own settings, call after call
    choice = (settings.host_allocator, settings.allocator_timeout_ms,
              settings.smaps_budget_percent)
    with _lock:
        if _reader is None or _reader_choice != choice:
            try:
                # The step log is rank 0's own record: its cgroup is read whether or not this
                # process is the one elected to export it.
                _reader = CensusReader.from_settings(settings, node_metrics=True,
                                                     cgroup_elected=False, wait=False,
                                                     shared_refresh_s=SHARED_REFRESH_S)
            except SettingsError as exc:
                # Under opentelemetry-instrument the distro refused this at start. A trainer
                # started without it keeps its step log: the rest of the census, with the
                # allocator skipped, counted and its reason logged once.
                _reader = CensusReader(allocator=unresolved_allocator(settings.host_allocator,
                                                                      exc), node_metrics=True,
                                       smaps_budget_percent=settings.smaps_budget_percent,
                                       cgroup=CgroupCensus(elected=False), wait=False,
                                       shared_refresh_s=SHARED_REFRESH_S)
            _reader_rows = _rows_of(_reader)
            _reader_choice = choice
        _reader_settings = settings
        return _reader, _reader_rows


def add_census_to_step_log(record: dict, *, rank: int | None = None,
                           settings: Settings | None = None) -> dict:
    """Add the census to `record` (in place, and returned) on sync rank 0 when enabled.

    `settings`: this process's settings when not given (YETO_DILOCO_HOST_MEM_CENSUS turns it
    on, YETO_OTEL_HOST_ALLOCATOR names the allocator); a bad value raises `SettingsError`.
    `rank`: the sync rank, else torch.distributed's rank, else RANK. A failing /proc read or
    allocator never raises: its fields are left out. That includes an allocator setting that
    cannot be resolved (a module that does not import, a name that is not a callable).

    It never waits on a source whose cost grows with the process or that it does not control:
    its cost is that of the small /proc and cgroup reads. Private_Dirty is read from
    smaps_rollup within YETO_OTEL_SMAPS_BUDGET (shared with the census's other readers) on the
    census's background thread when a read is due: the record carries the last value read and
    its age in seconds, none before the first read has finished. The allocator's fields are
    the answer of its last finished query (none before the first), and a new query is started
    on the query thread without waiting; one slower than YETO_OTEL_ALLOCATOR_TIMEOUT is
    abandoned and its fields are left out until it returns.
    """
    step_hook = _step_hook
    if step_hook is not None:  # on every rank: a rank that dies is reported at its step
        step_hook(record.get("step"))
    if settings is None:
        settings = current_settings()
    if not settings.step_log_census or _sync_rank(rank, settings) != 0:
        return record
    reader, rows = _census_reader(settings)
    now = time.monotonic_ns()
    last = _last
    if last is None or last.reader is not reader or now - last.taken_ns >= _OWN_REFRESH_NS:
        last = _refresh(reader, rows, now)
    record.update(last.fields)
    for age_key, read_ns in last.read_ns.items():
        # To the millisecond; integer arithmetic: round(x, 3) on a float is ~1 µs a key.
        record[age_key] = (now - read_ns + 500_000) // 1_000_000 / 1000
    return record


@dataclass(frozen=True)
class _Record:
    """The step-log keys of the reader's last take, and when each age group was read."""

    reader: CensusReader
    taken_ns: int  # monotonic
    fields: dict
    read_ns: dict  # age key -> the monotonic time its values were read


_OWN_REFRESH_NS = int(OWN_REFRESH_S * 1e9)
_last: _Record | None = None


def _refresh(reader: CensusReader, rows: tuple, now: int) -> _Record:
    global _last
    snapshot = reader.take()
    fields = _add_snapshot({}, snapshot, rows)
    read_ns = {}
    for name, key, _, age_key in rows:
        if age_key and key in fields:  # read now, unless the snapshot says how long before
            read_ns[age_key] = now - snapshot.ages_ns.get(name, 0)
    for age_key in read_ns:
        fields.pop(age_key, None)  # each record says its own age
    _last = _Record(reader, now, fields, read_ns)
    return _last


def _forget_after_fork() -> None:
    global _last
    _last = None  # a forked child's memory is not its parent's: read it afresh


os.register_at_fork(after_in_child=_forget_after_fork)


def _add_snapshot(record: dict, snapshot: CensusSnapshot, rows: tuple = _ROWS) -> dict:
    """The snapshot's step-log keys into `record`. (benchmarks/step_log_latency.py gives it a
    snapshot of a reader that waits, the step log's old way, as the anchor.)"""
    values, labelled, ages = snapshot.values, snapshot.labelled, snapshot.ages_ns
    for name, key, point, age_key in rows:
        # One point of a row with many (the cgroup's oom_kill count), or the row's value.
        quantity = labelled.get(name, {}).get(point) if point else values.get(name)
        if quantity is not None:
            record[key] = quantity.value
            age_ns = ages.get(name)
            if age_key and age_ns is not None:
                record[age_key] = round(age_ns / 1e9, 3)
    for name, flag_key in _GAUGE_FLAGS:
        current = values.get(name)
        if current is not None:
            record[flag_key] = current.kind is Kind.GAUGE
    return record
