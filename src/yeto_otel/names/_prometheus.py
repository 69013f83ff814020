"""The names the product's metrics get in Prometheus.

Dashboards and alert rules query Prometheus, where the collector's remote-write exporter has
translated every OpenTelemetry name (the OpenTelemetry-to-Prometheus compatibility rules, as the
collector v0.165 applies them with suffixes on and UTF-8 off):

- the name is split into tokens at every character that is not a letter, digit or ``:``
  (dots and underscores alike) and re-joined with ``_``;
- the unit's Prometheus word (``By`` -> ``bytes``, ``s`` -> ``seconds``, ...) is appended
  unless it is already one of the tokens; annotation units such as ``{error}`` add nothing;
- monotonic sums (counters) end in ``_total``; gauges with unit ``1`` end in ``_ratio``;
- attribute keys become label names (``prometheus_label``): every character that is not a
  letter, digit or ``_`` becomes ``_`` (``yeto.rank`` -> ``yeto_rank``).

So ``yeto.process.memory.rss`` (By) is ``yeto_process_memory_rss_bytes`` and
``yeto.census.errors`` (counter) is ``yeto_census_errors_total``. The e2e suite checks these
names against what a real collector writes into a real Prometheus.
"""

from __future__ import annotations

import re

from ..census import CENSUS, CENSUS_ERRORS, CensusMetric, Instrument
from ._exit_names import EXIT_INFO, EXITS_COUNTER, EXITS_COUNTER_UNIT
from ._resume_metrics import RESUME_METRICS, ResumeMetric

__all__ = ["prometheus_name", "prometheus_name_of", "prometheus_label", "exit_metric_names",
           "exported_metric_names"]

# The subset of the compatibility spec's unit table that OpenTelemetry units of this kind use.
_UNIT_WORDS = {
    "By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes",
    "s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds",
    "min": "minutes", "h": "hours", "d": "days", "%": "percent",
}
_PER_UNIT_WORDS = {"s": "second", "min": "minute", "h": "hour", "d": "day"}
_TOKEN_SEPARATOR = re.compile(r"[^a-zA-Z0-9:]+")
_LABEL_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def _unit_word(unit: str, table: dict[str, str]) -> str:
    if not unit or "{" in unit or "}" in unit:
        return ""  # annotations such as {error} are not units
    word = table.get(unit, unit)
    return "_".join(t for t in _TOKEN_SEPARATOR.split(word) if t)


def prometheus_name(otel_name: str, unit: str, *, monotonic_counter: bool) -> str:
    """The Prometheus name of an OpenTelemetry metric (see the module docstring)."""
    tokens = [t for t in _TOKEN_SEPARATOR.split(otel_name) if t]
    main, _, per = unit.partition("/")
    main_word = "" if main == "1" else _unit_word(main, _UNIT_WORDS)
    per_word = _unit_word(per, _PER_UNIT_WORDS)
    if main_word and main_word not in tokens:
        tokens.append(main_word)
    if per_word:
        tokens += ["per", per_word]
    if monotonic_counter:
        tokens = [t for t in tokens if t != "total"] + ["total"]
    elif unit == "1":
        tokens = [t for t in tokens if t != "ratio"] + ["ratio"]
    name = "_".join(tokens)
    return "_" + name if name[:1].isdigit() else name


def prometheus_name_of(row: CensusMetric | ResumeMetric) -> str:
    """The Prometheus name of one row of the census or resume metric tables."""
    return prometheus_name(row.name, row.unit,
                           monotonic_counter=row.instrument is Instrument.COUNTER)


def prometheus_label(attribute_name: str) -> str:
    """The Prometheus label of an OpenTelemetry attribute (resource or point): every character
    that is not a letter, digit or ``_`` becomes ``_``, and a leading digit gets ``key_``
    (``host.name`` -> ``host_name``, ``yeto.anchors.load_mode`` -> ``yeto_anchors_load_mode``)."""
    label = _LABEL_INVALID.sub("_", attribute_name)
    return "key_" + label if label[:1].isdigit() else label


def exit_metric_names() -> dict[str, str]:
    """Prometheus name -> OpenTelemetry name of the metrics a process exports only once it has
    reported a death (docs/faults.md, "When a rank dies")."""
    return {prometheus_name(EXITS_COUNTER, EXITS_COUNTER_UNIT, monotonic_counter=True):
            EXITS_COUNTER,
            prometheus_name(EXIT_INFO, EXITS_COUNTER_UNIT, monotonic_counter=False): EXIT_INFO}


def exported_metric_names() -> dict[str, str]:
    """Prometheus name -> OpenTelemetry name, for every metric yeto-otel exports."""
    names = {prometheus_name_of(row): row.name
             for row in (*CENSUS, CENSUS_ERRORS, *RESUME_METRICS)}
    names.update(exit_metric_names())
    return names
