"""Every span, span attribute and event yeto-otel emits, in one table.

Names are interfaces (dashboards and trace queries use them); code takes its names from here
and docs/spans.md is generated from it.
"""

from __future__ import annotations

from . import _exit_names
from ._exit_names import *  # noqa: F403  (the exit span is in the table too)
from ._exit_names import RANK_EXIT
from ._span_spec import Attr, EventSpec, SpanSpec

__all__ = [*_exit_names.__all__,
    "ANCHORS_ANONYMOUS_DELTA",
    "ANCHORS_BYTES_MAPPED",
    "ANCHORS_BYTES_TOUCHED",
    "ANCHORS_DTYPE",
    "ANCHORS_FILE_SIZE",
    "ANCHORS_FRAGMENTS_DONE",
    "ANCHORS_LOAD_MODE",
    "ANCHORS_PATH",
    "ANCHORS_BYTES_PREFETCHED",
    "ANCHORS_READAHEAD",
    "ANCHORS_RESIDENCY_ERROR",
    "ANCHORS_TENSOR_COUNT",
    "Attr",
    "DCP_ANONYMOUS_DELTA",
    "DCP_ASYNC_SAVE",
    "DCP_ASYNC_SAVE_UPLOAD",
    "DCP_BYTES_READ",
    "DCP_BYTES_WRITTEN",
    "DCP_FILES_READ",
    "DCP_FILES_WRITTEN",
    "DCP_ITEMS_READ",
    "DCP_ITEMS_WRITTEN",
    "DCP_LOAD",
    "DCP_LOAD_PLAN",
    "DCP_LOAD_READ",
    "DCP_PATH",
    "DCP_RANK",
    "DCP_RESIDENCY_ERROR",
    "DCP_SAVE",
    "DCP_SAVE_PLAN",
    "DCP_SAVE_WRITE",
    "DEMO_HELD_BYTES",
    "DEMO_LOSS",
    "DEMO_RELEASED",
    "DEMO_STEP",
    "DEMO_STEP_NUMBER",
    "EventSpec",
    "FRAGMENT_DONE",
    "FRAGMENT_ID",
    "RESUME_ANCHORS",
    "RESUME_ANCHORS_LOAD",
    "SAFETENSORS_ANONYMOUS_DELTA",
    "SAFETENSORS_BACKEND",
    "SAFETENSORS_BYTES_MAPPED",
    "SAFETENSORS_BYTES_TOUCHED",
    "SAFETENSORS_DATA_SIZE",
    "SAFETENSORS_DEVICE",
    "SAFETENSORS_FILE_SIZE",
    "SAFETENSORS_LOAD",
    "SAFETENSORS_LOAD_FILE",
    "SAFETENSORS_PATH",
    "SAFETENSORS_RESIDENCY_ERROR",
    "SAFETENSORS_SAFE_OPEN",
    "SAFETENSORS_TENSORS_READ",
    "SAFETENSORS_TENSOR_COUNT",
    "SPANS",
    "SpanSpec",
    "TORCH_LOAD",
    "TORCH_LOAD_BYTES_MAPPED",
    "TORCH_LOAD_FILE_SIZE",
    "TORCH_LOAD_MMAP",
    "TORCH_LOAD_PATH",
]


ANCHORS_PATH = Attr("yeto.anchors.path", "string", "Absolute path of the anchor file.")
ANCHORS_FILE_SIZE = Attr("yeto.anchors.file_size", "int (bytes)", "Size of the anchor file.")
ANCHORS_LOAD_MODE = Attr(
    "yeto.anchors.load_mode", "string",
    "`mmap` (mapped, the default), `eager` (read whole, YETO_DILOCO_RESUME_ANCHOR_MMAP=0) or "
    "`eager_fallback` (a legacy non-zip file that cannot be mapped, read whole with a warning).")
ANCHORS_DTYPE = Attr("yeto.anchors.dtype", "string",
                     "dtype the anchors were written in (`float32`, `bfloat16`, ...; `mixed`).")
ANCHORS_TENSOR_COUNT = Attr("yeto.anchors.tensor_count", "int", "Number of anchor tensors.")
ANCHORS_BYTES_MAPPED = Attr("yeto.anchors.bytes_mapped", "int (bytes)",
                            "Bytes of the file mapped into this process after the load (0 when "
                            "read eagerly).")
ANCHORS_BYTES_TOUCHED = Attr(
    "yeto.anchors.bytes_touched", "int (bytes)",
    "Pages of the mapping resident in this process when the block ends (from "
    "/proc/self/pagemap over the mapping's own range; equals smaps `Rss` for it). An upper "
    "bound on the bytes the resume read: the kernel maps around each fault. Measured on "
    "Linux 6.18 for every 8th of 1,869 shards (docs/performance.md): cold, 1.01x the bytes "
    "read (read-ahead `anchor`) or 1.13x (`kernel`: 64 KiB fault-around); warm, 4.85x, "
    "because a fault maps the whole large page-cache folio (up to 2 MiB) it hits, exactly as "
    "a plain mmap of the file does. Those pages were cached already: clean, reclaimable, no "
    "new memory. Eager: the bytes read.")
ANCHORS_ANONYMOUS_DELTA = Attr(
    "yeto.anchors.anonymous_delta", "int (bytes)",
    "This process's resident anonymous memory (/proc/self/status `RssAnon`) when the block "
    "ends minus before the load. It covers the whole block: whatever the catch-up allocates "
    "inside it counts too (about 16 MiB for 1,869 shards in docs/performance.md, none of it "
    "the anchors). Small when mapped; about the file size when read eagerly.")
ANCHORS_READAHEAD = Attr(
    "yeto.anchors.readahead", "string",
    "Mapped only: how the resume read the file (YETO_DILOCO_RESUME_ANCHOR_READAHEAD): `anchor` "
    "(each anchor's pages asked for at once when the catch-up first takes it), `kernel` (the "
    "kernel's read-around at each fault), `off` (`MADV_RANDOM`: only the faulting pages).")
ANCHORS_BYTES_PREFETCHED = Attr(
    "yeto.anchors.bytes_prefetched", "int (bytes)",
    "Readahead `anchor` only: bytes (whole pages) of the anchors the catch-up took, asked for "
    "with `MADV_WILLNEED` when it first took each. What a cold resume read from disk, about; "
    "compare with `yeto.anchors.bytes_touched`.")
ANCHORS_FRAGMENTS_DONE = Attr("yeto.anchors.fragments_done", "int",
                              "Fragments the catch-up reported done.")
ANCHORS_RESIDENCY_ERROR = Attr("yeto.anchors.residency_error", "string",
                               "Why bytes touched could not be measured (no /proc), if so.")
FRAGMENT_ID = Attr("yeto.fragment.id", "int or string", "The fragment the catch-up finished.")

FRAGMENT_DONE = EventSpec(
    "fragment_done", "The catch-up finished one fragment (`ResumeAnchors.fragment_done`).",
    (FRAGMENT_ID, Attr(ANCHORS_BYTES_TOUCHED.name, "int (bytes)", "Bytes touched so far.")))

RESUME_ANCHORS = SpanSpec(
    "yeto.resume.anchors",
    "The residency window of a resume's anchors: from `load_resume_anchors` until the `with` "
    "block ends (or `close()`). Current span inside the block. Status ERROR, with the "
    "exception recorded, when the load fails or the block raises.",
    (ANCHORS_PATH, ANCHORS_FILE_SIZE, ANCHORS_LOAD_MODE, ANCHORS_DTYPE, ANCHORS_TENSOR_COUNT,
     ANCHORS_BYTES_MAPPED, ANCHORS_BYTES_TOUCHED, ANCHORS_ANONYMOUS_DELTA,
     ANCHORS_READAHEAD, ANCHORS_BYTES_PREFETCHED, ANCHORS_FRAGMENTS_DONE,
     ANCHORS_RESIDENCY_ERROR),
    (FRAGMENT_DONE,))

RESUME_ANCHORS_LOAD = SpanSpec(
    "yeto.resume.anchors.load",
    "Child of `yeto.resume.anchors`: the load call itself (mode choice, torch.load, "
    "validation).", (ANCHORS_TENSOR_COUNT,))

TORCH_LOAD_PATH = Attr("yeto.torch_load.path", "string",
                       "Absolute path of the file loaded: the path passed to torch.load, or the "
                       "`name` of the open file passed (absent for a buffer, or a name that no "
                       "longer names that file).")
TORCH_LOAD_FILE_SIZE = Attr("yeto.torch_load.file_size", "int (bytes)",
                            "Size of that file (of an open file, from its descriptor; absent "
                            "for a buffer).")
TORCH_LOAD_MMAP = Attr("yeto.torch_load.mmap", "bool", "Whether torch.load was asked to map it.")
TORCH_LOAD_BYTES_MAPPED = Attr("yeto.torch_load.bytes_mapped", "int (bytes)",
                               "Bytes of the file mapped into this process after the call.")

TORCH_LOAD = SpanSpec(
    "torch.load",
    "Every `torch.load` call in the process, under `TorchLoadInstrumentor`. Status ERROR "
    "with the exception recorded when the call raises.",
    (TORCH_LOAD_PATH, TORCH_LOAD_FILE_SIZE, TORCH_LOAD_MMAP, TORCH_LOAD_BYTES_MAPPED))

SAFETENSORS_PATH = Attr("yeto.safetensors.path", "string", "Absolute path of the file.")
SAFETENSORS_FILE_SIZE = Attr("yeto.safetensors.file_size", "int (bytes)",
                             "Size of the file (absent when it cannot be stat'ed).")
SAFETENSORS_DATA_SIZE = Attr("yeto.safetensors.data_size", "int (bytes)",
                             "Length of the bytes given to `safetensors.torch.load`.")
SAFETENSORS_DEVICE = Attr("yeto.safetensors.device", "string",
                          "The `device` asked for (`cpu` unless given).")
SAFETENSORS_BACKEND = Attr(
    "yeto.safetensors.backend", "string",
    "How safetensors reads the file: `mmap` (the default, and the only way before "
    "safetensors 0.8) or `pread` (the caller's `backend=\"pread\"`).")
SAFETENSORS_TENSOR_COUNT = Attr(
    "yeto.safetensors.tensor_count", "int",
    "`load_file` / `load`: tensors returned. `safe_open`: tensors in the file's header.")
SAFETENSORS_TENSORS_READ = Attr(
    "yeto.safetensors.tensors_read", "int",
    "`safe_open` only: tensors read through the handle (`get_tensor` and `get_slice` calls, "
    "plus each tensor `get_tensors` returned). A count rather than an event per tensor: a "
    "model shard holds hundreds to thousands of tensors.")
SAFETENSORS_BYTES_MAPPED = Attr(
    "yeto.safetensors.bytes_mapped", "int (bytes)",
    "Bytes of the file mapped into this process when the span ends: every mapping of it, so "
    "earlier loads whose tensors are still alive count too. 0 for the `pread` backend.")
SAFETENSORS_BYTES_TOUCHED = Attr(
    "yeto.safetensors.bytes_touched", "int (bytes)",
    "Pages of those mappings resident in this process when the span ends (from "
    "/proc/self/pagemap; equals smaps `Rss` for them). `load_file` returns tensors that view "
    "the mapping, so this is what safetensors itself read, not what the trainer reads later. "
    "An upper bound on the bytes read: the kernel maps around each fault (64 KiB "
    "fault-around, or a whole large page-cache folio). Clean, reclaimable page cache.")
SAFETENSORS_ANONYMOUS_DELTA = Attr(
    "yeto.safetensors.anonymous_delta", "int (bytes)",
    "This process's resident anonymous memory (/proc/self/status `RssAnon`) when the span "
    "ends minus when it started: copies made by the load (`load`, the `pread` backend, "
    "dtype or device conversions), and anything else the process allocated meanwhile.")
SAFETENSORS_RESIDENCY_ERROR = Attr(
    "yeto.safetensors.residency_error", "string",
    "Why the mapping or the anonymous memory could not be measured (no /proc), if so. The "
    "load itself is not affected.")

_SAFETENSORS_RESIDENCY = (SAFETENSORS_BYTES_MAPPED, SAFETENSORS_BYTES_TOUCHED,
                          SAFETENSORS_ANONYMOUS_DELTA, SAFETENSORS_RESIDENCY_ERROR)

SAFETENSORS_LOAD_FILE = SpanSpec(
    "safetensors.load_file",
    "Every `safetensors.torch.load_file` call, under `SafetensorsInstrumentor`. Status ERROR "
    "with the exception recorded when the call raises.",
    (SAFETENSORS_PATH, SAFETENSORS_FILE_SIZE, SAFETENSORS_DEVICE, SAFETENSORS_BACKEND,
     SAFETENSORS_TENSOR_COUNT, *_SAFETENSORS_RESIDENCY))

SAFETENSORS_LOAD = SpanSpec(
    "safetensors.load",
    "Every `safetensors.torch.load(bytes)` call: no file, so nothing is mapped; the tensors "
    "are copies, and `anonymous_delta` is what they (and the call's scratch) added. Status "
    "ERROR with the exception recorded when the call raises.",
    (SAFETENSORS_DATA_SIZE, SAFETENSORS_TENSOR_COUNT, SAFETENSORS_ANONYMOUS_DELTA,
     SAFETENSORS_RESIDENCY_ERROR))

SAFETENSORS_SAFE_OPEN = SpanSpec(
    "safetensors.safe_open",
    "A `safetensors.safe_open` handle from the open until its `with` block exits (or, used "
    "without `with`, until the handle is garbage-collected). Not the current span inside "
    "the block. Status ERROR with the exception recorded when the open fails or the block "
    "raises. Opens made by `load_file` are inside its span and get none of their own.",
    (SAFETENSORS_PATH, SAFETENSORS_FILE_SIZE, SAFETENSORS_DEVICE, SAFETENSORS_BACKEND,
     SAFETENSORS_TENSOR_COUNT, SAFETENSORS_TENSORS_READ, *_SAFETENSORS_RESIDENCY))

DCP_PATH = Attr("yeto.dcp.path", "string",
                "The storage reader's or writer's checkpoint directory "
                "(`FileSystemReader.path`, `FileSystemWriter.path`), else the `checkpoint_id` "
                "passed to the load or save.")
DCP_RANK = Attr("yeto.dcp.rank", "int",
                "This process's rank in the default process group (absent without one).")
DCP_ITEMS_READ = Attr("yeto.dcp.items_read", "int",
                      "Read items in this rank's final load plan (tensor pieces and byte "
                      "objects).")
DCP_FILES_READ = Attr("yeto.dcp.files_read", "int",
                      "Distinct checkpoint files this rank's plan reads from (readers that "
                      "expose `storage_data`, such as `FileSystemReader`).")
DCP_BYTES_READ = Attr("yeto.dcp.bytes_read", "int (bytes)",
                      "Stored bytes of the items this rank reads (their lengths in the "
                      "checkpoint's `storage_data`; what `FileSystemReader` reads from disk).")
DCP_ITEMS_WRITTEN = Attr("yeto.dcp.items_written", "int",
                         "Write items in this rank's final save plan (tensor pieces and byte "
                         "objects).")
DCP_FILES_WRITTEN = Attr("yeto.dcp.files_written", "int",
                         "Distinct checkpoint files this rank wrote (the files its write "
                         "results name, as `FileSystemWriter`'s do; `.metadata` not counted).")
DCP_BYTES_WRITTEN = Attr(
    "yeto.dcp.bytes_written", "int (bytes)",
    "Stored bytes this rank wrote: the sum of its write results' `size_in_bytes` (with "
    "`FileSystemWriter`, each item's length in its file, serialization included; "
    "`.metadata` not counted).")
DCP_ANONYMOUS_DELTA = Attr(
    "yeto.dcp.anonymous_delta", "int (bytes)",
    "This process's resident anonymous memory (/proc/self/status `RssAnon`) when the call "
    "returns minus before it: the load's or save's own copies and scratch (for `async_save`, "
    "the staged copy of the state dict), plus anything other threads allocated meanwhile.")
DCP_RESIDENCY_ERROR = Attr("yeto.dcp.residency_error", "string",
                           "Why a reading could not be taken (no /proc, a reader without "
                           "`storage_data`, write results that name no file), if so.")

DCP_LOAD = SpanSpec(
    "dcp.load",
    "Every `torch.distributed.checkpoint.load` (also reached as `state_dict_loader.load`), "
    "one per rank per load, under `DcpInstrumentor`. Status ERROR with the exception recorded "
    "when the load raises.",
    (DCP_PATH, DCP_RANK, DCP_ITEMS_READ, DCP_FILES_READ, DCP_BYTES_READ, DCP_ANONYMOUS_DELTA,
     DCP_RESIDENCY_ERROR))

DCP_LOAD_PLAN = SpanSpec(
    "dcp.load.plan",
    "Child of `dcp.load`: from the start of the load until the storage reader is asked to "
    "read (metadata read, local and global planning, and the collectives between them).", ())

DCP_LOAD_READ = SpanSpec(
    "dcp.load.read",
    "Child of `dcp.load`: the storage reader's `read_data`, until its future completes. "
    "Status ERROR with the exception recorded when it raises. The `torch.load` that "
    "`FileSystemReader` makes for each item (on the calling thread) gets no `torch.load` "
    "span: the items are counted here instead.", (DCP_ITEMS_READ,))

DCP_SAVE = SpanSpec(
    "dcp.save",
    "Every `torch.distributed.checkpoint.save` (also reached as `state_dict_saver.save`), "
    "one per rank per save, under `DcpInstrumentor`. Status ERROR with the exception recorded "
    "when the save raises. The save an `async_save` runs in the background is a child of its "
    "`dcp.async_save.upload` span.",
    (DCP_PATH, DCP_RANK, DCP_ITEMS_WRITTEN, DCP_FILES_WRITTEN, DCP_BYTES_WRITTEN,
     DCP_ANONYMOUS_DELTA, DCP_RESIDENCY_ERROR))

DCP_SAVE_PLAN = SpanSpec(
    "dcp.save.plan",
    "Child of `dcp.save`: from the start of the save until the storage writer is asked to "
    "write (local and global planning and the collectives between them).", ())

DCP_SAVE_WRITE = SpanSpec(
    "dcp.save.write",
    "Child of `dcp.save`: the storage writer's `write_data`, until its future completes. "
    "Status ERROR with the exception recorded when it fails. The `.metadata` file the "
    "coordinator writes afterwards is in `dcp.save` only.",
    (DCP_ITEMS_WRITTEN, DCP_FILES_WRITTEN, DCP_BYTES_WRITTEN))

DCP_ASYNC_SAVE = SpanSpec(
    "dcp.async_save",
    "Every `torch.distributed.checkpoint.async_save` call, one per rank: the call itself "
    "(staging the state dict and handing the save to the background). Status ERROR with the "
    "exception recorded when the call raises.",
    (DCP_PATH, DCP_RANK, DCP_ANONYMOUS_DELTA, DCP_RESIDENCY_ERROR))

DCP_ASYNC_SAVE_UPLOAD = SpanSpec(
    "dcp.async_save.upload",
    "Child of `dcp.async_save`: from the call until the future it returns (or its "
    "`upload_completion`) completes, ended by the future's callback (nobody waits for it). "
    "Status ERROR with the exception recorded when the future fails. A future that never "
    "completes leaves this span unexported. The background save's `dcp.save` is its child "
    "(thread-based executor).", ())

DEMO_STEP_NUMBER = Attr("yeto.demo.step", "int", "Step number.")
DEMO_LOSS = Attr("yeto.demo.loss", "double", "The synthetic loss written to the step log.")
DEMO_HELD_BYTES = Attr("yeto.demo.held_bytes", "int (bytes)",
                       "Bytes the step holds (the sawtooth).")
DEMO_RELEASED = Attr("yeto.demo.released", "bool",
                     "Whether this step released what earlier steps held.")

DEMO_STEP = SpanSpec(
    "demo.step",
    "One training-like step of `yeto-otel demo` (tracer `yeto_otel.demo`): not emitted by the "
    "library, listed so the demo's traces are documented too.",
    (DEMO_STEP_NUMBER, DEMO_LOSS, DEMO_HELD_BYTES, DEMO_RELEASED))

SPANS: tuple[SpanSpec, ...] = (RESUME_ANCHORS, RESUME_ANCHORS_LOAD, TORCH_LOAD,
                               SAFETENSORS_LOAD_FILE, SAFETENSORS_LOAD, SAFETENSORS_SAFE_OPEN,
                               DCP_LOAD, DCP_LOAD_PLAN, DCP_LOAD_READ, DCP_SAVE, DCP_SAVE_PLAN,
                               DCP_SAVE_WRITE, DCP_ASYNC_SAVE, DCP_ASYNC_SAVE_UPLOAD,
                               RANK_EXIT, DEMO_STEP)
