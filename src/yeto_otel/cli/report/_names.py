"""The names the report reads, taken from their tables (census rows, the span table, the
resource attributes) so that a renamed metric or span moves the page with it.

The report groups metrics by namespace ("every process metric", "every step-log level of the
node"), and the tables have no row for a namespace: the prefixes are derived here from the
rows that live in them.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.resources import HOST_NAME, SERVICE_INSTANCE_ID

from ... import names
from ...census import (ALLOCATOR_PREFIX, CENSUS, CENSUS_ERRORS, NODE_AVAILABLE, RSS,
                       STEP_LOG_ALLOCATOR_PREFIX, gauge_flag_key)
from ...otel import JOB_ATTRIBUTE, LOCAL_RANK_ATTRIBUTE, RANK_ATTRIBUTE, WORLD_SIZE_ATTRIBUTE

__all__ = ["ALLOCATOR_PREFIX", "CENSUS_PREFIX", "DEMO_SPAN_PREFIX", "FRAGMENT_EVENT",
           "HOST_NAME", "JOB_ATTRIBUTE", "LOAD_SPANS", "LOCAL_RANK_ATTRIBUTE", "NODE_PREFIX", "PROCESS_PREFIX",
           "RANK_ATTRIBUTE", "RESTART_SPAN", "SAVE_SPANS", "SERVICE_INSTANCE_ID", "SHORT_PREFIXES",
           "STEP_LOG_ALLOCATOR_PREFIX", "STEP_LOG_ALLOCATOR_PART", "STEP_LOG_NODE_PREFIX",
           "STEP_LOG_PREFIX", "TIMELINE_SPANS", "WORLD_SIZE_ATTRIBUTE", "YETO_PREFIX",
           "allocator_flag_key", "is_timeline_span", "namespace"]


def namespace(name: str, depth: int) -> str:
    """The first `depth` dotted parts of `name`, dot included:
    `namespace("yeto.process.memory.rss", 2) == "yeto.process."`."""
    return ".".join(name.split(".")[:depth]) + "."


# Metric namespaces, from one row that lives in each.
YETO_PREFIX = namespace(RSS.name, 1)  # "yeto."
PROCESS_PREFIX = namespace(RSS.name, 2)  # "yeto.process."
NODE_PREFIX = namespace(NODE_AVAILABLE.name, 2)  # "yeto.node."
CENSUS_PREFIX = namespace(CENSUS_ERRORS.name, 2)  # "yeto.census."

# What a chart legend leaves out of a metric name, longest first (the first that fits wins).
SHORT_PREFIXES = (namespace(RSS.name, 3), namespace(NODE_AVAILABLE.name, 3), ALLOCATOR_PREFIX,
                  YETO_PREFIX)

# Step-log key namespaces: "host_mem.", its node part "host_mem.node_" (the step-log keys of
# the node rows share it, they are not a dotted namespace), and the allocator's "host_alloc.".
STEP_LOG_PREFIX = namespace(RSS.step_log_key, 1)
STEP_LOG_NODE_PREFIX = os.path.commonprefix([m.step_log_key for m in CENSUS if m.node])
STEP_LOG_ALLOCATOR_PART = STEP_LOG_ALLOCATOR_PREFIX[len(STEP_LOG_PREFIX):]

_CURRENT = ".current"


def allocator_flag_key(key: str) -> str | None:
    """The step-log flag that says whether the allocator level `key` (a `<stat>.current`) is
    trusted as a gauge; None for any other key."""
    if key.startswith(STEP_LOG_ALLOCATOR_PREFIX) and key.endswith(_CURRENT):
        return gauge_flag_key(key[len(STEP_LOG_ALLOCATOR_PREFIX):-len(_CURRENT)])
    return None


# Spans: the restart window, the checkpoint loads and saves drawn beside it, the spans drawn
# on its time axis (the loads' and saves' own phases too), and the demo's own spans (any span
# of the demo's namespace is drawn too).
RESTART_SPAN = names.RESUME_ANCHORS.name
LOAD_SPANS = (names.SAFETENSORS_LOAD_FILE.name, names.SAFETENSORS_SAFE_OPEN.name,
              names.SAFETENSORS_LOAD.name, names.DCP_LOAD.name, names.TORCH_LOAD.name)
SAVE_SPANS = (names.DCP_SAVE.name, names.DCP_ASYNC_SAVE.name)
TIMELINE_SPANS = (RESTART_SPAN, names.RESUME_ANCHORS_LOAD.name, names.TORCH_LOAD.name,
                  *LOAD_SPANS[:-1], names.DCP_LOAD_PLAN.name, names.DCP_LOAD_READ.name,
                  names.DCP_SAVE.name, names.DCP_SAVE_PLAN.name, names.DCP_SAVE_WRITE.name,
                  names.DCP_ASYNC_SAVE.name, names.DCP_ASYNC_SAVE_UPLOAD.name)
DEMO_SPAN_PREFIX = namespace(names.DEMO_STEP.name, 1)  # "demo."
FRAGMENT_EVENT = names.FRAGMENT_DONE.name


def is_timeline_span(name: str) -> bool:
    return name in TIMELINE_SPANS or name.startswith(DEMO_SPAN_PREFIX)
