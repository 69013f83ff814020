"""PyTorch Lightning DDP on the CPU (`devices=2, strategy="ddp"`). Under its own launcher, as
Lightning's docs run it (`python this.py ...`), the process started is rank 0 and Lightning
starts rank 1 itself (LOCAL_RANK=1, NODE_RANK=0, WORLD_SIZE=2, no RANK); under torchrun each
rank is torchrun's. `train` trains 20 steps and saves a checkpoint; `resume` resumes from it
(`ckpt_path`) to step 30. Each rank writes <out dir>/<phase>-<pid>.json with its global rank.

argv: <out dir> [train|resume]
"""

import json
import os
import sys

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    out = sys.argv[1]
    phase = sys.argv[2] if len(sys.argv) > 2 else "train"
    checkpoint = os.path.join(out, "last.ckpt")
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=4)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp",
                         max_steps=20 if phase == "train" else 30,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Tiny(), data, ckpt_path=checkpoint if phase == "resume" else None)
    if phase == "train":
        trainer.save_checkpoint(checkpoint)
    with open(os.path.join(out, f"{phase}-{os.getpid()}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "rank": trainer.global_rank,
                   "env": {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "NODE_RANK")}},
                  f)


if __name__ == "__main__":
    main()
