"""Rank exits on both dashboards: the deaths reported (one series per death, at 1, and the
reporters' counts by cause and phase: docs/metrics.md) and an annotation that marks each death,
named by rank, cause, phase and step (docs/faults.md, "When a rank dies")."""

from __future__ import annotations

from yeto_otel.names import (EXIT_INFO, EXIT_JOB, EXIT_STEP, EXITS_CAUSE_ATTRIBUTE,
                             EXITS_RANK_ATTRIBUTE,
                             EXITS_COUNTER, EXITS_COUNTER_UNIT, EXITS_PHASE_ATTRIBUTE,
                             RANK_EXIT, prometheus_label, prometheus_name)

from dashboard_kit import PROMETHEUS, Layout, dashboard, prom, series
from dashboard_names import CLUSTER, HOST, NOT_A_WORKER, alert, legend

EXITS = prometheus_name(EXITS_COUNTER, EXITS_COUNTER_UNIT, monotonic_counter=True)
DEATHS = prometheus_name(EXIT_INFO, EXITS_COUNTER_UNIT, monotonic_counter=False)
CAUSE, PHASE = prometheus_label(EXITS_CAUSE_ATTRIBUTE), prometheus_label(EXITS_PHASE_ATTRIBUTE)
DEAD_RANK = prometheus_label(EXITS_RANK_ATTRIBUTE)
DEAD_JOB, DEAD_STEP = (prometheus_label(a.name) for a in (EXIT_JOB, EXIT_STEP))
OOM_ALERT = alert("YetoRankOOMKilled")
# A death is the dead process's: selected by its job (the Job variable) and host, never by the
# reporter's own rank or job (the reporter may be another job's process on the host).
DEATHS_SELECTOR = (f'{CLUSTER}=~"$cluster", {HOST}=~"$host", {DEAD_JOB}=~"$job_id", '
                   f"{NOT_A_WORKER}")
# The counts are the reporters': by host, whichever job the reporter runs.
COUNTS_SELECTOR = f'{CLUSTER}=~"$cluster", {HOST}=~"$host", {NOT_A_WORKER}'
DEATH = f"{CLUSTER}, {HOST}, {DEAD_JOB}, {DEAD_RANK}, {CAUSE}, {PHASE}, {DEAD_STEP}"
DEATH_TEXT = (f"rank {legend(DEAD_RANK)} {legend(CAUSE)} in {legend(PHASE)} at step "
              f"{legend(DEAD_STEP)} ({legend(HOST)} {legend(DEAD_JOB)})")


def exits_row(layout: Layout) -> None:
    layout.row("Rank exits")
    layout.add(series(
        "Rank exits (one line per death)",
        f"{DEATHS}: each death of a rank or plain process that did not exit through the "
        f"interpreter, reported once by its next launch or the host's elected process with a "
        f"`{RANK_EXIT.name}` span: its cause (`oom_kill` only from evidence: {OOM_ALERT}), the "
        "phase it was in (the innermost yeto span open, `step` or `start`) and its last step. "
        "A line starts when the death is reported and lasts while its reporter runs.",
        "short", [prom("A", f"max by ({DEATH}) ({DEATHS}{{{DEATHS_SELECTOR}}})", DEATH_TEXT)],
        min_zero=True), w=16, h=6)
    layout.add(series(
        "Rank exits reported, by cause and phase",
        f"increase({EXITS}): the deaths the host's processes reported in each interval, by "
        "cause and phase (a reporter's first death of a kind counts from its next collection).",
        "short", [prom("A", f"sum by ({CLUSTER}, {HOST}, {CAUSE}, {PHASE}) (increase("
                            f"{EXITS}{{{COUNTS_SELECTOR}}}[$__rate_interval]))",
                       f"{legend(CAUSE)} in {legend(PHASE)} ({legend(HOST)})")],
        min_zero=True), w=8, h=6)


def rank_exits_annotation() -> dashboard.AnnotationQuery:
    # A death's series appears at its report: mark the moment it appears.
    expr = (f"max by ({DEATH}) ({DEATHS}{{{DEATHS_SELECTOR}}} "
            f"unless {DEATHS}{{{DEATHS_SELECTOR}}} offset 5m)")
    return (dashboard.AnnotationQuery().name("Rank exits").datasource(PROMETHEUS)
            .enable(True).hide(False).icon_color("purple").expr(expr).step("60s")
            .title_format("Rank exit").text_format(DEATH_TEXT)
            .tag_keys(f"{CLUSTER},{HOST},{CAUSE},{PHASE}")
            .placement(None))
