"""YetoRankOOMKilled: deaths reported as series of yeto_rank_exit_info (one per death, at 1):
an OOM kill reported by the rank's next launch fires for 15 minutes, a second death of the same
rank fires again, other causes never fire, a process without a rank is named by its pid."""

from __future__ import annotations

from promtool_format import Alerts, Case, Series
from scenario_kit import CLUSTER, RANK_ROLE, process_labels, rank_labels

EXITS = "yeto_rank_exit_info"
SERVICE = "trainer"


def exit_series(reporter: dict[str, str], cause: str, phase: str, rank: str, step: str,
                pid: int, start: int, end: int | None = None, job: str = "slurm-41") -> Series:
    """A death as its reporter exports it: 1 from minute `start` (the report) to `end`."""
    labels = dict(reporter, cause=cause, phase=phase, yeto_exit_rank=rank,
                  yeto_exit_job_id=job, yeto_exit_service_name=SERVICE, yeto_exit_step=step,
                  yeto_exit_process_pid=str(pid))
    return Series(EXITS, {k: v for k, v in labels.items() if v != ""},
                  lambda t: 1 if t >= start and (end is None or t < end) else None)


def oom_alert(host: str, rank: str, phase: str, step: str, pid: int, job: str = "slurm-41"):
    who = f"Rank {rank}" if rank else f"Process {pid}"
    at = f" at step {step}" if step else ""
    labels = {"host_name": host, "phase": phase, "severity": "critical",
              "yeto_cluster": CLUSTER, "yeto_exit_job_id": job,
              "yeto_exit_process_pid": str(pid), "yeto_exit_service_name": SERVICE}
    labels.update({k: v for k, v in (("yeto_exit_rank", rank), ("yeto_exit_step", step)) if v})
    dead = f"rank {rank}" if rank else "a process without a rank"
    return (labels, {
        "summary": f"{who} of job {job} on {host} was OOM-killed in {phase}{at}",
        "description": (f"The kernel OOM-killed {dead} (pid {pid}, service {SERVICE}, job "
                        f"{job}) on host {host} (cluster {CLUSTER}) while it was in {phase}"
                        f"{', at step ' + step if step else ''}. Its span yeto.rank.exit holds "
                        "its memory and its cgroup's usage and limit at its last collection."),
        "runbook_url": "docs/alerts.md#yetorankoomkilled"})


def _reported_by_the_next_launch() -> Case:
    # Rank 3 of slurm-41 (node-a) is OOM-killed in a DCP save at step 4812; its next launch
    # (the same instance, a new pid) reports it at minute 30 and runs on. At 90 it is killed
    # again, in a step, and its third launch reports that. Rank 4 dies of an unknown cause at 60.
    next_launch = rank_labels("node-a", 3, 3, RANK_ROLE, "slurm-41")
    first = oom_alert("node-a", "3", "dcp.save.write", "4812", 1201)
    second = oom_alert("node-a", "3", "step", "5230", 1377)
    return Case(
        "an OOM kill fires for 15 minutes from its report, a second one fires again, an "
        "unknown death never", 150,
        [exit_series(next_launch, "oom_kill", "dcp.save.write", "3", "4812", 1201, 30, 90),
         exit_series(next_launch, "oom_kill", "step", "3", "5230", 1377, 92),
         exit_series(rank_labels("node-a", 4, 4, RANK_ROLE, "slurm-41"), "unknown", "step",
                     "4", "4990", 1202, 60)],
        "YetoRankOOMKilled",
        [Alerts(29), Alerts(30, [first]), Alerts(44, [first]), Alerts(45), Alerts(60),
         Alerts(91), Alerts(92, [second]), Alerts(106, [second]), Alerts(107), Alerts(150)])


def _seen_by_the_host() -> Case:
    # The host's elected process (rank 8 of node-b, another job's) reports two deaths of job
    # slurm-41 in one look: rank 10 OOM-killed in a mapped restart before any step, and a
    # plain process (pid 2001, no rank) OOM-killed at start. An exit_code death beside them.
    observer = rank_labels("node-b", 8, 0, RANK_ROLE, "slurm-52")
    rank10 = oom_alert("node-b", "10", "yeto.resume.anchors", "", 3001)
    plain = oom_alert("node-b", "", "start", "", 2001)
    return Case(
        "deaths the host's elected process sees, of another job: each OOM kill fires with the "
        "dead process's own job, rank or pid", 60,
        [exit_series(observer, "oom_kill", "yeto.resume.anchors", "10", "", 3001, 20),
         exit_series(observer, "oom_kill", "start", "", "", 2001, 20),
         exit_series(observer, "exit_code", "step", "9", "77", 3002, 20),
         exit_series(process_labels("node-b", 4000), "signal", "step", "", "", 4001, 20)],
        "YetoRankOOMKilled",
        [Alerts(19), Alerts(20, [plain, rank10]), Alerts(34, [plain, rank10]), Alerts(35),
         Alerts(60)])


def exit_cases() -> list[Case]:
    return [_reported_by_the_next_launch(), _seen_by_the_host()]
