"""The demo's summary: one dict (printed as JSON with --json) and its text form. The restart
numbers are the `yeto.resume.anchors` span's own attributes, so the summary and the traces
never disagree."""

from __future__ import annotations

import json
import shlex
import sys

from ... import names
from ...census import RSS
from ...units import format_bytes
from ._anchors import FRAGMENTS
from ._plan import Plan
from ._restart import Restart

__all__ = ["build_summary", "next_command", "print_summary", "text_summary"]

# The census's per-process metrics, as a backend query would match them: `yeto.process.memory.*`.
_PROCESS_MEMORY_METRICS = RSS.name.rpartition(".")[0] + ".*"


def build_summary(plan: Plan, *, anchor_file: str, behind: list[tuple[int, range]],
                  save_seconds: float, restarts: list[Restart], steps: dict, where: str,
                  local_dir: str, telemetry_local: bool, step_log: str) -> dict:
    """The summary `--json` prints; the text form is made from it, so the two cannot drift."""
    return {
        "anchor_file": anchor_file,
        "anchor_file_kept": plan.keep,
        "size": plan.size,
        "shards": plan.shards,
        "fragments": FRAGMENTS,
        "fragments_behind": [f for f, _ in behind],
        "shards_behind": sum(len(r) for _, r in behind),
        "save_seconds": round(save_seconds, 6),
        "restart": restarts[0].as_dict(),
        "eager_restart": restarts[1].as_dict() if len(restarts) > 1 else None,
        **steps,
        "telemetry": where,
        "local_dir": local_dir,
        "telemetry_local": telemetry_local,
        "step_log": step_log,
        "next": next_command(local_dir),
    }


def print_summary(summary: dict, as_json: bool) -> None:
    print(json.dumps(summary, indent=2) if as_json else text_summary(summary))
    sys.stdout.flush()


def next_command(local_dir: str) -> str:
    return f"yeto-otel report {shlex.quote(local_dir)}"


def _pct(part, whole) -> str:
    return f"{100 * part / whole:.1f}%" if part is not None and whole else "?"


def _size_or_q(n) -> str:
    return format_bytes(n) if n is not None else "?"


def _restart_lines(s: dict) -> list[str]:
    r = s["restart"]
    span = names.RESUME_ANCHORS.name
    return [
        "",
        "yeto-otel demo: island restart",
        f"  anchors         {s['shards']:,} FP32 shards, {format_bytes(s['size'])} "
        f"(file {format_bytes(r['file_size'])}: each shard starts on a page)",
        f"  anchor file     {s['anchor_file']}" + ("" if s["anchor_file_kept"] else " (removed)"),
        f"  catch-up        {len(s['fragments_behind'])} of {s['fragments']} fragments "
        f"({s['shards_behind']:,} shards, 1/8) moved past by the syncer",
        f"  load mode       {r['load_mode']}",
        f"  bytes mapped    {_size_or_q(r['bytes_mapped'])} "
        f"({_pct(r['bytes_mapped'], r['file_size'])} of the file)",
        f"  bytes touched   {_size_or_q(r['bytes_touched'])} "
        f"({_pct(r['bytes_touched'], r['file_size'])} of the file)",
        f"  anonymous delta {_size_or_q(r['anonymous_delta'])}",
        f"  restart time    {r['restart_seconds']:.3f} s (load + catch-up, the {span} span)",
    ]


def _comparison_lines(mapped: dict, eager: dict) -> list[str]:
    """The two restarts side by side, columns aligned (mode left, numbers right)."""
    rows = [("mode", "restart s", "anonymous delta", "bytes mapped", "bytes touched")]
    for x in (mapped, eager):
        rows.append((x["load_mode"], f"{x['restart_seconds']:.3f}",
                     _size_or_q(x["anonymous_delta"]), _size_or_q(x["bytes_mapped"]),
                     _size_or_q(x["bytes_touched"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["", "  mapped vs eager (YETO_DILOCO_RESUME_ANCHOR_MMAP=0):"]
    for n, row in enumerate(rows):
        lines.append("    " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                       for i, (cell, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("    " + "  ".join("-" * w for w in widths))
    return lines


def _steps_lines(s: dict) -> list[str]:
    return [
        "",
        f"  steps           {s['steps']}, each holding {format_bytes(s['step_bytes'])} more, "
        f"released every {s['release_every']} (peak {format_bytes(s['peak_held_bytes'])})",
        f"  step memory     {s['step_memory']}"
        + ("" if s["pinned"] else " only (no CUDA here, so no pinned host memory)"),
    ]


def _next_lines(s: dict) -> list[str]:
    if s["telemetry_local"]:
        return [f"next: {s['next']}"]
    return [f"next: find the {names.RESUME_ANCHORS.name} span (trace "
            f"{s['restart']['trace_id']}) and the {_PROCESS_MEMORY_METRICS} metrics in your "
            f"backend; the step log is local: {s['next']}"]


def text_summary(s: dict) -> str:
    lines = _restart_lines(s)
    if s["eager_restart"] is not None:
        lines += _comparison_lines(s["restart"], s["eager_restart"])
    if "steps" in s:
        lines += _steps_lines(s)
    lines += [
        f"  telemetry       {s['telemetry']}",
        f"  step log        {s['step_log']}",
        "",
    ]
    return "\n".join(lines + _next_lines(s))
