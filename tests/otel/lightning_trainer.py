"""A real PyTorch Lightning `Trainer.fit` on the CPU, stopped from outside with SIGTERM.

Lightning's signal connector installs its own SIGTERM handler at fit and calls the handler it
found after its own; the loop then raises SIGTERMException at the next step, which runs the
callbacks' `on_exception` and ends the process normally. Prints `fitting` once a few steps
have run, then `hook <name> ...` for each hook that runs.
"""

import time

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class Hooks(pl.Callback):
    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == 3:
            print("fitting", flush=True)

    def on_exception(self, trainer, module, exception):
        print(f"hook on_exception {type(exception).__name__}", flush=True)

    def on_train_end(self, trainer, module):
        print("hook on_train_end", flush=True)

    def teardown(self, trainer, module, stage):
        print(f"hook teardown {stage}", flush=True)


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        time.sleep(0.002)  # a step that takes a little time, as real ones do
        features, target = batch
        return torch.nn.functional.mse_loss(self.layer(features), target)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=10 ** 7, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[Hooks()])
    trainer.fit(Tiny(), DataLoader(data, batch_size=8))
    print("fit returned", flush=True)
