"""A small DiLoCo-style trainer for tests/e2e/test_torchrun.py, launched by real
`torchrun --standalone --nproc_per_node=2` under `opentelemetry-instrument` (either way round).

argv: <workdir> <start method: fork, spawn or forkserver> <minimum seconds>

Each rank (gloo on CPU):
1. joins the process group and trains a tiny model for 2 epochs over a real DataLoader
   (num_workers=2, persistent_workers=False, the given multiprocessing_context), so every epoch
   starts 2 new worker processes; the dataset's `__getitem__` calls `torch.load` on a small file
   for index 0 (a `torch.load` span in a worker), and each sample says which worker made it.
   A sample takes a moment to make, so each worker lives a few export intervals: long enough
   for a forked copy of the rank's exporters to export, were they not the rank's alone;
2. ends each epoch with an outer sync: the pseudo-gradient (anchor - local) all_reduced and
   averaged, the outer step applied;
3. after the first sync, saves the new global weights as resume anchors and resumes from them
   once (`load_resume_anchors`, mapped: the `yeto.resume.anchors` span and the resume gauges);
4. keeps stepping (a short sleep per step) until <minimum seconds> have passed since it started,
   so the census exports several times, then syncs once more so both ranks end together;
5. writes <workdir>/rank-<RANK>.json: pid, when the process started, when this script started
   and ended (unix seconds), the worker processes seen per "<epoch>/<worker id>", and the
   resume's load mode.

Everything at module level is a definition: spawned and forkserver workers import this file as
`__mp_main__` (the dataset is pickled by reference to it).
"""

import json
import os
import sys
import time

STARTED = time.time()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

EPOCHS = 2
SAMPLES = 16
BATCH = 4
FEATURES = 8
OUTER_LR = 0.7
# The index whose __getitem__ calls torch.load: with the default sequential sampler it is in
# the first batch, which worker 0 makes, every epoch.
LOADING_INDEX = 0
# Time to make one sample: a worker makes SAMPLES / 2 per epoch, about 1.2 s.
SAMPLE_SECONDS = 0.15


class LoadingDataset(Dataset):
    """(features, target, worker pid, worker id) per index; index LOADING_INDEX reads its
    features from a small file with torch.load (in the worker)."""

    def __init__(self, sample_path: str):
        self.sample_path = sample_path
        generator = torch.Generator().manual_seed(0)
        self.features = torch.randn(SAMPLES, FEATURES, generator=generator)
        self.targets = self.features.sum(dim=1, keepdim=True)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int):
        info = torch.utils.data.get_worker_info()
        time.sleep(SAMPLE_SECONDS)
        features = self.features[index]
        if index == LOADING_INDEX:
            features = torch.load(self.sample_path, weights_only=True)
        return (features, self.targets[index], torch.tensor(os.getpid()),
                torch.tensor(-1 if info is None else info.id))


def process_started() -> float:
    """When this process started (unix seconds): its telemetry's lifetime begins there. From
    /proc/self/stat's start time (clock ticks since boot) against CLOCK_BOOTTIME now."""
    with open("/proc/self/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)


def outer_sync(model: torch.nn.Module, anchor: dict, world: int) -> None:
    """DiLoCo's outer step: average the pseudo-gradients (anchor - local) over the ranks and
    move the anchor by them; every rank ends with the same (new global) weights."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            delta = anchor[name] - param
            dist.all_reduce(delta)
            delta /= world
            anchor[name] -= OUTER_LR * delta
            param.copy_(anchor[name])


def main() -> int:
    workdir, start_method, min_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)

    sample_path = os.path.join(workdir, f"sample-rank-{rank}.pt")
    torch.save(torch.ones(FEATURES), sample_path)
    loader = DataLoader(LoadingDataset(sample_path), batch_size=BATCH, num_workers=2,
                        persistent_workers=False, multiprocessing_context=start_method)

    model = torch.nn.Linear(FEATURES, 1)
    inner = torch.optim.SGD(model.parameters(), lr=0.01)
    anchor = {name: p.detach().clone() for name, p in model.named_parameters()}
    workers: dict[str, set[int]] = {}
    load_mode = None
    for epoch in range(EPOCHS):
        for features, targets, pids, worker_ids in loader:
            loss = torch.nn.functional.mse_loss(model(features), targets)
            inner.zero_grad()
            loss.backward()
            inner.step()
            for pid, worker_id in zip(pids.tolist(), worker_ids.tolist()):
                workers.setdefault(f"{epoch}/{worker_id}", set()).add(pid)
        outer_sync(model, anchor, world)
        if epoch == 0:
            from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

            path = os.path.join(workdir, f"anchors-rank-{rank}.pt")
            save_resume_anchors(path, anchor)
            with load_resume_anchors(path) as resumed:
                load_mode = resumed.load_mode
                with torch.no_grad():
                    for i, (name, param) in enumerate(sorted(model.named_parameters())):
                        param.copy_(resumed.tensors[name])
                        resumed.fragment_done(i)

    steps = 0
    features = torch.randn(BATCH, FEATURES)
    while time.time() - STARTED < min_seconds:
        loss = model(features).square().mean()
        inner.zero_grad()
        loss.backward()
        inner.step()
        steps += 1
        time.sleep(0.05)
    outer_sync(model, anchor, world)
    dist.destroy_process_group()

    summary = {"rank": rank, "pid": os.getpid(), "process_started": process_started(),
               "started": STARTED, "ended": time.time(),
               "start_method": start_method, "steps": steps, "load_mode": load_mode,
               "workers": {key: sorted(pids) for key, pids in sorted(workers.items())}}
    with open(os.path.join(workdir, f"rank-{rank}.json"), "w") as handle:
        json.dump(summary, handle)
    print(f"rank {rank}: {json.dumps(summary)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
