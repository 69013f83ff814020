"""Every name the dashboards query or show, and the PromQL built from them.

None of them is spelled here when a table defines it: metric names are the Prometheus names of
the census and resume rows (`prometheus_name_of`), label names are attribute names translated by
the collector's rule (`prometheus_label`), span and attribute names come from the span table,
and recording-rule names are built from a metric's Prometheus name by the rule files' one
pattern (`recording_rule`). Every rule and alert named here is looked up in the rule files
(collector/alerts/*.yml) when this module loads, so a rename on either side stops the generator
instead of leaving a panel empty.
"""

from __future__ import annotations

import re
from pathlib import Path

from opentelemetry.sdk.resources import HOST_NAME, SERVICE_NAME

from yeto_otel.census import (CGROUP_ANON, CGROUP_EVENTS, CGROUP_INFO, CGROUP_PRESSURE,
                              ERROR_SOURCE_ATTRIBUTE, CensusMetric)
from yeto_otel.names import (LOAD_MODE_ATTRIBUTE, ResumeMetric, prometheus_label,
                             prometheus_name, prometheus_name_of)
from yeto_otel.otel import JOB_ATTRIBUTE, RANK_ATTRIBUTE, ROLE_ATTRIBUTE, WORKER_ID_ATTRIBUTE, Role

RULE_DIR = Path(__file__).resolve().parents[1] / "alerts"

# --- Attributes and their labels -------------------------------------------------------------

# Resource attributes: a rank sets host.name, yeto.rank and yeto.process.role (yeto_otel.otel),
# a DataLoader worker its rank's and yeto.dataloader.worker_id, service.name is the trainer's
# own, the agent inserts yeto.cluster (collector/agent.yaml, so spelled here).
HOST_NAME_ATTRIBUTE = HOST_NAME
JOB_ATTRIBUTE_NAME = JOB_ATTRIBUTE
SERVICE_NAME_ATTRIBUTE = SERVICE_NAME
CLUSTER_ATTRIBUTE = "yeto.cluster"

HOST = prometheus_label(HOST_NAME_ATTRIBUTE)
JOB_ID = prometheus_label(JOB_ATTRIBUTE)  # the launch's job (Slurm job, chosen run id), if known
RANK = prometheus_label(RANK_ATTRIBUTE)
ROLE = prometheus_label(ROLE_ATTRIBUTE)
WORKER_ID = prometheus_label(WORKER_ID_ATTRIBUTE)
CLUSTER = prometheus_label(CLUSTER_ATTRIBUTE)
SOURCE = prometheus_label(ERROR_SOURCE_ATTRIBUTE)
LOAD_MODE = prometheus_label(LOAD_MODE_ATTRIBUTE)
# The cgroup rows' point attributes: the memory event, the pressure level, the cgroup's path.
EVENT = prometheus_label(CGROUP_EVENTS.attribute)
LEVEL = prometheus_label(CGROUP_PRESSURE.attribute)
CGROUP_PATH = prometheus_label(CGROUP_INFO.attribute)
# Prometheus' own labels: `instance` is service.instance.id (<job>/rank-<RANK> in a known job,
# else <host>/rank-<RANK>, stable across restarts; .../rank-<RANK>[/loader-<L>]/worker-<K> for a
# DataLoader worker, <host>/pid-<pid> for a plain process), `job` is
# [service.namespace/]service.name.
INSTANCE = "instance"
JOB = "job"


def legend(label: str) -> str:
    """A Grafana legend (or annotation text) placeholder for a label's value."""
    return "{{%s}}" % label


def span_attribute(name: str) -> str:
    """A span attribute in TraceQL."""
    return f"span.{name}"


def resource_attribute(name: str) -> str:
    """A resource attribute in TraceQL."""
    return f"resource.{name}"


# --- Recording rules and alerts (collector/alerts/*.yml) ---------------------------------------


def _rule_names(kind: str) -> set[str]:
    """Names of the `record:` or `alert:` rules in the rule files. Read line by line (each rule
    starts `- record: <name>` / `- alert: <name>`), so the generator needs no YAML library;
    tests/collector/test_metric_names.py reads the same files as YAML."""
    pattern = re.compile(rf"^\s*-\s*{kind}:\s*(\S+)\s*$", re.MULTILINE)
    return {name for path in sorted(RULE_DIR.glob("*.yml"))
            for name in pattern.findall(path.read_text(encoding="utf-8"))}


_RECORDED = _rule_names("record")
_ALERTS = _rule_names("alert")


def defined_rule(name: str) -> str:
    """`name`, once it is known to be a recording rule of the rule files."""
    if name not in _RECORDED:
        raise LookupError(f"{name} is no recording rule in {RULE_DIR}/*.yml; "
                          "the dashboards read it")
    return name


def alert(name: str) -> str:
    """`name`, once it is known to be an alert of the rule files."""
    if name not in _ALERTS:
        raise LookupError(f"{name} is no alert in {RULE_DIR}/*.yml; the dashboards name it")
    return name


# The rule files' naming (Prometheus' level:metric:operations): a node gauge (reported by one
# rank per host) is aggregated to the host, a rank's gauge is kept per instance.
FLOOR = "min20m"  # the floor: the lowest value over 20 minutes
FLOOR_RISE = "floor_rise20m"  # the floor now minus the floor 20 minutes ago
SECONDS_TO_EXHAUSTION = "seconds_to_exhaustion"  # when the floor reaches zero at its trend


def recording_rule(row: CensusMetric, operation: str) -> str:
    """The recording rule that applies `operation` to the census metric `row`."""
    level = HOST if row.node else INSTANCE
    return defined_rule(f"{level}:{prometheus_name_of(row)}:{operation}")


FLOOR_RISE_THRESHOLD = defined_rule("yeto:floor_rise_threshold:bytes")
EXHAUSTION_HORIZON = defined_rule("yeto:exhaustion_horizon:seconds")
CGROUP_HEADROOM_THRESHOLD = defined_rule("yeto:cgroup_headroom_threshold:ratio")
CGROUP_PRESSURE_THRESHOLD = defined_rule("yeto:cgroup_pressure_threshold:ratio")

# The memory cgroup's rules: per observing rank (`instance`), or per cgroup as Prometheus can
# name it (host, and the job: its service `job` and the launch's `yeto_job_id`; level
# `host_name_job`). Their quantity is a cgroup metric's Prometheus
# name, or the derived non-reclaimable memory (anon + shmem) beside the cgroup rows.
CGROUP_LEVEL = f"{HOST}_{JOB}"
_UNRECLAIMABLE = CGROUP_ANON.name.rsplit(".", 1)[0] + ".unreclaimable"
UNRECLAIMABLE_BYTES = prometheus_name(_UNRECLAIMABLE, CGROUP_ANON.unit, monotonic_counter=False)
UNRECLAIMABLE_RATIO = prometheus_name(_UNRECLAIMABLE, "", monotonic_counter=False)
# A running total's rate drops `_total`: seconds stalled per second.
PRESSURE_SECONDS = prometheus_name(CGROUP_PRESSURE.name, CGROUP_PRESSURE.unit,
                                   monotonic_counter=False)
# The kernel's words for the values the cgroup panels select (memory.events, memory.pressure).
OOM_KILL = "oom_kill"
FULL_STALL = "full"


def cgroup_rule(level: str, quantity: str | CensusMetric, operation: str) -> str:
    """A cgroup recording rule of the rule files, at `level` (INSTANCE or CGROUP_LEVEL)."""
    name = quantity if isinstance(quantity, str) else prometheus_name_of(quantity)
    return defined_rule(f"{level}:{name}:{operation}")


# --- PromQL ----------------------------------------------------------------------------------

Metric = CensusMetric | ResumeMetric | str  # a row of the tables, or a recording rule


def metric_name(metric: Metric) -> str:
    """The Prometheus name of a table row; a recording rule's name as it is."""
    return metric if isinstance(metric, str) else prometheus_name_of(metric)


def _matchers(*labels_and_variables: tuple[str, str]) -> str:
    return ", ".join(f'{label}=~"${variable}"' for label, variable in labels_and_variables)


# Which processes a panel reads. A DataLoader worker carries its rank's yeto_rank, and a forked
# worker's RSS and anonymous memory count pages it still shares with its rank: it must never be
# read as the rank, nor summed with it. Rank panels take every process but workers: ranks,
# plain processes and series written before the role label existed (`!=` matches a missing
# label); worker panels take workers only. Node series come from ranks only.
WORKER_ROLE = Role.DATALOADER_WORKER.value
NOT_A_WORKER = f'{ROLE}!="{WORKER_ROLE}"'
WORKERS_ONLY = f'{ROLE}="{WORKER_ROLE}"'

# Template-variable selectors. Rank series carry every label; node series come from local rank
# 0 of each host only, so they are selected (and aggregated) by host, never by rank. A worker
# is selected by its rank's variables.
# The Job variable selects by the launch's job id; `=~".*"` (All) also matches series without
# one (a job yeto-otel could not name).
NODE_SELECTOR = _matchers((CLUSTER, "cluster"), (HOST, "host"))
JOB_SELECTOR = ", ".join((NODE_SELECTOR, _matchers((JOB_ID, "job_id"))))
RANK_SELECTOR = ", ".join((JOB_SELECTOR, _matchers((RANK, "rank")), NOT_A_WORKER))
WORKER_SELECTOR = ", ".join((JOB_SELECTOR, _matchers((RANK, "rank")), WORKERS_ONLY))
RANK_LEGEND = legend(INSTANCE)  # <host>/rank-<RANK>: names host and rank, stable across restarts
NODE_LEGEND = legend(HOST)
# rank R / worker K, and the instance: a rank's second loader reuses the worker ids K, and only
# its instance (.../loader-<L>/worker-<K>) tells the two apart.
WORKER_LEGEND = f"rank {legend(RANK)} / worker {legend(WORKER_ID)} ({legend(INSTANCE)})"


# A cgroup's series come from whichever rank observes it (one at a time; another takes over
# when it exits), so they are selected by host and job, never by rank, and drawn per observer:
# a takeover ends one line and starts another under the new rank's instance. The cgroup rules'
# series are selected with JOB_SELECTOR.
CGROUP_SELECTOR = ", ".join((JOB_SELECTOR, NOT_A_WORKER))
CGROUP = f"{CLUSTER}, {HOST}, {JOB}, {JOB_ID}"  # the cgroup, as Prometheus can name it
CGROUP_NAME_LEGEND = f"{legend(HOST)} {legend(JOB)} {legend(JOB_ID)}"
CGROUP_LEGEND = f"{CGROUP_NAME_LEGEND} (reported by {legend(INSTANCE)})"


def cgroup_series(metric: Metric) -> str:
    return f"max by ({CGROUP}, {INSTANCE}) ({metric_name(metric)}{{{CGROUP_SELECTOR}}})"


def rank_series(metric: Metric) -> str:
    return f"{metric_name(metric)}{{{RANK_SELECTOR}}}"


def worker_series(metric: Metric) -> str:
    return f"{metric_name(metric)}{{{WORKER_SELECTOR}}}"


def host_series(metric: Metric) -> str:
    return f"{metric_name(metric)}{{{NODE_SELECTOR}}}"


def node_gauge(metric: Metric) -> str:
    # Node gauges come from one rank per host at a time: drop its rank labels (the same series
    # goes on across that rank's restarts, as the recording rules see it).
    return f"max by ({CLUSTER}, {HOST}) ({host_series(metric)})"


def rate(metric: Metric, selector: str = RANK_SELECTOR) -> str:
    return f"rate({metric_name(metric)}{{{selector}}}[$__rate_interval])"


def net_rate(allocated: Metric, freed: Metric) -> str:
    """Allocated minus freed per second, of two running totals."""
    return f"{rate(allocated)}\n- {rate(freed)}"
