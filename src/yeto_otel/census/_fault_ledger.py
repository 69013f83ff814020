"""Counts census failures per source and logs each source's first one.

The census must never raise into the trainer or the SDK's callback path, and must not
fill the log once per collection either: a failure is counted (exported as
`yeto.census.errors`) and the first one per source (and per kind, where a caller tells kinds
apart) is logged with its reason.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

from ._table import CENSUS_ERRORS

__all__ = ["FaultLedger"]

_log = logging.getLogger("yeto_otel.census")


class FaultLedger:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def record(self, source: str, reason: str, *, kind: str = "") -> None:
        """Count a failure of `source`; log it when it is the first of its `kind` there (a slow
        allocator is logged even after a junk value was, and the other way round)."""
        with self._lock:
            self._counts[source] += 1
            first = (source, kind) not in self._logged
            self._logged.add((source, kind))
        if first:
            _log.warning("host-memory census: skipping %s for this collection: %s "
                         "(counted in %s; further failures of %s%s are not logged)",
                         source, reason, CENSUS_ERRORS.name, source,
                         f" of this kind ({kind})" if kind else "")

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
