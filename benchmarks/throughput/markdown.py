"""The report: Markdown tables of every phase and headroom step (as docs/performance.md
records them)."""

from __future__ import annotations


def _f(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"machine: nproc {m['nproc']}, {m['cpu']}, {m['mem_gib']} GiB, kernel {m['kernel']}, "
             f"Python {m['python']}, opentelemetry-sdk {m['opentelemetry-sdk']}, grpcio "
             f"{m['grpcio']}, yeto-otel {m['yeto-otel']}; loadavg at start {report['loadavg_start']}"
             f", at end {report['loadavg_end']}", ""]
    lines.insert(1, f"agent config: {report['agent_config']}")
    lines += _phases_table(report["phases"])
    h = report.get("headroom")
    if h:
        lines += _points_table(h)
        if h["span_steps"]:
            lines += _spans_table(h)
        lines += ["", f"Headroom totals: {h['exported']['points']:,} points and "
                  f"{h['exported']['spans']:,} spans exported by the ranks; Prometheus "
                  f"{h['prometheus']['samples']:,} samples; Jaeger received "
                  f"{h['jaeger']['received']:,} spans, stored {h['jaeger']['stored']:,}; "
                  "failures: " + ("none" if not h["failures"] else "; ".join(h["failures"]))]
    return "\n".join(lines)


def _phases_table(phases: list[dict]) -> list[str]:
    idle = next((r["agent_cpu_pct"] for r in phases if r["ranks"] == 0), None)
    lines = ["| phase | ranks (hosts) | census every | window s | points/s accepted | "
             "restart spans | agent CPU % of one core (above idle) | "
             "agent VmRSS MiB mean / max | VmHWM MiB | Go heap max MiB | load generators CPU % | "
             "backends CPU % | machine busy % (of 200) | drops | Prometheus samples = points "
             "exported | Jaeger: restart traces |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in phases:
        if r["ranks"] == 0:
            ok, prom, jaeger, spans = "0", "-", "-", "-"
        else:
            ok = "0" if not r["failures"] else "**SEE FAILURES**"
            prom = f"{r['prometheus']['samples']:,} = {r['exported']['points']:,}"
            jaeger = f"{r['jaeger'].get('traces', '-')} of {r['ranks']}"
            spans = f"{r['exported']['spans']}"
        cpu = _f(r["agent_cpu_pct"], 2)
        if idle is not None and r["ranks"]:
            cpu += f" ({r['agent_cpu_pct'] - idle:+.2f})"
        lines.append(
            f"| {r['name']} | {r['ranks']} ({r['hosts']}) | "
            f"{_f(r['interval_s'], 0) + ' s' if r['interval_s'] else '-'} | {_f(r['seconds'])} | "
            f"{_f(r['points_per_s'])} | {spans} | {cpu} | {_f(r['rss_mean_mib'])} / "
            f"{_f(r['rss_max_mib'])} | {_f(r['vmhwm_mib'])} | {_f(r['heap_max_mib'])} | "
            f"{_f(r['loadgen_cpu_pct'], 0)} | {_f(r['backends_cpu_pct'], 0)} | "
            f"{_f(r['machine_busy_pct'], 0)} | {ok} | {prom} | {jaeger} |")
    return lines


def _points_table(h: dict) -> list[str]:
    lines = ["", f"Headroom, points: {h['ranks']} ranks on {h['hosts']} simulated hosts, "
             "shorter census intervals (fresh SDK providers for each step):", "",
             "| step | points/s scheduled | points/s accepted | kept schedule | "
             "agent CPU % of one core | agent CPU ms per 1000 points | agent VmRSS MiB max | "
             "VmHWM MiB | Go heap max MiB | load generators CPU % | backends CPU % | "
             "machine busy % (of 200) |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in h["steps"]:
        lines.append(
            f"| {s['name']} | {_f(s['scheduled_points_per_s'], 0)} | {_f(s['points_per_s'], 0)}"
            f" | {'yes' if s['kept_schedule'] else 'no'} | {_f(s['agent_cpu_pct'], 1)} | "
            f"{_f(s['agent_cpu_ms_per_1000_points'], 0)} | {_f(s['rss_max_mib'])} | "
            f"{_f(s['vmhwm_mib'])} | {_f(s['heap_max_mib'])} | {_f(s['loadgen_cpu_pct'], 0)} | "
            f"{_f(s['backends_cpu_pct'], 0)} | {_f(s['machine_busy_pct'], 0)} |")
    return lines


def _spans_table(h: dict) -> list[str]:
    shape = h["shape"]
    lines = ["", f"Headroom, spans: restarts replayed at a steady pace over the same "
             f"ranks (one restart = 2 spans + {len(shape['events'])} events, "
             f"{shape['otlp_bytes_per_restart']:,.0f} B of OTLP protobuf), census every "
             "10 s meanwhile. Received/s: spans the agent accepted until every rank had "
             "flushed, over that time; through/s: spans created over the time until the "
             "agent had sent every one on (Jaeger acknowledged it). The CPU and memory "
             "columns cover that whole window:", "",
             "| step | spans/s created | kept schedule | spans accepted | "
             "spans/s received by the agent | all sent on after s | spans/s through | "
             "agent CPU % of one core | "
             "agent CPU ms per 1000 spans | agent VmRSS MiB max | VmHWM MiB | "
             "Go heap max MiB | load generators CPU % | backends CPU % | "
             "machine busy % (of 200) | agent drop counters |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in h["span_steps"]:
        dropped = ", ".join(f"{k} {v:,.0f}" for k, v in s["dropped"].items()) or "0"
        lines.append(
            f"| {s['name']} | {_f(s['created_spans_per_s'], 0)} | "
            f"{'yes' if s['kept_schedule'] else 'no'} | {s['spans']:,} | "
            f"{_f(s['received_spans_per_s'], 0)} | {_f(s['through_s'], 1)} | "
            f"{_f(s['through_spans_per_s'], 0)} | "
            f"{_f(s['agent_cpu_pct'], 1)} | {_f(s['agent_cpu_ms_per_1000_spans'], 0)} | "
            f"{_f(s['rss_max_mib'])} | {_f(s['vmhwm_mib'])} | {_f(s['heap_max_mib'])} | "
            f"{_f(s['loadgen_cpu_pct'], 0)} | {_f(s['backends_cpu_pct'], 0)} | "
            f"{_f(s['machine_busy_pct'], 0)} | {dropped} |")
    return lines
