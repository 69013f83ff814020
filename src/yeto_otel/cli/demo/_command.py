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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ... import names as span_table
from ...errors import UserFacingError
from ...units import format_bytes

__all__ = ["add_arguments", "parse_size", "run"]

DEFAULT_SIZE = "256MiB"
DEFAULT_SHARDS = 1869
DEFAULT_STEPS = 12
DEFAULT_STEP_SIZE = "48MiB"
DEFAULT_STEP_SECONDS = 0.25
DEFAULT_METRIC_INTERVAL_MS = "1000"
FRAGMENTS = 32  # the model's shards are synced in 32 fragments ...
FRAGMENTS_BEHIND = 4  # ... and the syncer moved 4 of them (1/8 of the shards) past the anchors
RELEASE_EVERY = 4  # the sawtooth: memory held for 4 steps, then released
FP32_BYTES = 4
PAGE = 4096

_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "kib": 2**10, "kb": 10**3,
    "m": 2**20, "mib": 2**20, "mb": 10**6,
    "g": 2**30, "gib": 2**30, "gb": 10**9,
    "t": 2**40, "tib": 2**40, "tb": 10**12,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str, flag: str = "--size") -> int:
    """'256MiB' -> 268435456. Accepts B, KiB/MiB/GiB/TiB (also K/M/G/T), KB/MB/GB/TB."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise UserFacingError(f"{flag} {text!r} is not a size; use e.g. 64MiB, 256MiB, 1GiB "
                              "(units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")
    return int(float(match.group(1)) * _UNITS[unit])




def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Save synthetic per-rank resume anchors, restart from them (mapped), catch up the\n"
        "fragments the syncer moved past, run a few training-like steps, and summarise.")
    parser.epilog = (
        "telemetry:\n"
        "  With no OTEL exporter/endpoint set, spans, the census and logs go to local OTLP JSON\n"
        "  files under YETO_OTEL_LOCAL_DIR (default ./yeto-telemetry); with\n"
        "  OTEL_EXPORTER_OTLP_ENDPOINT (etc.) set they are sent over OTLP, as for a trainer.\n"
        "  The step log always goes to <YETO_OTEL_LOCAL_DIR>/steplog-<rank>-<start>-<pid>.jsonl\n"
        "  (named like this process's traces-/metrics- files).\n"
        "  Unless you set them, the demo sets for itself:\n"
        f"    OTEL_METRIC_EXPORT_INTERVAL={DEFAULT_METRIC_INTERVAL_MS} (census every second, "
        "not every 10 s)\n"
        "    YETO_DILOCO_HOST_MEM_CENSUS=1 (the census in the step log)\n"
        "    OTEL_SERVICE_NAME=yeto-otel-demo\n"
        "then: yeto-otel report <YETO_OTEL_LOCAL_DIR>")
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
# flags


@dataclass(frozen=True)
class Plan:
    size: int
    shards: int
    steps: int
    step_size: int
    step_seconds: float
    seed: int
    directory: str | None
    keep: bool
    compare_eager: bool
    rank: int | None
    world_size: int | None
    json: bool


def _integer(text: str, flag: str, minimum: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UserFacingError(f"{flag} {text!r} is not an integer") from None
    if value < minimum:
        raise UserFacingError(f"{flag} {value} is not valid: must be at least {minimum}")
    return value


def _plan(args: argparse.Namespace) -> Plan:
    size = parse_size(args.size)
    shards = _integer(args.shards, "--shards", 1)
    if shards < FRAGMENTS:
        raise UserFacingError(f"--shards {shards} is too few: the demo syncs {FRAGMENTS} "
                              f"fragments, so it needs at least {FRAGMENTS} shards")
    if size < shards * FP32_BYTES:
        raise UserFacingError(f"--size {args.size} is too small for {shards:,} FP32 shards "
                              f"(at least {format_bytes(shards * FP32_BYTES)})")
    steps = _integer(args.steps, "--steps", 0)
    step_size = parse_size(args.step_size, "--step-size")
    try:
        step_seconds = float(args.step_seconds)
    except ValueError:
        raise UserFacingError(f"--step-seconds {args.step_seconds!r} is not a number") from None
    if not (0 <= step_seconds <= 60):
        raise UserFacingError(f"--step-seconds {args.step_seconds} must be between 0 and 60")
    seed = _integer(args.seed, "--seed", 0)
    rank = _integer(args.rank, "--rank", 0) if args.rank is not None else None
    world = _integer(args.world_size, "--world-size", 1) if args.world_size is not None else None
    if rank is not None and world is not None and rank >= world:
        raise UserFacingError(f"--rank {rank} must be less than --world-size {world}")
    return Plan(size=size, shards=shards, steps=steps, step_size=step_size,
                step_seconds=step_seconds, seed=seed, directory=args.dir, keep=args.keep,
                compare_eager=args.compare_eager, rank=rank, world_size=world, json=args.json)


def _check_room(directory: str, file_bytes: int, plan: Plan) -> None:
    try:
        free = shutil.disk_usage(directory).free
    except OSError as exc:
        raise UserFacingError(f"--dir {directory}: {exc.strerror or exc}") from None
    needed = file_bytes * 2 + (16 << 20)  # the file and its temporary copy while it is saved
    if free < needed:
        raise UserFacingError(
            f"not enough disk space in {directory} for {format_bytes(file_bytes)} of anchors: "
            f"{format_bytes(free)} free, {format_bytes(needed)} needed; use a smaller --size or "
            "another --dir")
    if plan.compare_eager:
        available = _mem_available()
        if available is not None and file_bytes > available * 0.8:
            raise UserFacingError(
                f"--compare-eager would read {format_bytes(file_bytes)} into memory but only "
                f"{format_bytes(available)} is available; use a smaller --size")


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# ---------------------------------------------------------------------------------------------
# progress


class Progress:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[demo {time.monotonic() - self.started:6.2f}s] {message}", file=sys.stderr,
              flush=True)


# ---------------------------------------------------------------------------------------------
# synthetic anchors


def shard_sizes(total_elements: int, shards: int, seed: int) -> list[int]:
    """Element counts of `shards` shards of varied sizes (log-normal, like a model's matrices,
    embeddings and norms) summing exactly to `total_elements`."""
    rng = random.Random(seed)
    weights = [rng.lognormvariate(0.0, 1.5) for _ in range(shards)]
    scale = (total_elements - shards) / sum(weights)
    counts = [1 + int(w * scale) for w in weights]
    counts[max(range(shards), key=counts.__getitem__)] += total_elements - sum(counts)
    return counts


class SyntheticAnchors(Mapping):
    """name -> FP32 tensor, generated on access (deterministic per shard), so saving the
    anchors never holds all of them in anonymous memory at once."""

    def __init__(self, counts: list[int], seed: int):
        self.counts = counts
        self.seed = seed
        self.names = [f"shard.{i:04d}" for i in range(len(counts))]
        self._index = {name: i for i, name in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __getitem__(self, name: str):
        return self.tensor(self._index[name])

    def tensor(self, i: int, salt: int = 0):
        import torch

        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + i * 7 + salt)
        return torch.randn(self.counts[i], dtype=torch.float32, generator=generator)


def fragments_behind(shards: int, seed: int) -> list[tuple[int, range]]:
    """The fragments the syncer moved past: FRAGMENTS_BEHIND consecutive fragment ids of
    FRAGMENTS (1/8 of the shards), each with its shard indices."""
    bounds = [round(k * shards / FRAGMENTS) for k in range(FRAGMENTS + 1)]
    first = random.Random(seed + 1).randrange(FRAGMENTS - FRAGMENTS_BEHIND + 1)
    return [(f, range(bounds[f], bounds[f + 1])) for f in range(first, first + FRAGMENTS_BEHIND)]


# ---------------------------------------------------------------------------------------------
# the restart


@dataclass
class Restart:
    mode: str
    attributes: dict
    seconds: float
    trace_id: str

    def as_dict(self) -> dict:
        a = self.attributes
        size = a.get(span_table.ANCHORS_FILE_SIZE.name) or 0
        touched = a.get(span_table.ANCHORS_BYTES_TOUCHED.name)
        return {
            "load_mode": a.get(span_table.ANCHORS_LOAD_MODE.name, self.mode),
            "restart_seconds": round(self.seconds, 6),
            "file_size": size,
            "tensor_count": a.get(span_table.ANCHORS_TENSOR_COUNT.name),
            "dtype": a.get(span_table.ANCHORS_DTYPE.name),
            "bytes_mapped": a.get(span_table.ANCHORS_BYTES_MAPPED.name),
            "bytes_touched": touched,
            "touched_fraction": (touched / size) if size and touched is not None else None,
            "anonymous_delta": a.get(span_table.ANCHORS_ANONYMOUS_DELTA.name),
            "fragments_done": a.get(span_table.ANCHORS_FRAGMENTS_DONE.name),
            "trace_id": self.trace_id,
        }


def _drop_page_cache(path: str) -> bool:
    """Ask the kernel to drop the file's cached pages, so a restart reads from disk as after a
    reboot or on a busy node (advisory; a no-op on tmpfs)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(fd)


def restart(path: str, anchors: SyntheticAnchors, behind, progress: Progress,
            label: str) -> Restart:
    """One restart: load the anchors (mode from YETO_DILOCO_RESUME_ANCHOR_MMAP), catch up the
    fragments the syncer moved past, release the anchors."""
    import torch

    from ...anchors import load_resume_anchors
    from ...settings import load_settings

    # What the trainer holds before the restart: its local parameters for the fragments to
    # catch up (the model, loaded from its own checkpoint) and the syncer's new global values.
    # Made here, before the load, so they are not counted as anchor memory.
    local, global_new = {}, {}
    for _, indices in behind:
        for i in indices:
            local[i] = anchors.tensor(i) + 0.01 * anchors.tensor(i, salt=1)
            global_new[i] = anchors.tensor(i) + 0.02 * anchors.tensor(i, salt=2)
    _drop_page_cache(path)
    mapped = load_settings().resume_anchor_mmap
    progress(f"{label}: load_resume_anchors {'mapped' if mapped else 'eagerly'} "
             f"(YETO_DILOCO_RESUME_ANCHOR_MMAP={'1' if mapped else '0'}) from {path}")
    with load_resume_anchors(path) as resumed:
        span = resumed.span
        loaded = span.attributes
        progress(f"{label}: loaded {loaded.get('yeto.anchors.tensor_count', 0):,} anchors, mode "
                 f"{resumed.load_mode}, {format_bytes(loaded.get('yeto.anchors.bytes_mapped', 0))} "
                 f"mapped of {format_bytes(resumed.file_size)}")
        for k, (fragment_id, indices) in enumerate(behind, 1):
            with torch.no_grad():
                for i in indices:
                    anchor_old = resumed.tensors[anchors.names[i]]
                    # local = global_new + (local - anchor_old): the local progress since the
                    # anchor, replayed on top of the syncer's new global values, in place in
                    # the trainer's parameters (as a trainer does: no new anonymous memory).
                    local[i].sub_(anchor_old).add_(global_new[i])
            resumed.fragment_done(fragment_id)
            touched = resumed.bytes_touched()
            progress(f"{label}: caught up fragment {k}/{len(behind)} (id {fragment_id}, "
                     f"{len(indices)} shards), "
                     f"{format_bytes(touched) if touched is not None else '?'} of anchors touched")
    attributes = dict(span.attributes)
    seconds = (span.end_time - span.start_time) / 1e9
    trace_id = format(span.get_span_context().trace_id, "032x")
    del local, global_new
    mode = attributes.get(span_table.ANCHORS_LOAD_MODE.name, "?")
    return Restart(mode, attributes, seconds, trace_id)


# ---------------------------------------------------------------------------------------------
# the steps


def _pinned_available() -> bool:
    import torch

    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def run_steps(plan: Plan, step_log_path: str, progress: Progress, settings) -> dict:
    """Training-like steps that hold memory for RELEASE_EVERY steps, then release it."""
    import torch
    from opentelemetry import trace

    from ...census import CensusReader, HostCacheReleasePolicy, add_census_to_step_log, resolve_allocator
    from ...version import __version__

    tracer = trace.get_tracer("yeto_otel.demo", __version__)
    pinned = _pinned_available()
    allocator = resolve_allocator(settings.host_allocator)
    reader = CensusReader(allocator=allocator, node_metrics=False)
    # With pinned memory the host allocator caches freed blocks; release them when the cache
    # holds more than one step's worth, judged from gauges only (HostCacheReleasePolicy).
    policy = HostCacheReleasePolicy(plan.step_size, allocator) if pinned else None
    held: list = []
    rng = random.Random(plan.seed + 2)
    anon_bytes = plan.step_size // 2 if pinned else plan.step_size
    pinned_bytes = plan.step_size - anon_bytes if pinned else 0
    peak_held = 0
    with open(step_log_path, "a", encoding="utf-8") as log:
        for step in range(1, plan.steps + 1):
            with tracer.start_as_current_span(span_table.DEMO_STEP.name) as span:
                started = time.monotonic()
                if anon_bytes:
                    held.append(torch.ones(anon_bytes, dtype=torch.uint8))  # allocated, touched
                if pinned_bytes:
                    block = torch.empty(pinned_bytes, dtype=torch.uint8, pin_memory=True)
                    held.append(block.fill_(1))
                held_bytes = sum(t.numel() for t in held)
                peak_held = max(peak_held, held_bytes)
                loss = 2.5 * math.exp(-step / 20) + rng.uniform(-0.05, 0.05)
                if plan.step_seconds:
                    time.sleep(max(0.0, plan.step_seconds - (time.monotonic() - started)))
                released = step % RELEASE_EVERY == 0
                if released:
                    held.clear()
                record = {"step": step, "time_unix_nano": time.time_ns(), "loss": round(loss, 6)}
                add_census_to_step_log(record, rank=0)  # the demo is its sync group's rank 0
                log.write(json.dumps(record) + "\n")
                log.flush()
                span.set_attributes(dict(zip(
                    (a.name for a in span_table.DEMO_STEP.attributes),
                    (step, loss, held_bytes, released))))
                note = ""
                if released and policy is not None:
                    decision = policy.maybe_release(reader.take())
                    note = f"; host cache: {decision.reason}" + (
                        " -> released" if decision.released else "")
                rss = record.get("host_mem.vm_rss_bytes")
                anon = record.get("host_mem.anonymous_bytes")
                if rss is None or anon is None:
                    snapshot = reader.take()
                    rss = snapshot.get("yeto.process.memory.rss")
                    anon = snapshot.get("yeto.process.memory.anonymous")
                    rss = rss.value if rss is not None else None
                    anon = anon.value if anon is not None else None
                progress(f"step {step}/{plan.steps}: loss {loss:.3f}, held "
                         f"{format_bytes(held_bytes)}{' -> released' if released else ''}, RSS "
                         f"{format_bytes(rss) if rss is not None else '?'}, anonymous "
                         f"{format_bytes(anon) if anon is not None else '?'}{note}")
    held.clear()
    return {"steps": plan.steps, "step_memory": "pinned + anonymous" if pinned else "anonymous",
            "pinned": pinned,
            "step_bytes": plan.step_size, "peak_held_bytes": peak_held,
            "release_every": RELEASE_EVERY}


# ---------------------------------------------------------------------------------------------
# telemetry set-up and shut-down


def _set_demo_defaults(plan: Plan) -> None:
    """Environment the demo sets for itself before any setting is read (the user's wins)."""
    os.environ.setdefault("OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_METRIC_INTERVAL_MS)
    os.environ.setdefault("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    if "service.name" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        os.environ.setdefault("OTEL_SERVICE_NAME", "yeto-otel-demo")
    if plan.rank is not None:
        os.environ["RANK"] = str(plan.rank)
    if plan.world_size is not None:
        os.environ["WORLD_SIZE"] = str(plan.world_size)


def _step_log_path(local_dir: str, instance_id: str) -> str:
    """<local dir>/steplog-<stem>.jsonl with the stem of this process's telemetry files when
    they are local (same rank, start and pid), else a fresh one."""
    from ...otel import current_stem, local_file_stem

    stem = current_stem() or local_file_stem(instance_id)
    return os.path.join(local_dir, f"steplog-{stem}.jsonl")


def _shutdown_telemetry() -> None:
    from opentelemetry import metrics, trace

    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        shutdown = getattr(provider, "shutdown", None)
        if shutdown is not None:
            with contextlib.suppress(Exception):
                shutdown()
    with contextlib.suppress(Exception):
        from opentelemetry._logs import get_logger_provider

        shutdown = getattr(get_logger_provider(), "shutdown", None)
        if shutdown is not None:
            shutdown()


# ---------------------------------------------------------------------------------------------
# the command


def run(args: argparse.Namespace) -> int:
    plan = _plan(args)  # bad flags: UserFacingError before anything is created
    _set_demo_defaults(plan)

    from ...settings import exports_locally, load_settings

    settings = load_settings()  # a bad setting: SettingsError, one line, exit 2
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserFacingError("the demo needs torch: pip install 'yeto-otel[torch]'") from None

    counts = shard_sizes(plan.size // FP32_BYTES, plan.shards, plan.seed)
    file_estimate = sum(-(-c * FP32_BYTES // PAGE) * PAGE for c in counts) + (1 << 20)
    if plan.directory is not None:
        directory = os.path.abspath(os.path.expanduser(plan.directory))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise UserFacingError(f"--dir {plan.directory}: {exc.strerror or exc}") from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise UserFacingError(f"--dir {plan.directory}: not writable")
        made_directory = False
    else:
        directory = tempfile.mkdtemp(prefix="yeto-demo-")
        made_directory = True
    try:
        _check_room(directory, file_estimate, plan)
    except UserFacingError:
        if made_directory:
            shutil.rmtree(directory, ignore_errors=True)
        raise

    from ...otel import configure_telemetry, destination
    from ...instrumentation import HostMemoryInstrumentor, TorchLoadInstrumentor

    progress = Progress()
    where = configure_telemetry()
    HostMemoryInstrumentor().instrument()
    TorchLoadInstrumentor().instrument()
    progress(f"telemetry: {where}")

    from opentelemetry import trace

    resource = getattr(trace.get_tracer_provider(), "resource", None)
    instance_id = str((resource.attributes if resource is not None else {})
                      .get("service.instance.id", f"pid-{os.getpid()}"))
    local_dir = os.path.abspath(os.path.expanduser(settings.local_dir))
    os.makedirs(local_dir, exist_ok=True)
    step_log = _step_log_path(local_dir, instance_id)
    rank = settings.rank if settings.rank is not None else 0
    path = os.path.join(directory, f"anchors-rank{rank}.pt")
    anchors = SyntheticAnchors(counts, plan.seed)
    behind = fragments_behind(plan.shards, plan.seed)
    restarts: list[Restart] = []
    steps: dict = {}
    try:
        from ...anchors import save_resume_anchors

        progress(f"saving {plan.shards:,} FP32 anchors ({format_bytes(plan.size)}) to {path} ...")
        t0 = time.monotonic()
        save_resume_anchors(path, anchors)
        save_seconds = time.monotonic() - t0
        progress(f"saved {format_bytes(os.path.getsize(path))} in {save_seconds:.2f} s")

        behind_shards = sum(len(r) for _, r in behind)
        progress(f"restart: the syncer moved {len(behind)} of {FRAGMENTS} fragments "
                 f"({behind_shards:,} shards, ids {behind[0][0]}-{behind[-1][0]}) past the "
                 "anchors")
        restarts.append(restart(path, anchors, behind, progress, "mapped restart"))
        if plan.compare_eager:
            previous = os.environ.get("YETO_DILOCO_RESUME_ANCHOR_MMAP")
            os.environ["YETO_DILOCO_RESUME_ANCHOR_MMAP"] = "0"
            try:
                restarts.append(restart(path, anchors, behind, progress, "eager restart"))
            finally:
                if previous is None:
                    del os.environ["YETO_DILOCO_RESUME_ANCHOR_MMAP"]
                else:
                    os.environ["YETO_DILOCO_RESUME_ANCHOR_MMAP"] = previous
        progress(f"training: {plan.steps} steps, step log -> {step_log}")
        steps = run_steps(plan, step_log, progress, settings)
    finally:
        progress("flushing telemetry ...")
        _shutdown_telemetry()
        if not plan.keep:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            if made_directory:
                shutil.rmtree(directory, ignore_errors=True)

    local = exports_locally() or "local" in destination()
    summary = {
        "anchor_file": path,
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
        "telemetry_local": local,
        "step_log": step_log,
        "next": f"yeto-otel report {_shell_quote(local_dir)}",
    }
    if plan.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_text_summary(summary))
    sys.stdout.flush()
    return 0


def _shell_quote(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _pct(part, whole) -> str:
    return f"{100 * part / whole:.1f}%" if part is not None and whole else "?"


def _size_or_q(n) -> str:
    return format_bytes(n) if n is not None else "?"


def _text_summary(s: dict) -> str:
    r = s["restart"]
    lines = [
        "",
        "yeto-otel demo: island restart",
        f"  anchors         {s['shards']:,} FP32 shards, {format_bytes(s['size'])} "
        f"(file {format_bytes(r['file_size'])}: each shard starts on a page)",
        f"  anchor file     {s['anchor_file']}" + ("" if s["anchor_file_kept"] else " (removed)"),
        f"  catch-up        {len(s['fragments_behind'])} of {s['fragments']} fragments "
        f"({s['shards_behind']:,} shards, 1/8) moved past by the syncer",
        f"  load mode       {r['load_mode']}",
        f"  bytes mapped    {_size_or_q(r['bytes_mapped'])} ({_pct(r['bytes_mapped'], r['file_size'])}"
        " of the file)",
        f"  bytes touched   {_size_or_q(r['bytes_touched'])} "
        f"({_pct(r['bytes_touched'], r['file_size'])} of the file)",
        f"  anonymous delta {_size_or_q(r['anonymous_delta'])}",
        f"  restart time    {r['restart_seconds']:.3f} s (load + catch-up, the "
        "yeto.resume.anchors span)",
    ]
    e = s["eager_restart"]
    if e is not None:
        rows = [("mode", "restart s", "anonymous delta", "bytes mapped", "bytes touched")]
        for x in (r, e):
            rows.append((x["load_mode"], f"{x['restart_seconds']:.3f}",
                         _size_or_q(x["anonymous_delta"]), _size_or_q(x["bytes_mapped"]),
                         _size_or_q(x["bytes_touched"])))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["", "  mapped vs eager (YETO_DILOCO_RESUME_ANCHOR_MMAP=0):"]
        for n, row in enumerate(rows):
            lines.append("    " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                           for i, (cell, w) in enumerate(zip(row, widths))))
            if n == 0:
                lines.append("    " + "  ".join("-" * w for w in widths))
    if "steps" in s:
        lines += [
            "",
            f"  steps           {s['steps']}, each holding {format_bytes(s['step_bytes'])} more, "
            f"released every {s['release_every']} (peak {format_bytes(s['peak_held_bytes'])})",
            f"  step memory     {s['step_memory']}"
            + ("" if s["pinned"] else " only (no CUDA here, so no pinned host memory)"),
        ]
    lines += [
        f"  telemetry       {s['telemetry']}",
        f"  step log        {s['step_log']}",
        "",
    ]
    if s["telemetry_local"]:
        lines.append(f"next: {s['next']}")
    else:
        lines.append("next: find the yeto.resume.anchors span (trace "
                     f"{r['trace_id']}) and the yeto.process.memory.* metrics in your backend; "
                     f"the step log is local: {s['next']}")
    return "\n".join(lines)
