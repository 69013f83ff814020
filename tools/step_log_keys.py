"""The step-log keys section of docs/metrics.md (`python -m tools.reference`), from the census
table: each key, the values it carries the age of, and the allocator's gauge flags."""

from __future__ import annotations

import os

from yeto_otel.census import ALLOCATOR_STATS, CENSUS, gauge_flag_key

__all__ = ["step_log_section"]


def _key_list(keys: list[str]) -> str:
    """A few keys by name; many (the allocator's) by their common prefix."""
    if len(keys) <= 5:
        return ", ".join(keys)
    return f"every {os.path.commonprefix(keys)}*` key"


def step_log_section() -> str:
    """The step-log keys."""
    step_keys = "\n".join(
        f"| `{m.step_log_key}` | `{m.name}`"
        + (f" (the point `{m.attribute}={m.step_log_point}`)" if m.step_log_point else "") + " |"
        for m in CENSUS if m.step_log_key)
    read_by_age_key: dict[str, list[str]] = {}
    for m in CENSUS:
        if m.step_log_age_key:
            read_by_age_key.setdefault(m.step_log_age_key, []).append(f"`{m.step_log_key}`")
    ages = "\n".join(f"| `{key}` | seconds since {_key_list(keys)} "
                     f"{'were' if 1 < len(keys) <= 5 else 'was'} read |"
                     for key, keys in read_by_age_key.items())
    flags = "\n".join(f"| `{gauge_flag_key(stat)}` | true once `{stat}.freed` has moved |"
                      for stat in ALLOCATOR_STATS)
    return f"""## Step-log keys

`yeto_otel.add_census_to_step_log(record)` with `YETO_DILOCO_HOST_MEM_CENSUS=1` adds these keys
on sync rank 0 (values in the metric's unit; a source that failed is left out). It takes the
latest values and never waits on the training thread: the /proc and cgroup files it reads cost
the same at any size; a smaps_rollup read that is due runs on a background thread of the
process, and the allocator's keys are the answer of its last finished query (a new one starts
without waiting). So the first records of a process may lack the private-dirty and allocator
keys, until the first read and query have finished. A step can take a few milliseconds, so
the step log reads within a time budget: the rank's own memory (`/proc/self/status`) at most
every 250 ms (for every step of 250 ms or more), the node's, the memory cgroup's and the
allocator's values (eight files and a query) at most once a second; in between a record carries
the last values read, with their age. Right after a training step, whose work has flushed the
CPU's caches, a record whose reads are not due costs ~25 µs (a dict update), one that reads the
rank's own memory ~0.2 ms and one that reads everything ~0.4 ms (docs/performance.md, "What
switching it on costs a training step"):

| key | value of |
|---|---|
{step_keys}

Each group of values carries its age beside it (seconds, to the millisecond): the
record's value was read that long before the record was made. `yeto-otel report` draws such a
value once per read, at the step it was read:

| key | value |
|---|---|
{ages}

For each allocator stat the record also says whether its `.current` is trusted as a gauge:

| key | value |
|---|---|
{flags}
"""
