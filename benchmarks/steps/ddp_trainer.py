"""One rank of a small CPU training job under torchrun (gloo): a model wrapped in DDP, fed by a
DataLoader with 2 workers.

argv: <workload> <steps> <out dir> [step-log]. `transformer`: a 2-layer transformer encoder
(d_model 128) on 8 x 32 tokens; `mlp`: a 3-layer MLP on 32 x 64, a step of a few
milliseconds, as short as Lightning's examples. `step-log`: each step's record goes through
`add_census_to_step_log` (the census in it with YETO_DILOCO_HOST_MEM_CENSUS=1).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from steps.measure import StepClock, pin_to_local_rank  # noqa: E402

WARMUP = 30


class Synthetic(Dataset):
    def __init__(self, length: int, shape: tuple):
        self.length, self.shape = length, shape

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return torch.randn(self.shape, generator=generator), torch.randn(1, generator=generator)


def model_for(workload: str) -> tuple[torch.nn.Module, tuple]:
    if workload == "transformer":
        layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                                 batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        head = torch.nn.Linear(128, 1)
        return torch.nn.Sequential(encoder, Pool(), head), (32, 128)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                              torch.nn.ReLU(), torch.nn.Linear(64, 1))
    return mlp, (64,)


class Pool(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=1)


def main() -> None:
    workload, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    step_log = len(sys.argv) > 4 and sys.argv[4] == "step-log"
    pin_to_local_rank()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model, shape = model_for(workload)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    batch = 8 if workload == "transformer" else 32
    loader = DataLoader(Synthetic(steps * batch, shape), batch_size=batch, num_workers=2)
    if step_log:
        from yeto_otel import add_census_to_step_log
    clock, log = StepClock(WARMUP), open(os.devnull, "w")
    batches = iter(loader)
    for step in range(steps):
        clock.begin()  # a step as the loop sees it: its batch from the workers included
        features, target = next(batches)
        loss = torch.nn.functional.mse_loss(ddp(features), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        record = {"step": step, "loss": float(loss)}
        log.write(json.dumps(add_census_to_step_log(record) if step_log else record) + "\n")
        clock.end()
    clock.write(os.path.join(out, f"rank-{rank}.json"), rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
