"""One island restart: load the resume anchors, catch up the fragments the syncer moved past
with `global_new + (local - anchor_old)`, one `fragment_done` each, and keep what the
`yeto.resume.anchors` span recorded."""

from __future__ import annotations

from dataclasses import dataclass

from ... import names
from ...proc import evict_from_page_cache
from ...units import format_bytes
from ._anchors import SyntheticAnchors
from ._progress import Progress

__all__ = ["Restart", "restart"]

Behind = list[tuple[int, range]]  # (fragment id, shard indices), as `fragments_behind` gives


@dataclass
class Restart:
    """What one restart's `yeto.resume.anchors` span recorded, for the summary."""

    mode: str
    attributes: dict
    seconds: float
    trace_id: str

    @classmethod
    def from_span(cls, span) -> "Restart":
        attributes = dict(span.attributes)
        return cls(mode=attributes.get(names.ANCHORS_LOAD_MODE.name, "?"),
                   attributes=attributes,
                   seconds=(span.end_time - span.start_time) / 1e9,
                   trace_id=format(span.get_span_context().trace_id, "032x"))

    def as_dict(self) -> dict:
        a = self.attributes
        size = a.get(names.ANCHORS_FILE_SIZE.name) or 0
        touched = a.get(names.ANCHORS_BYTES_TOUCHED.name)
        return {
            "load_mode": a.get(names.ANCHORS_LOAD_MODE.name, self.mode),
            "restart_seconds": round(self.seconds, 6),
            "file_size": size,
            "tensor_count": a.get(names.ANCHORS_TENSOR_COUNT.name),
            "dtype": a.get(names.ANCHORS_DTYPE.name),
            "bytes_mapped": a.get(names.ANCHORS_BYTES_MAPPED.name),
            "bytes_touched": touched,
            "touched_fraction": (touched / size) if size and touched is not None else None,
            "anonymous_delta": a.get(names.ANCHORS_ANONYMOUS_DELTA.name),
            "fragments_done": a.get(names.ANCHORS_FRAGMENTS_DONE.name),
            "trace_id": self.trace_id,
        }


def _drop_page_cache(path: str) -> bool:
    """Ask the kernel to drop the file's cached pages, so a restart reads from disk as after a
    reboot or on a busy node; False where it cannot (advisory either way)."""
    try:
        evict_from_page_cache(path)
        return True
    except (OSError, AttributeError):  # AttributeError: no posix_fadvise on this platform
        return False


def _trainer_state(anchors: SyntheticAnchors, behind: Behind) -> tuple[dict, dict]:
    """What the trainer holds before the restart: its local parameters for the fragments to
    catch up (the model, loaded from its own checkpoint) and the syncer's new global values.
    Made before the load, so they are not counted as anchor memory."""
    local, global_new = {}, {}
    for _, indices in behind:
        for i in indices:
            local[i] = anchors.tensor(i) + 0.01 * anchors.tensor(i, salt=1)
            global_new[i] = anchors.tensor(i) + 0.02 * anchors.tensor(i, salt=2)
    return local, global_new


def _catch_up(resumed, anchors: SyntheticAnchors, behind: Behind, state: tuple[dict, dict],
              label: str, progress: Progress) -> None:
    import torch

    local, global_new = state
    for k, (fragment_id, indices) in enumerate(behind, 1):
        with torch.no_grad():
            for i in indices:
                anchor_old = resumed.tensors[anchors.names[i]]
                # local = global_new + (local - anchor_old): the local progress since the
                # anchor, replayed on top of the syncer's new global values, in place in the
                # trainer's parameters (as a trainer does: no new anonymous memory).
                local[i].sub_(anchor_old).add_(global_new[i])
        resumed.fragment_done(fragment_id)
        touched = resumed.bytes_touched()
        progress(f"{label}: caught up fragment {k}/{len(behind)} (id {fragment_id}, "
                 f"{len(indices)} shards), "
                 f"{format_bytes(touched) if touched is not None else '?'} of anchors touched")


def restart(path: str, anchors: SyntheticAnchors, behind: Behind, progress: Progress, *,
            label: str, mode: str, why: str) -> Restart:
    """One restart: load the anchors in `mode` (MMAP or EAGER; `why` says where that came
    from, for the progress line), catch up the fragments the syncer moved past, release the
    anchors."""
    # Imported here, not at the top: `yeto-otel census` and `--help` load this module too and
    # should not pay for the anchors' tracing imports.
    from ...anchors import MMAP, load_resume_anchors

    state = _trainer_state(anchors, behind)
    _drop_page_cache(path)
    progress(f"{label}: load_resume_anchors {'mapped' if mode == MMAP else 'eagerly'} "
             f"({why}) from {path}")
    with load_resume_anchors(path, mode=mode) as resumed:
        loaded = resumed.span.attributes
        mapped = loaded.get(names.ANCHORS_BYTES_MAPPED.name, 0)
        progress(f"{label}: loaded {loaded.get(names.ANCHORS_TENSOR_COUNT.name, 0):,} anchors, "
                 f"mode {resumed.load_mode}, {format_bytes(mapped)} mapped of "
                 f"{format_bytes(resumed.file_size)}")
        _catch_up(resumed, anchors, behind, state, label, progress)
    # The span has ended with the block: its attributes now include the residency and the
    # anonymous delta measured when the anchors were released.
    return Restart.from_span(resumed.span)
