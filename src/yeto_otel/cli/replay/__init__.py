"""`yeto-otel replay DIR`: send the local telemetry files to a collector's OTLP/HTTP endpoint.

What the embedded default wrote (an air-gapped cluster, a run started before the collector
was up, a bug report) goes into the backend as if it had been exported live: every line of
`traces-`, `metrics-` and `logs-*.jsonl` is an OTLP JSON export batch the collector's OTLP/HTTP
receiver takes as it is, and the trainer's step log goes as log records (`_steplog`).

Inside: `_endpoint` resolves where each signal goes (OTEL_EXPORTER_OTLP_* and flags);
`_files` finds the files and their complete lines; `_ledger` records what was settled, so a
second run sends nothing twice and skips nothing; `_sender` posts one request with the retry
policy; `_replay_file` merges lines into requests and settles each answer; `_summary` shows
progress and the summary; `_command` ties them together. docs/replay.md is the user's guide.
"""

from ._command import add_arguments, run

__all__ = ["add_arguments", "run"]
