"""Reading each anchor whole when the catch-up first takes it (`YETO_DILOCO_RESUME_ANCHOR_READAHEAD=anchor`).

On a cold page cache a mapped resume otherwise pays one synchronous read-around (a few hundred
KiB, partly beyond the anchor) per page fault. Asking for the anchor's pages at once
(`MADV_WILLNEED` over exactly its range) when `anchors.tensors[name]` hands it out makes one
read per anchor, of that anchor only: a third of the time and ~1.0x the bytes read instead of
~1.1x (docs/performance.md).

`PrefetchingAnchors` is a dict (code that checks for one still works) that advises on
`[name]` and `.get(name)`, the calls a catch-up takes one anchor with. Iteration, `items()`,
`values()`, `dict(anchors)` and `{**anchors}` use dict's own storage and advise nothing:
code that walks every anchor but reads a few must not read the whole file. Saved (`torch.save`,
pickle) or copied, it becomes an OrderedDict, as a state_dict is.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from ..proc import advise_will_need

__all__ = ["PrefetchingAnchors"]

_log = logging.getLogger("yeto_otel.anchors")


class PrefetchingAnchors(dict):
    """name -> mapped anchor tensor; the first `[name]` / `.get(name)` of each anchor asks
    the kernel for its pages. A refusal stops the prefetching (logged once); the catch-up
    goes on and faults its pages in as without it."""

    def __init__(self, tensors: dict, path: str):
        super().__init__(tensors)
        self._path = path
        self._advised: set = set()
        self.bytes_advised = 0
        self.failed = False

    def __getitem__(self, name):
        tensor = dict.__getitem__(self, name)
        if name not in self._advised and not self.failed:
            self._advised.add(name)
            self._prefetch(tensor)
        return tensor

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __reduce__(self):
        # Saved or copied, the anchors become an OrderedDict, as a state_dict is: a checkpoint
        # holding them must not name this class (torch.load's weights_only refuses it, and its
        # readers may lack yeto-otel), and weights_only accepts no other dict type by name.
        return (OrderedDict, (), None, None, iter(self.items()))

    def _prefetch(self, tensor) -> None:
        # Anchors are contiguous views; a strided one (a plain checkpoint's) would need its
        # whole storage advised, which may be much more than the catch-up reads: left to faults.
        if not tensor.is_contiguous() or tensor.device.type != "cpu":
            return
        try:
            self.bytes_advised += advise_will_need(tensor.data_ptr(),
                                                   tensor.numel() * tensor.element_size())
        except (OSError, ValueError) as exc:
            self.failed = True
            _log.warning("cannot prefetch the anchors of %s (the resume faults their pages in "
                         "as it reads them): %s", self._path, exc)
