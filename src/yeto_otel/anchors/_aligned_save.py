"""`torch.save` with every storage starting on a page, changing no torch setting.

torch lays storages out at `torch.utils.serialization.config.save.storage_alignment`. Setting
that around the anchor save would reach every `torch.save` that reads it meanwhile: on another
thread where the setting is process-wide, and on the same thread everywhere (a signal handler
that saves a checkpoint while an anchor save is under way). So the setting is left alone, and
the anchor file's zip writer is made here with the page as its alignment, as torch's own
opener makes it with the setting (`torch._C.PyTorchFileWriter(file, compute_crc32,
storage_alignment)`), then handed to torch's own pickling step (`torch.serialization._save`),
the one torch.save runs. That step also writes the `.storage_alignment` record from the
setting; loaders read it to find each storage, so it is given the writer's alignment.

Both names are private to torch. Should a release move them, the save falls back to plain
`torch.save`: a correct file whose storages sit at torch's default alignment, not on pages
(one warning), and tests/anchors/test_anchor_save_alignment.py fails until this is updated.
"""

from __future__ import annotations

import inspect
import logging
import pickle

from ._file_format import PAGE_BYTES

__all__ = ["save_page_aligned", "torch_save_step"]

_log = logging.getLogger("yeto_otel.anchors")
_ALIGNMENT_RECORD = ".storage_alignment"
# torch.serialization._save's parameters, as torch 2.15 has them.
_STEP_PARAMETERS = ("obj", "zip_file", "pickle_module", "pickle_protocol",
                    "_disable_byteorder_record")
_fallback_logged = False


def torch_save_step():
    """(torch's pickling step, its zip writer type) when this torch has them as expected,
    else None."""
    import torch
    import torch.serialization

    step = getattr(torch.serialization, "_save", None)
    writer = getattr(torch._C, "PyTorchFileWriter", None)
    if not callable(step) or writer is None:
        return None
    try:
        parameters = tuple(inspect.signature(step).parameters)
    except (TypeError, ValueError):
        return None
    return (step, writer) if parameters == _STEP_PARAMETERS else None


class _RecordedAlignment:
    """The zip writer as torch's pickling step sees it: its alignment record says what the
    writer does, whatever torch's setting is."""

    def __init__(self, writer, alignment: int):
        self._writer = writer
        self._alignment = str(alignment)
        self.recorded = False

    def write_record(self, name, data, size):
        if name == _ALIGNMENT_RECORD:
            data, size, self.recorded = self._alignment, len(self._alignment), True
        return self._writer.write_record(name, data, size)

    def __getattr__(self, name):
        return getattr(self._writer, name)


def _save_unaligned(obj, f, why: str) -> None:
    global _fallback_logged
    if not _fallback_logged:
        _fallback_logged = True
        _log.warning("anchor files are saved with torch's default layout, not page-aligned: "
                     "%s (logged once)", why)
    from torch.serialization import save  # torch.save may be wrapped by a caller

    save(obj, f)


def save_page_aligned(obj, f) -> None:
    """`torch.save(obj, f)` (`f` a writable binary file) with each storage on a page;
    `torch.serialization.skip_data` applies as to torch.save."""
    import torch.serialization

    found = torch_save_step()
    if found is None:
        _save_unaligned(obj, f, "this torch has no torch.serialization._save(obj, zip_file, "
                                "...) or torch._C.PyTorchFileWriter")
        return
    step, writer_type = found
    try:
        writer = writer_type(f, torch.serialization.get_crc32_options(), PAGE_BYTES)
    except TypeError as exc:  # the constructor's arguments changed; nothing was written
        _save_unaligned(obj, f, f"torch._C.PyTorchFileWriter refused an alignment ({exc})")
        return
    records = _RecordedAlignment(writer, PAGE_BYTES)
    try:
        step(obj, records, pickle, getattr(torch.serialization, "DEFAULT_PROTOCOL", 2), False)
    finally:
        # As torch's own opener does, failed or not: a writer left unfinished finishes the
        # file when it is collected, by then maybe closed, and aborts the process.
        writer.write_end_of_file()
    if not records.recorded:
        # A loader would look for the storages at torch's default alignment: refuse the file.
        raise RuntimeError(f"torch {torch.__version__} wrote no {_ALIGNMENT_RECORD} record "
                           "into the anchor file, so loaders would not find its page-aligned "
                           "storages; yeto-otel's anchors/_aligned_save.py needs updating")
    f.flush()
