"""`yeto-otel demo`: a realistic island restart in one command.

1. save synthetic per-rank resume anchors (FP32, --shards shards of varied sizes summing to
   --size) with `save_resume_anchors`;
2. restart: `load_resume_anchors` (mapped), catch up the fragments the syncer moved past
   (1/8 of the shards) with `global_new + (local - anchor_old)`, one `fragment_done` each;
3. run --steps training-like steps that hold and release memory in a sawtooth, each in a
   `demo.step` span, each writing one step-log record with the host-memory census;
4. flush the telemetry and print a summary read from the `yeto.resume.anchors` span.

Telemetry goes where `opentelemetry-instrument` with yeto's distro would send it: local
OTLP JSON files by default, a collector when OTEL_EXPORTER_OTLP_ENDPOINT (etc.) is set.

Modules: `_plan` (flags -> Plan, room checks), `_anchors` (the synthetic anchors),
`_restart` (one restart), `_steps` (the training-like steps), `_telemetry` (defaults, set-up,
flush), `_summary` (the summary), `_command` (the flags and `run`).
"""

from ._command import add_arguments, run
from ._plan import parse_size

__all__ = ["add_arguments", "parse_size", "run"]
