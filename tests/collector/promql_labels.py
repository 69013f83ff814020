"""Labels in the PromQL, legends and alert templates of the dashboards and rules: which labels
exist (resource attribute labels come from the attribute constants through `prometheus_label`),
the process role a selector states, and readers of selectors, groupings and templates."""

from __future__ import annotations

import re

from opentelemetry.sdk.resources import HOST_NAME

from yeto_otel.census import CENSUS, ERROR_SOURCE_ATTRIBUTE
from yeto_otel.names import (EXIT_JOB, EXIT_PID, EXIT_SERVICE, EXIT_STEP,
                             EXITS_CAUSE_ATTRIBUTE, EXITS_PHASE_ATTRIBUTE, EXITS_RANK_ATTRIBUTE, LOAD_MODE_ATTRIBUTE,
                             prometheus_label)
from yeto_otel.otel import (JOB_ATTRIBUTE, LOCAL_RANK_ATTRIBUTE, RANK_ATTRIBUTE, ROLE_ATTRIBUTE,
                            WORKER_ID_ATTRIBUTE, WORLD_SIZE_ATTRIBUTE, Role)

ROLE = prometheus_label(ROLE_ATTRIBUTE)
WORKER_ID = prometheus_label(WORKER_ID_ATTRIBUTE)
WORKER = Role.DATALOADER_WORKER.value
NOT_A_WORKER = ("!=", WORKER)  # ranks, plain processes, and series older than the role label
WORKERS_ONLY = ("=", WORKER)
# Resource attributes the agent inserts or keeps (collector/agent.yaml), and Prometheus' own.
AGENT_ATTRIBUTES = ("yeto.cluster", "deployment.environment.name")
PROMETHEUS_LABELS = {"instance", "job", "le"}
# Point attributes of the census rows that carry one (`event`, `level`, the cgroup's path).
CENSUS_ATTRIBUTES = tuple(row.attribute for row in CENSUS if row.attribute)
# The exits counter's attributes: its own and the dead process's (yeto_otel.names).
EXIT_ATTRIBUTES = (EXITS_CAUSE_ATTRIBUTE, EXITS_PHASE_ATTRIBUTE, EXITS_RANK_ATTRIBUTE, *(
    attr.name for attr in (EXIT_JOB, EXIT_SERVICE, EXIT_STEP, EXIT_PID)))
KNOWN_LABELS = PROMETHEUS_LABELS | {prometheus_label(attribute) for attribute in (
    HOST_NAME, RANK_ATTRIBUTE, LOCAL_RANK_ATTRIBUTE, WORLD_SIZE_ATTRIBUTE, JOB_ATTRIBUTE, ROLE_ATTRIBUTE,
    WORKER_ID_ATTRIBUTE, ERROR_SOURCE_ATTRIBUTE, LOAD_MODE_ATTRIBUTE, *AGENT_ATTRIBUTES,
    *CENSUS_ATTRIBUTES, *EXIT_ATTRIBUTES)}

_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)",
                       re.IGNORECASE)


def matchers(selector: str) -> list[tuple[str, str, str]]:
    """(label, operator, value) of each matcher in a `{...}` selector's text."""
    return _MATCHER.findall(selector)


def label_names(expr: str) -> set[str]:
    """Labels an expression selects by (`{a="x"}`) or groups by (`by (a, b)`, `on (a)`...)."""
    found = {label for block in re.findall(r"\{([^{}]*)\}", expr)
             for label, _, _ in matchers(block)}
    for group in _GROUPING.findall(expr):
        found |= set(re.findall(r"[A-Za-z_]\w*", group))
    return found


def printed_labels(template: str) -> set[str]:
    """Labels a Grafana legend prints (`{{label}}`), or an alert template (`$labels.label`,
    where `{{ end }}` and the like are template actions, not labels)."""
    if "$labels" in template:
        return set(re.findall(r"\$labels\.([A-Za-z_]\w*)", template))
    return set(re.findall(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}", template))


def metric_selectors(expr: str, metric: str) -> list[str | None]:
    """The `{...}` text after each occurrence of `metric` in `expr` (None: a bare name)."""
    pattern = re.compile(rf"(?<![\w:]){re.escape(metric)}(?![\w:])\s*(\{{[^{{}}]*\}})?")
    return [match.group(1) for match in pattern.finditer(expr)]
