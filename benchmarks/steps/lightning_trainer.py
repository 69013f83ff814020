"""PyTorch Lightning's own DDP launcher on the CPU (`python lightning_trainer.py`: Lightning starts
rank 1 itself), a step of a few milliseconds, as in Lightning's examples.

argv: <steps> <out dir>. Each rank writes its start-up, step times and resident memory.
"""

import os
import sys

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from steps.measure import StepClock, pin_to_local_rank  # noqa: E402

WARMUP = 30


class Timing(pl.Callback):
    def __init__(self, out: str):
        self.out, self.clock = out, StepClock(WARMUP)

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.clock.begin()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.clock.end()

    def on_train_end(self, trainer, module):
        self.clock.write(os.path.join(self.out, f"rank-{trainer.global_rank}.json"),
                         trainer.global_rank)


class Mlp(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):
        features, target = batch
        return torch.nn.functional.mse_loss(self.net(features), target)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    steps, out = int(sys.argv[1]), sys.argv[2]
    pin_to_local_rank()  # rank 1, which Lightning starts with LOCAL_RANK=1, on the other CPU
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(steps * 32, 64), torch.randn(steps * 32, 1))
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=steps,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[Timing(out)])
    trainer.fit(Mlp(), DataLoader(data, batch_size=32))
