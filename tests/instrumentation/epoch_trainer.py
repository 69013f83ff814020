"""A rank that runs epochs over a DataLoader with non-persistent workers (the default, so every
epoch starts and joins new workers), for the worker tests.

argv: <start method> <epochs> <data dir>. The dataset's `__getitem__` loads one small `.pt`
file per sample with `torch.load` (a per-sample load). Prints `epochs <seconds>` for the
epochs alone (after a first warm-up epoch that is not timed), then `trainer ran`.
"""

import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

method, epochs, data = sys.argv[1], int(sys.argv[2]), sys.argv[3]


class PerSampleFiles(Dataset):
    def __init__(self, directory: str, count: int = 8):
        self.paths = []
        for index in range(count):
            path = os.path.join(directory, f"sample-{index}.pt")
            if not os.path.exists(path):
                torch.save(torch.full((4,), float(index)), path)
            self.paths.append(path)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        return torch.load(self.paths[index])


if __name__ == "__main__":
    loader = DataLoader(PerSampleFiles(data), batch_size=4, num_workers=2,
                        multiprocessing_context=method, persistent_workers=False)
    total = sum(float(batch.sum()) for batch in loader)  # warm-up: imports, page cache
    started = time.monotonic()
    for _ in range(epochs):
        total += sum(float(batch.sum()) for batch in loader)
    print(f"epochs {time.monotonic() - started:.3f}", flush=True)
    print("trainer ran", flush=True)
