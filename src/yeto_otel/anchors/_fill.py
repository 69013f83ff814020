"""Writing the anchors' bytes straight into the file that torch.save laid out.

The file is written in two passes: `torch.save` under `skip_data` writes the zip layout (headers,
index, page-aligned room for each storage) without any storage bytes, then each anchor's bytes
are written with pwrite(2) at its place in the file, and each storage's CRC-32 (which
`skip_data` leaves at zero) is set in its zip records. The anchors are read once and written
once, into page cache, as `torch.save` itself does; nothing is staged in a copy of the anchors
(no anonymous memory, no second file). Only an anchor that has to change dtype, device or
layout on the way goes through a bounded buffer (`CONVERT_CHUNK_BYTES`).
"""

from __future__ import annotations

import os
import zlib

from opentelemetry.instrumentation.utils import suppress_instrumentation

from ._zip_crc import set_crcs

__all__ = ["CONVERT_CHUNK_BYTES", "fill_storages", "placeholder_storages", "storage_bytes"]

CONVERT_CHUNK_BYTES = 4 << 20
_ZEROS = bytes(1 << 16)


def _element_size(dtype) -> int:
    import torch

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return torch.empty((), dtype=dtype).element_size()


def storage_bytes(totals: dict[str, int]) -> int:
    return sum(elements * _element_size(dtype) for dtype, elements in totals.items())


def placeholder_storages(totals: dict[str, int]) -> dict:
    """One flat tensor per dtype (dtype name -> tensor) for `torch.save` to lay out under
    `skip_data`. Never read or written: its pages are never touched, so it costs address
    space only, not memory."""
    import torch

    return {dtype: torch.empty(elements, dtype=getattr(torch, dtype))
            for dtype, elements in totals.items()}


class _Writer:
    """Sequential writes at increasing file offsets, with the running CRC-32 of what was
    written (holes between writes count as the zeros they read as)."""

    def __init__(self, fd: int, offset: int):
        self.fd, self.offset, self.crc = fd, offset, 0

    def skip_to(self, offset: int) -> None:
        while self.offset < offset:
            gap = min(offset - self.offset, len(_ZEROS))
            self.crc = zlib.crc32(memoryview(_ZEROS)[:gap], self.crc)
            self.offset += gap

    def write(self, tensor) -> None:
        """Write the bytes of a contiguous CPU tensor (no copy)."""
        import torch

        view = memoryview(tensor.reshape(-1).view(torch.uint8).numpy())
        self.crc = zlib.crc32(view, self.crc)
        while view:
            written = os.pwrite(self.fd, view, self.offset)
            view, self.offset = view[written:], self.offset + written


def _write_tensor(writer: _Writer, tensor, dtype) -> None:
    """Write `tensor` as `dtype`, flattened, at the writer's offset."""
    source = tensor.detach()
    if source.numel() == 0:
        return
    if (source.dtype == dtype and source.device.type == "cpu" and source.is_contiguous()
            and not source.is_neg() and not source.is_conj()):
        writer.write(source)
        return
    # Converted in bounded pieces: whole rows at a time (a strided tensor cannot be flattened
    # without copying all of it), a vector in slices.
    rows = source.reshape(-1, 1) if source.dim() <= 1 else source
    row_bytes = max(1, rows[0].numel() * _element_size(dtype))
    step = max(1, CONVERT_CHUNK_BYTES // row_bytes)
    for start in range(0, rows.shape[0], step):
        writer.write(rows[start:start + step].to(device="cpu", dtype=dtype).contiguous())


def _file_offset(tensor) -> int:
    return tensor.untyped_storage()._checkpoint_offset


def fill_storages(fd: int, path: str, content: dict, tensors, layout) -> None:
    """Write the storage bytes of `content` (the payload saved under `skip_data` into the file
    at `path`, open for writing at `fd`): the anchors `tensors` at their `layout` places in the
    flat storages, and the index tensors as they are; then their CRC-32s. Where each storage
    lies in the file is torch's own answer (a load onto the meta device records each
    storage's file offset)."""
    import torch

    # Not a checkpoint load the trainer made: no `torch.load` span for it.
    with suppress_instrumentation():
        laid_out = torch.load(path, map_location="meta", weights_only=True)
    crcs = {}
    for key, value in content.items():
        if isinstance(value, torch.Tensor) and value.numel():
            writer = _Writer(fd, _file_offset(laid_out[key]))
            writer.write(value.contiguous())
            crcs[_file_offset(laid_out[key])] = writer.crc
    writers = {dtype: _Writer(fd, _file_offset(flat))
               for dtype, flat in laid_out["storages"].items() if flat.numel()}
    starts = {dtype: writer.offset for dtype, writer in writers.items()}
    for source, dtype, element in zip(tensors.values(), layout.dtypes, layout.offsets):
        if source.numel():
            writer = writers[dtype]
            writer.skip_to(starts[dtype] + element * _element_size(dtype))
            _write_tensor(writer, source, getattr(torch, dtype))
    for dtype, writer in writers.items():
        writer.skip_to(starts[dtype] + storage_bytes({dtype: layout.totals[dtype]}))
        crcs[starts[dtype]] = writer.crc
    set_crcs(fd, path, crcs)
