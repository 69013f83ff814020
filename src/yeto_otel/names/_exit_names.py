"""The span and the counter a rank's death is reported with (`yeto_otel.exits`), and their
attributes: part of the product's interface, like the census names."""

from __future__ import annotations

from ._span_spec import Attr, SpanSpec

__all__ = [
    "EXITS_RANK_ATTRIBUTE",
    "EXIT_INFO",
    "EXITS_CAUSE_ATTRIBUTE",
    "EXITS_COUNTER",
    "EXITS_COUNTER_UNIT",
    "EXITS_PHASE_ATTRIBUTE",
    "EXIT_ANONYMOUS",
    "EXIT_CAUSE",
    "EXIT_CGROUP_LIMIT",
    "EXIT_CGROUP_USAGE",
    "EXIT_CODE",
    "EXIT_INSTANCE",
    "EXIT_JOB",
    "EXIT_OBSERVER",
    "EXIT_PHASE",
    "EXIT_PID",
    "EXIT_RANK",
    "EXIT_RECORD_AGE",
    "EXIT_RSS",
    "EXIT_SERVICE",
    "EXIT_SIGNAL",
    "EXIT_STEP",
    "EXIT_WHY",
    "RANK_EXIT",
]

EXIT_RANK = Attr("yeto.rank", "int",
                 "The rank that died (absent for a process without one). A span attribute: the "
                 "span's resource is its reporter's, with a `yeto.rank` of its own (in TraceQL "
                 "`span.yeto.rank` against `resource.yeto.rank`).")
EXIT_INSTANCE = Attr("yeto.exit.service.instance.id", "string",
                     "The dead process's `service.instance.id`.")
EXIT_PID = Attr("yeto.exit.process.pid", "int", "The dead process's pid.")
EXIT_JOB = Attr("yeto.exit.job.id", "string", "The dead process's job (`yeto.job.id`).")
EXIT_SERVICE = Attr("yeto.exit.service.name", "string", "The dead process's `service.name`.")
EXIT_CAUSE = Attr("yeto.exit.cause", "string",
                  "`oom_kill`, `signal`, `exit_code` or `unknown`, decided from evidence "
                  "(docs/faults.md, \"When a rank dies\").")
EXIT_WHY = Attr("yeto.exit.evidence", "string", "The evidence for the cause, in words.")
EXIT_SIGNAL = Attr("yeto.exit.signal", "string",
                   "The signal that ended it (`SIGKILL`), where an exit status or an OOM kill "
                   "says so.")
EXIT_CODE = Attr("yeto.exit.code", "int", "Its exit code, where known.")
EXIT_PHASE = Attr("yeto.exit.phase", "string",
                  "What it was doing: the innermost yeto span open (`yeto.resume.anchors`, "
                  "`torch.load`, `dcp.save`, ...), `step` between spans once a step was "
                  "logged, `start` before the first step.")
EXIT_STEP = Attr("yeto.exit.step", "int",
                 "The last step it logged (`add_census_to_step_log`, `note_step`).")
EXIT_ANONYMOUS = Attr("yeto.exit.memory.anonymous", "int (bytes)",
                      "Its anonymous memory at its last collection (RssAnon).")
EXIT_RSS = Attr("yeto.exit.memory.rss", "int (bytes)",
                "Its resident memory at its last collection (VmRSS).")
EXIT_CGROUP_USAGE = Attr("yeto.exit.cgroup.memory.usage", "int (bytes)",
                         "Its memory cgroup's usage at its last collection.")
EXIT_CGROUP_LIMIT = Attr("yeto.exit.cgroup.memory.limit", "int (bytes)",
                         "Its memory cgroup's limit (absent when unlimited).")
EXIT_RECORD_AGE = Attr("yeto.exit.record_age_s", "double",
                       "Seconds from its record's last update to the moment its death was "
                       "seen (the span's length).")
EXIT_OBSERVER = Attr("yeto.exit.observer", "string",
                     "Who reported it: `node` (the host's elected process), `next_launch` (the "
                     "same rank started again) or `self` (its own uncaught exception).")

RANK_EXIT = SpanSpec(
    "yeto.rank.exit",
    "A reporting process (a rank, a plain process) that ended without exiting through the "
    "interpreter, or with an uncaught exception. Emitted once per death by whoever saw it "
    "first (`yeto.exit.observer`), under that process's own identity; it runs from the dead "
    "process's last record to the moment its death was seen. Status ERROR.",
    (EXIT_RANK, EXIT_INSTANCE, EXIT_PID, EXIT_JOB, EXIT_SERVICE, EXIT_CAUSE, EXIT_WHY, EXIT_SIGNAL, EXIT_CODE,
     EXIT_PHASE, EXIT_STEP, EXIT_ANONYMOUS, EXIT_RSS, EXIT_CGROUP_USAGE, EXIT_CGROUP_LIMIT,
     EXIT_RECORD_AGE, EXIT_OBSERVER))

# The counter: deaths a process reported, by cause and phase. And one series per death, at 1,
# with who died where (the dead process's rank, job, service, step and pid), which alerts read:
# a new series whoever reported it and however often its reporter restarted.
EXITS_COUNTER = "yeto.rank.exits"
EXITS_COUNTER_UNIT = "{exit}"
EXIT_INFO = "yeto.rank.exit.info"
EXITS_CAUSE_ATTRIBUTE = "cause"
EXITS_PHASE_ATTRIBUTE = "phase"
# The dead rank on the metrics: not `yeto.rank`, which Prometheus already has as a label (the
# reporter's resource attribute) on the same series.
EXITS_RANK_ATTRIBUTE = "yeto.exit.rank"
