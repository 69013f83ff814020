"""The census: every metric's name, source, instrument, unit and meaning, in one table.

Names, instruments and units are interfaces (dashboards and alert rules use them). The
readers, the instruments, the step log and `docs/metrics.md` are all driven from here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._quantity import Kind

__all__ = [
    "ALLOCATOR_COUNTERS",
    "ALLOCATOR_FIELDS",
    "ALLOCATOR_KEYS",
    "ALLOCATOR_PREFIX",
    "ANONYMOUS",
    "CGROUP_ANON",
    "CGROUP_EVENTS",
    "CGROUP_FILE",
    "CGROUP_FILE_MAPPED",
    "CGROUP_HIGH",
    "CGROUP_INFO",
    "CGROUP_LIMIT",
    "CGROUP_PEAK",
    "CGROUP_PRESSURE",
    "CGROUP_SHMEM",
    "CGROUP_USAGE",
    "CGROUP_WORKING_SET",
    "NODE_ANON_PAGES",
    "NODE_AVAILABLE",
    "PRIVATE_DIRTY",
    "PROCESS_MEMORY_USAGE",
    "PROCESS_MEMORY_VIRTUAL",
    "RSS",
    "RSS_PEAK",
    "SMAPS_ROLLUP_AGE",
    "STEP_LOG_ALLOCATOR_PREFIX",
    "UPTIME",
    "allocator_metric",
    "gauge_flag_key",
    "ALLOCATOR_STATS",
    "CENSUS",
    "CENSUS_ERRORS",
    "ERROR_SOURCE_ATTRIBUTE",
    "CensusMetric",
    "Instrument",
    "Source",
    "metric",
]


class Instrument(enum.Enum):
    UP_DOWN_COUNTER = "ObservableUpDownCounter"
    GAUGE = "ObservableGauge"
    COUNTER = "ObservableCounter"


# What each kind of quantity is exported as: a level is additive across ranks (semantic
# conventions use UpDownCounter for memory usage), a peak or an age is not, a running total is
# a counter.
INSTRUMENT_FOR_KIND = {
    Kind.GAUGE: Instrument.UP_DOWN_COUNTER,
    Kind.HIGH_WATER_MARK: Instrument.GAUGE,
    Kind.AGE: Instrument.GAUGE,
    Kind.RUNNING_TOTAL: Instrument.COUNTER,
}


class Source(enum.Enum):
    STATUS = "/proc/self/status"
    SMAPS_ROLLUP = "/proc/self/smaps_rollup"
    MEMINFO = "/proc/meminfo"
    ALLOCATOR = "host allocator"
    CGROUP = "memory cgroup"

    @property
    def label(self) -> str:
        """The `source` attribute of `yeto.census.errors`."""
        return {"STATUS": "status", "SMAPS_ROLLUP": "smaps_rollup", "MEMINFO": "meminfo",
                "ALLOCATOR": "allocator", "CGROUP": "cgroup"}[self.name]


@dataclass(frozen=True)
class CensusMetric:
    name: str
    source: Source | None  # None: about the census itself
    field: str  # the key in the source: a /proc field name or a flat allocator stats key
    kind: Kind
    unit: str
    description: str
    step_log_key: str  # "" for a row the step log does not carry
    node: bool = False  # observed once per host, not once per rank
    semconv: bool = False  # an OpenTelemetry semantic-conventions name (a setting turns it off)
    # A row whose step-log value may come from an earlier read (within a CPU budget, or a
    # source the step log reads at most once a second): the step-log key of its age, seconds.
    step_log_age_key: str = ""
    # One point per value of this attribute (an event, a pressure level), not one point.
    attribute: str = ""
    # With `attribute`: the step log carries the point with this attribute value.
    step_log_point: str = ""
    # Not a field of its source: how old the source's last read is (a source read within a
    # budget), observed whenever that read's values are.
    sample_age: bool = False
    # Not a field of its source either: computed, as this says (observed with the source).
    derived: str = ""

    @property
    def instrument(self) -> Instrument:
        return INSTRUMENT_FOR_KIND[self.kind]


# The step log reads the rank's own memory at most every 50 ms and the sources that are not
# the rank's own (the node, its memory cgroup, the host allocator) at most once a second
# (census `_step_log`): the age of their values in it.
PROCESS_AGE_KEY = "host_mem.process_age_seconds"
NODE_AGE_KEY = "host_mem.node_age_seconds"
CGROUP_AGE_KEY = "host_mem.cgroup_age_seconds"
ALLOCATOR_AGE_KEY = "host_mem.host_alloc_age_seconds"

# The process and node rows by name, so code that needs one row (a chart, a dashboard
# panel, a demo line) takes it from here instead of spelling the metric name.
RSS = CensusMetric(
    "yeto.process.memory.rss", Source.STATUS, "VmRSS", Kind.GAUGE, "By",
    "Resident set size of this rank's process: anonymous, file-backed and shared pages now in "
    "RAM.", "host_mem.vm_rss_bytes", step_log_age_key=PROCESS_AGE_KEY)
RSS_PEAK = CensusMetric(
    "yeto.process.memory.rss_peak", Source.STATUS, "VmHWM", Kind.HIGH_WATER_MARK, "By",
    "Largest resident set size this process has had (high-water mark).",
    "host_mem.vm_hwm_bytes", step_log_age_key=PROCESS_AGE_KEY)
ANONYMOUS = CensusMetric(
    "yeto.process.memory.anonymous", Source.STATUS, "RssAnon", Kind.GAUGE, "By",
    "Anonymous pages resident in this process (heap, tensors read into memory, copy-on-write "
    "copies of mapped files; not shared anonymous memory, which the kernel counts as shmem). "
    "What a leak grows. The kernel's counter: fresh on every collection at any size.",
    "host_mem.anonymous_bytes", step_log_age_key=PROCESS_AGE_KEY)
PRIVATE_DIRTY = CensusMetric(
    "yeto.process.memory.private_dirty", Source.SMAPS_ROLLUP, "Private_Dirty", Kind.GAUGE, "By",
    "Pages only this process maps that it has written: memory that cannot be dropped or "
    "shared, only swapped. Its read walks every page of the process, so it is re-read only "
    "within YETO_OTEL_SMAPS_BUDGET and the last value is exported in between: it was read "
    "`yeto.process.memory.smaps_rollup.age` seconds before the collection (in the step log: "
    "`host_mem.private_dirty_age_seconds`).", "host_mem.private_dirty_bytes",
    step_log_age_key="host_mem.private_dirty_age_seconds")
SMAPS_ROLLUP_AGE = CensusMetric(
    "yeto.process.memory.smaps_rollup.age", Source.SMAPS_ROLLUP, "", Kind.AGE, "s",
    "How long before this collection the smaps_rollup values exported with it "
    "(`yeto.process.memory.private_dirty`) were read: they are re-read only within "
    "YETO_OTEL_SMAPS_BUDGET, so between reads this rises while the value stays the last one "
    "read, and falls at each new read. Observed whenever those values are. Subtract it from "
    "the collection's time to place a value at the time it was read.", "", sample_age=True)
NODE_AVAILABLE = CensusMetric(
    "yeto.node.memory.available", Source.MEMINFO, "MemAvailable", Kind.GAUGE, "By",
    "The kernel's estimate of memory available for new work without swapping (free plus "
    "reclaimable cache). Observed by one process per host.",
    "host_mem.node_mem_available_bytes", node=True, step_log_age_key=NODE_AGE_KEY)
NODE_ANON_PAGES = CensusMetric(
    "yeto.node.memory.anon_pages", Source.MEMINFO, "AnonPages", Kind.GAUGE, "By",
    "Anonymous pages mapped by all processes on the host: the node-wide signal for leak "
    "alerts. Observed by one process per host.", "host_mem.node_anon_pages_bytes", node=True,
    step_log_age_key=NODE_AGE_KEY)

# The OpenTelemetry semantic conventions' process memory metrics (release candidate), beside
# ours so stock dashboards and the collector's process scraper (which reads the same two kernel
# counters from /proc/<pid>/statm) line up with the census. Read in the same /proc/self/status
# read as ours. Not in the step log: it carries VmRSS already, and the names are OpenTelemetry's.
PROCESS_MEMORY_USAGE = CensusMetric(
    "process.memory.usage", Source.STATUS, "VmRSS", Kind.GAUGE, "By",
    "The amount of physical memory in use (OpenTelemetry semantic conventions): the resident "
    "set size, the same number as `yeto.process.memory.rss`.", "", semconv=True)
PROCESS_MEMORY_VIRTUAL = CensusMetric(
    "process.memory.virtual", Source.STATUS, "VmSize", Kind.GAUGE, "By",
    "The amount of committed virtual memory (OpenTelemetry semantic conventions): the size of "
    "every mapping of the process, touched or not (reserved address space included).", "",
    semconv=True)

UPTIME = CensusMetric(
    "yeto.process.uptime", Source.STATUS, "", Kind.AGE, "s",
    "How long this process has been running (the semantic conventions' `process.uptime`): "
    "seconds since its start (/proc/self/stat), on the boot clock. It falls only when a new "
    "process takes the rank's place, whatever its memory does: what marks a restart "
    "(`resets()` of it). Observed with /proc/self/status.", "",
    derived="the process's start (/proc/self/stat, read once), on the boot clock")

_PROCESS_AND_NODE = (RSS, RSS_PEAK, ANONYMOUS, PRIVATE_DIRTY, SMAPS_ROLLUP_AGE, UPTIME,
                     NODE_AVAILABLE, NODE_ANON_PAGES, PROCESS_MEMORY_USAGE,
                     PROCESS_MEMORY_VIRTUAL)

# The process's own memory cgroup (v2, or v1's memory hierarchy): the limit that really kills
# a rank, long before the node runs out. One process per cgroup observes these (the 8 ranks of
# a pod share one), chosen by an election that moves when it exits; `CGROUP_INFO` is reported
# by every process, so the cgroup's path is recorded once per process, not on every series.
_V1_V2 = "v2 `{v2}`, v1 `{v1}`."


def _cgroup(name: str, kind: Kind, unit: str, description: str, step_log_key: str = "",
            **extra) -> CensusMetric:
    age_key = CGROUP_AGE_KEY if step_log_key else ""
    return CensusMetric(f"yeto.cgroup.memory.{name}", Source.CGROUP, name, kind, unit,
                        description, step_log_key, step_log_age_key=age_key, **extra)


CGROUP_USAGE = _cgroup(
    "usage", Kind.GAUGE, "By", "Memory charged to this process's memory cgroup (anonymous, "
    "page cache it touched, kernel memory): what the limit is compared with. "
    + _V1_V2.format(v2="memory.current", v1="memory.usage_in_bytes"),
    "host_mem.cgroup_usage_bytes")
CGROUP_LIMIT = _cgroup(
    "limit", Kind.GAUGE, "By", "The cgroup's hard limit: usage that reaches it and cannot be "
    "reclaimed gets a process OOM-killed. Not exported when there is none. "
    + _V1_V2.format(v2="memory.max", v1="memory.limit_in_bytes"), "host_mem.cgroup_limit_bytes")
CGROUP_HIGH = _cgroup(
    "high", Kind.GAUGE, "By", "The cgroup's throttling limit: above it the kernel reclaims "
    "hard and slows the cgroup down. Not exported when there is none. v2 `memory.high` only.")
CGROUP_PEAK = _cgroup(
    "peak", Kind.HIGH_WATER_MARK, "By", "The highest usage the cgroup has had. "
    + _V1_V2.format(v2="memory.peak", v1="memory.max_usage_in_bytes"))
CGROUP_ANON = _cgroup(
    "anon", Kind.GAUGE, "By", "Anonymous memory in the cgroup (its processes' heaps, tensors, "
    "copy-on-write copies): cannot be reclaimed without swap. "
    + _V1_V2.format(v2="memory.stat anon", v1="memory.stat total_rss"),
    "host_mem.cgroup_anon_bytes")
CGROUP_FILE = _cgroup(
    "file", Kind.GAUGE, "By", "Page cache charged to the cgroup (files its processes read, "
    "wrote or mapped, shmem included). "
    + _V1_V2.format(v2="memory.stat file", v1="memory.stat total_cache"),
    "host_mem.cgroup_file_bytes")
CGROUP_SHMEM = _cgroup(
    "shmem", Kind.GAUGE, "By", "Shared memory (tmpfs, /dev/shm, shared anonymous mappings) "
    "charged to the cgroup; part of `file`, and not reclaimable without swap. "
    + _V1_V2.format(v2="memory.stat shmem", v1="memory.stat total_shmem"))
CGROUP_FILE_MAPPED = _cgroup(
    "file_mapped", Kind.GAUGE, "By", "Page cache that is mapped into the cgroup's processes "
    "(mapped anchors among it). "
    + _V1_V2.format(v2="memory.stat file_mapped", v1="memory.stat total_mapped_file"))
CGROUP_WORKING_SET = _cgroup(
    "working_set", Kind.GAUGE, "By", "Usage minus inactive page cache, as kubelet computes it to "
    "decide evictions (never below 0). "
    + _V1_V2.format(v2="memory.current - memory.stat inactive_file",
                    v1="memory.usage_in_bytes - memory.stat total_inactive_file"))
CGROUP_EVENTS = _cgroup(
    "events", Kind.RUNNING_TOTAL, "{event}", "Memory events of the cgroup since it was made, "
    "one series per `event`: v2 `memory.events` low, high, max, oom, oom_kill, oom_group_kill; "
    "v1 `oom_kill` from memory.oom_control and `max` from memory.failcnt (times usage hit the "
    "limit). `oom_kill`: processes of the cgroup the kernel killed for memory.",
    "host_mem.cgroup_oom_kills", attribute="event", step_log_point="oom_kill")
CGROUP_PRESSURE = _cgroup(
    "pressure", Kind.RUNNING_TOTAL, "s", "Time the cgroup's tasks stalled waiting for memory "
    "(pressure stall information), one series per `level`: `some` (at least one task stalled), "
    "`full` (all stalled at once). v2 `memory.pressure` `total` only.", attribute="level")
CGROUP_INFO = _cgroup(
    "info", Kind.GAUGE, "{cgroup}", "1, with the attribute `yeto.cgroup.path`: the memory cgroup "
    "this process is in, as /proc/self/cgroup shows it (relative to the process's cgroup "
    "namespace: `/` inside a container with one). Reported by every process that can read its "
    "cgroup, elected or not, so summed by path it counts the ranks in each cgroup; the other "
    "`yeto.cgroup.memory.*` series carry no path, so a new cgroup (a restarted Slurm step) "
    "starts no new series but this one.", attribute="yeto.cgroup.path")

_CGROUP = (CGROUP_USAGE, CGROUP_LIMIT, CGROUP_HIGH, CGROUP_PEAK, CGROUP_ANON, CGROUP_FILE,
           CGROUP_SHMEM, CGROUP_FILE_MAPPED, CGROUP_WORKING_SET, CGROUP_EVENTS, CGROUP_PRESSURE,
           CGROUP_INFO)

ALLOCATOR_PREFIX = "yeto.host_allocator."
STEP_LOG_ALLOCATOR_PREFIX = "host_mem.host_alloc."

ALLOCATOR_STATS = {
    # stat -> (unit, what one unit is)
    "allocations": ("{allocation}", "host allocations (blocks) the allocator holds"),
    "allocated_bytes": ("By", "bytes the allocator holds from the OS (pinned)"),
    "active_requests": ("{request}", "allocation requests in use by tensors"),
    "active_bytes": ("By", "bytes in use by tensors"),
}

_ALLOCATOR_FIELDS = {
    # field -> (kind, how it is described)
    "current": (Kind.GAUGE, "now. Exported only once `{stat}.freed` has been seen to move in "
                "this process; until then it equals `{stat}.allocated` and is exported as that."),
    "peak": (Kind.HIGH_WATER_MARK, "at their highest (resettable high-water mark)."),
    "allocated": (Kind.RUNNING_TOTAL, "ever counted as allocated (running total)."),
    "freed": (Kind.RUNNING_TOTAL, "ever counted as freed (running total)."),
}

ALLOCATOR_FIELDS = tuple(_ALLOCATOR_FIELDS)  # ("current", "peak", "allocated", "freed")

ALLOCATOR_COUNTERS = {
    "num_host_alloc": "Calls the allocator made to the OS to obtain pinned host memory.",
    "num_host_free": "Calls the allocator made to the OS to return pinned host memory.",
}


def _allocator_metrics() -> tuple[CensusMetric, ...]:
    rows = []
    for stat, (unit, what) in ALLOCATOR_STATS.items():
        for field, (kind, when) in _ALLOCATOR_FIELDS.items():
            rows.append(CensusMetric(
                f"{ALLOCATOR_PREFIX}{stat}.{field}", Source.ALLOCATOR, f"{stat}.{field}", kind,
                unit, f"Accelerator host allocator: {what}, {when.format(stat=stat)}",
                f"{STEP_LOG_ALLOCATOR_PREFIX}{stat}.{field}",
                step_log_age_key=ALLOCATOR_AGE_KEY))
    for counter, description in ALLOCATOR_COUNTERS.items():
        rows.append(CensusMetric(
            f"{ALLOCATOR_PREFIX}{counter}", Source.ALLOCATOR, counter, Kind.RUNNING_TOTAL,
            "{call}", f"Accelerator host allocator: {description}",
            f"{STEP_LOG_ALLOCATOR_PREFIX}{counter}", step_log_age_key=ALLOCATOR_AGE_KEY))
    return tuple(rows)


CENSUS: tuple[CensusMetric, ...] = _PROCESS_AND_NODE + _allocator_metrics() + _CGROUP

# Every key of the allocator's flat stats dict that the census reads.
ALLOCATOR_KEYS = tuple(m.field for m in CENSUS if m.source is Source.ALLOCATOR)

# The one attribute of `yeto.census.errors` points: which source failed.
ERROR_SOURCE_ATTRIBUTE = "source"

CENSUS_ERRORS = CensusMetric(
    "yeto.census.errors", None, "", Kind.RUNNING_TOTAL, "{error}",
    "Census reads that failed and were skipped for one collection, by `source` (status, "
    "smaps_rollup, meminfo, allocator, cgroup; a process with no memory cgroup to read counts "
    "that once). Each source's first failure is also logged once.",
    "")

_BY_NAME = {row.name: row for row in CENSUS}


def metric(name: str) -> CensusMetric:
    return _BY_NAME[name]


def allocator_metric(stat: str, field: str | None = None) -> CensusMetric:
    """The row of one allocator stat's field (`allocator_metric("active_bytes", "current")`),
    or of one call counter (`allocator_metric("num_host_alloc")`)."""
    return _BY_NAME[f"{ALLOCATOR_PREFIX}{stat}.{field}" if field else f"{ALLOCATOR_PREFIX}{stat}"]


def gauge_flag_key(stat: str) -> str:
    """The step-log key that says whether `stat`'s `.current` is trusted as a gauge."""
    return f"{STEP_LOG_ALLOCATOR_PREFIX}{stat}.current_is_gauge"
