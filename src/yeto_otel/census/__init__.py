"""The host-memory census: one table of metrics, typed quantities, the readers that take a
snapshot of every source once per collection, the observable instruments built on it, the
step-log record and the host-cache release policy.

Data flows one way: /proc files and the allocator's stats -> `CensusReader.take()` (one
`CensusSnapshot` of `Quantity` values) -> `CensusInstruments` (one observable instrument per
table row) -> the SDK. The same snapshot feeds `add_census_to_step_log` and
`HostCacheReleasePolicy`.
"""

from ._allocator import AllocatorSource, GaugeEvidence, read_allocator_stats, resolve_allocator
from ._fault_ledger import FaultLedger
from ._host_cache import HostCacheReleasePolicy, ReleaseDecision
from ._instruments import INTERNAL_ERROR_SOURCE, CensusInstruments
from ._quantity import Kind, Quantity
from ._snapshot import CensusReader, CensusSnapshot
from ._step_log import add_census_to_step_log
from ._table import (
    ALLOCATOR_COUNTERS,
    ALLOCATOR_FIELDS,
    ALLOCATOR_KEYS,
    ALLOCATOR_PREFIX,
    ALLOCATOR_STATS,
    ANONYMOUS,
    CENSUS,
    CENSUS_ERRORS,
    ERROR_SOURCE_ATTRIBUTE,
    NODE_ANON_PAGES,
    NODE_AVAILABLE,
    PRIVATE_DIRTY,
    RSS,
    RSS_PEAK,
    STEP_LOG_ALLOCATOR_PREFIX,
    CensusMetric,
    Instrument,
    Source,
    allocator_metric,
    gauge_flag_key,
    metric,
)

__all__ = [
    "ALLOCATOR_COUNTERS",
    "ALLOCATOR_FIELDS",
    "ALLOCATOR_KEYS",
    "ALLOCATOR_PREFIX",
    "ALLOCATOR_STATS",
    "ANONYMOUS",
    "CENSUS",
    "CENSUS_ERRORS",
    "ERROR_SOURCE_ATTRIBUTE",
    "INTERNAL_ERROR_SOURCE",
    "NODE_ANON_PAGES",
    "NODE_AVAILABLE",
    "PRIVATE_DIRTY",
    "RSS",
    "RSS_PEAK",
    "STEP_LOG_ALLOCATOR_PREFIX",
    "AllocatorSource",
    "CensusInstruments",
    "CensusMetric",
    "CensusReader",
    "CensusSnapshot",
    "FaultLedger",
    "GaugeEvidence",
    "HostCacheReleasePolicy",
    "Instrument",
    "Kind",
    "Quantity",
    "ReleaseDecision",
    "Source",
    "add_census_to_step_log",
    "allocator_metric",
    "gauge_flag_key",
    "metric",
    "read_allocator_stats",
    "resolve_allocator",
]
