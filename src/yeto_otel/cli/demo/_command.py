"""The `yeto-otel demo` command: its flags, and `run`, which goes through the island restart in
named steps (plan, telemetry, save, restarts, training steps, summary)."""

from __future__ import annotations

import argparse
import contextlib
import os
import time

from ...errors import UserFacingError
from ...settings import Settings, exports_locally, load_settings
from ...units import format_bytes
from ._anchors import (FP32_BYTES, FRAGMENTS, SyntheticAnchors, anchor_file_estimate,
                       fragments_behind, shard_sizes)
from ._plan import AnchorDirectory, Plan, make_plan
from ._progress import Progress
from ._restart import Restart, restart
from ._steps import RELEASE_EVERY, run_steps
from ._summary import build_summary, print_summary
from ._telemetry import (DEMO_DEFAULTS, set_demo_defaults, shutdown_telemetry, start_telemetry,
                         step_log_path)

__all__ = ["add_arguments", "run"]

DEFAULT_SIZE = "256MiB"
DEFAULT_SHARDS = 1869
DEFAULT_STEPS = 12
DEFAULT_STEP_SIZE = "48MiB"
DEFAULT_STEP_SECONDS = 0.25


def _epilog() -> str:
    defaults = "".join(f"    {name}={value}" + (f" ({why})" if why else "") + "\n"
                       for name, value, why in DEMO_DEFAULTS)
    return (
        "telemetry:\n"
        "  With no OTEL exporter/endpoint set, spans, the census and logs go to local OTLP JSON\n"
        "  files under YETO_OTEL_LOCAL_DIR (default ./yeto-telemetry); with\n"
        "  OTEL_EXPORTER_OTLP_ENDPOINT (etc.) set they are sent over OTLP, as for a trainer.\n"
        "  The step log always goes to <YETO_OTEL_LOCAL_DIR>/steplog-<rank>-<start>-<pid>.jsonl\n"
        "  (named like this process's traces-/metrics- files).\n"
        "  Unless you set them, the demo sets for itself:\n"
        f"{defaults}"
        "then: yeto-otel report <YETO_OTEL_LOCAL_DIR>")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Save synthetic per-rank resume anchors, restart from them (mapped), catch up the\n"
        "fragments the syncer moved past, run a few training-like steps, and summarise.")
    parser.epilog = _epilog()
    parser.add_argument("--size", default=DEFAULT_SIZE,
                        help="total anchor bytes of this rank, e.g. 64MiB, 1GiB "
                             f"(default {DEFAULT_SIZE}; the file is a little larger: each "
                             "shard starts on a page)")
    parser.add_argument("--shards", default=str(DEFAULT_SHARDS),
                        help=f"number of anchor tensors (default {DEFAULT_SHARDS:,})")
    parser.add_argument("--steps", default=str(DEFAULT_STEPS),
                        help=f"training-like steps after the restart (default {DEFAULT_STEPS})")
    parser.add_argument("--step-size", default=DEFAULT_STEP_SIZE,
                        help="memory each step allocates and touches; released every "
                             f"{RELEASE_EVERY} steps (default {DEFAULT_STEP_SIZE})")
    parser.add_argument("--step-seconds", default=str(DEFAULT_STEP_SECONDS),
                        help="simulated compute per step, so the census sees the sawtooth "
                             f"(default {DEFAULT_STEP_SECONDS}; 0 for none)")
    parser.add_argument("--dir", metavar="DIR",
                        help="where to write the anchor file (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the anchor file (default: removed at the end)")
    parser.add_argument("--compare-eager", action="store_true",
                        help="also restart with YETO_DILOCO_RESUME_ANCHOR_MMAP=0 (the whole file "
                             "read into memory) and show both side by side")
    parser.add_argument("--rank", help="this process's global rank (default: RANK, else 0)")
    parser.add_argument("--world-size", help="number of ranks (default: WORLD_SIZE)")
    parser.add_argument("--seed", default="0", help="seed of the synthetic anchors (default 0)")
    parser.add_argument("--json", action="store_true",
                        help="print the summary as one JSON object instead of text")


# ---------------------------------------------------------------------------------------------
# the steps of `run`


def _require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserFacingError("the demo needs torch: pip install 'yeto-otel[torch]'") from None


def _save(path: str, anchors: SyntheticAnchors, plan: Plan, progress: Progress) -> float:
    """Save the anchors as a trainer would before it dies; returns the seconds it took."""
    from ...anchors import save_resume_anchors

    progress(f"saving {plan.shards:,} FP32 anchors ({format_bytes(plan.size)}) to {path} ...")
    started = time.monotonic()
    save_resume_anchors(path, anchors)
    seconds = time.monotonic() - started
    progress(f"saved {format_bytes(os.path.getsize(path))} in {seconds:.2f} s")
    return seconds


def _restarts(path: str, anchors: SyntheticAnchors, behind: list[tuple[int, range]],
              plan: Plan, settings: Settings, progress: Progress) -> list[Restart]:
    """The restart as the trainer would do it (YETO_DILOCO_RESUME_ANCHOR_MMAP decides), then
    with --compare-eager the same restart reading the whole file, for the side-by-side."""
    from ...anchors import EAGER, MMAP

    behind_shards = sum(len(r) for _, r in behind)
    progress(f"restart: the syncer moved {len(behind)} of {FRAGMENTS} fragments "
             f"({behind_shards:,} shards, ids {behind[0][0]}-{behind[-1][0]}) past the anchors")
    mapped = settings.resume_anchor_mmap
    restarts = [restart(path, anchors, behind, progress, label="mapped restart",
                        mode=MMAP if mapped else EAGER,
                        why=f"YETO_DILOCO_RESUME_ANCHOR_MMAP={'1' if mapped else '0'}")]
    if plan.compare_eager:
        restarts.append(restart(path, anchors, behind, progress, label="eager restart",
                                mode=EAGER, why=f'mode="{EAGER}", as with '
                                                "YETO_DILOCO_RESUME_ANCHOR_MMAP=0"))
    return restarts


def _local_dir(settings: Settings) -> str:
    local_dir = os.path.abspath(os.path.expanduser(settings.local_dir))
    os.makedirs(local_dir, exist_ok=True)  # the step log goes here even when OTLP is sent
    return local_dir


def _clean_up(plan: Plan, path: str, directory: AnchorDirectory) -> None:
    if not plan.keep:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        directory.remove()


def _telemetry_is_local() -> bool:
    from ...otel import destination

    return exports_locally() or "local" in destination()


# ---------------------------------------------------------------------------------------------
# the command


def run(args: argparse.Namespace) -> int:
    plan = make_plan(args)  # bad flags: UserFacingError before anything is created
    set_demo_defaults(plan)  # before any setting is read, so they count
    settings = load_settings()  # a bad setting: SettingsError, one line, exit 2
    _require_torch()
    counts = shard_sizes(plan.size // FP32_BYTES, plan.shards, plan.seed)
    directory = AnchorDirectory.prepare(plan, anchor_file_estimate(counts))

    progress = Progress()
    where = start_telemetry(progress)
    local_dir = _local_dir(settings)
    step_log = step_log_path(local_dir)
    path = directory.anchor_path(settings.rank if settings.rank is not None else 0)
    anchors = SyntheticAnchors(counts, plan.seed)
    behind = fragments_behind(plan.shards, plan.seed)
    try:
        save_seconds = _save(path, anchors, plan, progress)
        restarts = _restarts(path, anchors, behind, plan, settings, progress)
        progress(f"training: {plan.steps} steps, step log -> {step_log}")
        steps = run_steps(plan, step_log, progress, settings)
    finally:
        # Flushed before the summary is printed, so what it says is already in the files or
        # at the collector; the anchors go even when a step failed.
        progress("flushing telemetry ...")
        shutdown_telemetry()
        _clean_up(plan, path, directory)

    print_summary(build_summary(
        plan, anchor_file=path, behind=behind, save_seconds=save_seconds, restarts=restarts,
        steps=steps, where=where, local_dir=local_dir, telemetry_local=_telemetry_is_local(),
        step_log=step_log), plan.json)
    return 0
