"""`load_resume_anchors` and `ResumeAnchors`: the anchors of a resume, inside a residency span.

    with load_resume_anchors(path) as anchors:
        for fragment in fragments_moved_past:
            catch_up(fragment, anchors.tensors)
            anchors.fragment_done(fragment.id)

The `yeto.resume.anchors` span covers the residency window, from the load until the block
ends; its child `yeto.resume.anchors.load` covers the load call. Inside the block the span is
the current one, so the catch-up's own spans nest under it.
"""

from __future__ import annotations

import logging
import os

from opentelemetry import context, metrics, trace
from opentelemetry.trace import Status, StatusCode

from .. import names
from ..names import LOAD_MODE_ATTRIBUTE, RESUME_BYTES_MAPPED, RESUME_BYTES_TOUCHED
from ..proc import ProcReadError, ResidencyProbe, advise_random_access, read_anonymous_bytes
from ..settings import ANCHOR_READAHEAD
from ..settings import current_settings
from ..version import __version__
from ._file_format import dtype_name
from ._load import EAGER, MMAP, choose_mode, load_tensors
from ._prefetch import PrefetchingAnchors

__all__ = ["ResumeAnchors", "load_resume_anchors"]

_log = logging.getLogger("yeto_otel.anchors")

SPAN = names.RESUME_ANCHORS.name
LOAD_SPAN = names.RESUME_ANCHORS_LOAD.name
FRAGMENT_EVENT = names.FRAGMENT_DONE.name


def _anonymous_bytes() -> int | None:
    """This process's anonymous memory, read before the load and when the block ends.

    From /proc/self/status `RssAnon` (the kernel's counter, ~10 us), not smaps_rollup, which
    walks every mapping (~13 ms with torch imported, more with the anchors mapped) and would
    sit twice on the restart's critical path.
    """
    try:
        return read_anonymous_bytes()
    except ProcReadError:
        return None


def _dtype_of(tensors: dict, recorded: str | None) -> str:
    if recorded:
        return recorded
    dtypes = {dtype_name(t.dtype) for t in tensors.values()}
    return dtypes.pop() if len(dtypes) == 1 else ("mixed" if dtypes else "none")


class _ResumeGauges:
    """`yeto.resume.anchors.bytes_mapped` / `.bytes_touched`, set once per resume."""

    def __init__(self, meter_provider) -> None:
        meter = metrics.get_meter("yeto_otel.anchors", __version__, meter_provider)
        self._mapped = meter.create_gauge(RESUME_BYTES_MAPPED.name, unit=RESUME_BYTES_MAPPED.unit,
                                          description=RESUME_BYTES_MAPPED.description)
        self._touched = meter.create_gauge(RESUME_BYTES_TOUCHED.name,
                                           unit=RESUME_BYTES_TOUCHED.unit,
                                           description=RESUME_BYTES_TOUCHED.description)

    def record(self, mode: str, mapped: int, touched: int | None) -> None:
        attributes = {LOAD_MODE_ATTRIBUTE: mode}
        try:
            self._mapped.set(mapped, attributes)
            if touched is not None:
                self._touched.set(touched, attributes)
        except Exception:  # telemetry never fails a resume
            _log.debug("cannot record the resume gauges", exc_info=True)


class ResumeAnchors:
    """The loaded anchors and their residency window. Use as a context manager (or `close()`)."""

    def __init__(self, *, path: str, tensors: dict, mode: str, file_size: int, span,
                 probe: ResidencyProbe | None, anonymous_before: int | None,
                 bytes_mapped: int = 0, gauges: _ResumeGauges | None = None):
        self.path = path
        self.load_mode = mode
        self.file_size = file_size
        self._tensors: dict | None = tensors
        self._span = span
        self._probe = probe
        self._anonymous_before = anonymous_before
        self._token = None
        self._fragments = 0
        self._bytes_mapped = bytes_mapped
        self._gauges = gauges

    @property
    def tensors(self) -> dict:
        if self._tensors is None:
            raise RuntimeError(f"resume anchors of {self.path} were released when the block ended")
        return self._tensors

    @property
    def span(self):
        return self._span

    def bytes_touched(self) -> int | None:
        """Bytes of the anchors resident in this process now (eager: all bytes read).

        Reuses the mapping ranges found at load: they stay valid for the whole window because
        this object holds every loaded tensor until the block ends, so no mapping of the file
        can go away or move. That skips rereading /proc/self/maps (thousands of lines on a
        trainer) on every fragment."""
        if self._probe is None:
            return self.file_size
        residency = self._probe.measure(rescan=False)
        return residency.bytes_touched if residency is not None else None

    def fragment_done(self, fragment_id) -> None:
        """The catch-up finished one fragment: an event with the bytes touched so far."""
        attributes = {names.FRAGMENT_ID.name: fragment_id}
        touched = self.bytes_touched()
        if touched is not None:
            attributes[names.ANCHORS_BYTES_TOUCHED.name] = touched
        self._fragments += 1
        self._span.add_event(FRAGMENT_EVENT, attributes)

    def __enter__(self) -> "ResumeAnchors":
        self._token = context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._finish(exc)

    def close(self) -> None:
        self._finish(None)

    def _finish(self, exc: BaseException | None) -> None:
        if self._tensors is None:
            return
        span = self._span
        touched = self.bytes_touched()
        if touched is not None:
            span.set_attribute(names.ANCHORS_BYTES_TOUCHED.name, touched)
        elif self._probe is not None and self._probe.error:
            span.set_attribute(names.ANCHORS_RESIDENCY_ERROR.name, self._probe.error)
        anonymous_now = _anonymous_bytes()
        if anonymous_now is not None and self._anonymous_before is not None:
            span.set_attribute(names.ANCHORS_ANONYMOUS_DELTA.name,
                               anonymous_now - self._anonymous_before)
        span.set_attribute(names.ANCHORS_FRAGMENTS_DONE.name, self._fragments)
        if isinstance(self._tensors, PrefetchingAnchors):
            span.set_attribute(names.ANCHORS_BYTES_PREFETCHED.name, self._tensors.bytes_advised)
        if self._gauges is not None:
            self._gauges.record(self.load_mode, self._bytes_mapped, touched)
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self._tensors = None  # drop our references: the mapping goes with the last tensor
        if self._token is not None:
            context.detach(self._token)
            self._token = None
        span.end()


LOAD_MODES = (MMAP, EAGER)


def _set_readahead(probe: ResidencyProbe, readahead: str) -> str:
    """Apply `readahead` to the mapped resume before anything touches it; returns what is in
    effect. `off` advises the mapping MADV_RANDOM; a refusal leaves the kernel's read-around
    (the resume works either way) and is logged. `anchor` is applied by PrefetchingAnchors."""
    if readahead != "off":
        return readahead
    try:
        if probe.error:
            raise OSError(probe.error)
        advise_random_access(probe.mappings())
    except (OSError, ValueError) as exc:
        _log.warning("cannot turn off read-ahead on the mapping of %s (the resume reads ahead "
                     "as usual): %s", probe.path, exc)
        return "kernel"
    return "off"


def _chosen(mode: str | None, readahead: str | None, settings) -> tuple[str, str]:
    """The load mode and read-ahead: the arguments, or the settings where not given."""
    if mode is None:
        mode = MMAP if settings.resume_anchor_mmap else EAGER
    if readahead is None:
        readahead = settings.resume_anchor_readahead
    if mode not in LOAD_MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, LOAD_MODES))}, got {mode!r}")
    if readahead not in ANCHOR_READAHEAD:
        raise ValueError(f"readahead must be one of {', '.join(map(repr, ANCHOR_READAHEAD))}, "
                         f"got {readahead!r}")
    return mode, readahead


def load_resume_anchors(path: str | os.PathLike, *, mode: str | None = None,
                        readahead: str | None = None,
                        tracer_provider=None, meter_provider=None) -> ResumeAnchors:
    """Load the anchor file at `path`: mapped (`mode="mmap"`) or read whole (`mode="eager"`).

    `mode`: when not given, YETO_DILOCO_RESUME_ANCHOR_MMAP decides (mapped unless it is `0`).
    A legacy (non-zip) file cannot be mapped and is read eagerly with a warning
    (`eager_fallback`). Raises AnchorLoadError (recorded on the span, status ERROR) for a
    missing, truncated, corrupt or foreign file, or one whose pickle would run code; never
    returns partial anchors. When the block ends, the gauges
    `yeto.resume.anchors.bytes_mapped` / `.bytes_touched` are set too.
    `readahead` (mapped only): `"anchor"` reads each anchor whole when the catch-up first
    takes it, `"kernel"` leaves it to the kernel's read-around, `"off"` reads only the
    faulting pages; when not given, YETO_DILOCO_RESUME_ANCHOR_READAHEAD decides.
    `tracer_provider` / `meter_provider`: the global ones when not given.
    """
    settings = current_settings() if mode is None or readahead is None else None
    mode, readahead = _chosen(mode, readahead, settings)
    path = os.fspath(path)
    # Import torch before the "before" reading, or a first use of torch in the process would
    # count torch's own import (~300 MB) as anchor memory.
    import torch  # noqa: F401
    tracer = trace.get_tracer("yeto_otel.anchors", __version__, tracer_provider)
    anonymous_before = _anonymous_bytes()
    span = tracer.start_span(SPAN, attributes={names.ANCHORS_PATH.name: os.path.abspath(path)})
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False,
                            set_status_on_exception=False), \
                tracer.start_as_current_span(LOAD_SPAN) as load_span:
            mode, size = choose_mode(path, mmap_enabled=(mode == MMAP))
            span.set_attributes({names.ANCHORS_FILE_SIZE.name: size,
                                 names.ANCHORS_LOAD_MODE.name: mode})
            tensors, recorded = load_tensors(path, mode)
            probe = ResidencyProbe(path) if mode == MMAP else None
            if probe is not None:
                readahead = _set_readahead(probe, readahead)
                span.set_attribute(names.ANCHORS_READAHEAD.name, readahead)
                if readahead == "anchor":
                    tensors = PrefetchingAnchors(tensors, path)
            residency = probe.measure() if probe is not None else None
            load_span.set_attribute(names.ANCHORS_TENSOR_COUNT.name, len(tensors))
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, getattr(exc, "reason", None) or
                               f"{type(exc).__name__}: {exc}"))
        span.end()
        raise
    bytes_mapped = residency.bytes_mapped if residency is not None else 0
    span.set_attributes({
        names.ANCHORS_DTYPE.name: _dtype_of(tensors, recorded),
        names.ANCHORS_TENSOR_COUNT.name: len(tensors),
        names.ANCHORS_BYTES_MAPPED.name: bytes_mapped,
    })
    if probe is not None and residency is None:
        _log.warning("cannot measure the residency of %s: %s", path, probe.error)
    return ResumeAnchors(path=path, tensors=tensors, mode=mode, file_size=size, span=span,
                         probe=probe, anonymous_before=anonymous_before,
                         bytes_mapped=bytes_mapped, gauges=_ResumeGauges(meter_provider))
