"""The demo's synthetic resume anchors: shard sizes like a model's, tensors made on demand, and
the fragments the syncer moved past while the island was down."""

from __future__ import annotations

import random
from collections.abc import Mapping

__all__ = [
    "FP32_BYTES",
    "FRAGMENTS",
    "FRAGMENTS_BEHIND",
    "PAGE",
    "SyntheticAnchors",
    "anchor_file_estimate",
    "fragments_behind",
    "shard_sizes",
]

FRAGMENTS = 32  # the model's shards are synced in 32 fragments ...
FRAGMENTS_BEHIND = 4  # ... and the syncer moved 4 of them (1/8 of the shards) past the anchors
FP32_BYTES = 4
PAGE = 4096


def shard_sizes(total_elements: int, shards: int, seed: int) -> list[int]:
    """Element counts of `shards` shards of varied sizes (log-normal, like a model's matrices,
    embeddings and norms) summing exactly to `total_elements`."""
    rng = random.Random(seed)
    weights = [rng.lognormvariate(0.0, 1.5) for _ in range(shards)]
    scale = (total_elements - shards) / sum(weights)
    counts = [1 + int(w * scale) for w in weights]
    counts[max(range(shards), key=counts.__getitem__)] += total_elements - sum(counts)
    return counts


def anchor_file_estimate(counts: list[int]) -> int:
    """Bytes the saved file will take: each shard starts on a page, plus room for the archive's
    own records. Used to check the disk before anything is written."""
    return sum(-(-c * FP32_BYTES // PAGE) * PAGE for c in counts) + (1 << 20)


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
