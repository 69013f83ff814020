"""The Hugging Face Trainer on the CPU with a tiny GPT-2 built here (nothing downloaded): `train`
runs 4 steps and saves a checkpoint at step 4; `resume` resumes from it
(`resume_from_checkpoint=True`) and runs to step 6. Launched by torchrun (several ranks) or by
`accelerate launch` (one process). Each process writes <out>/<phase>-<pid>.json with its rank,
pid and final loss.

argv: <out dir> <train|resume>
"""

import json
import os
import sys

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self, count: int = 64, length: int = 16):
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 64, (count, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def main() -> None:
    out, phase = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64,
                                       n_positions=32))
    args = TrainingArguments(output_dir=os.path.join(out, "checkpoints"),
                             max_steps=4 if phase == "train" else 6, save_steps=4,
                             per_device_train_batch_size=2, use_cpu=True, report_to=[],
                             logging_steps=1, disable_tqdm=True, seed=0,
                             dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens())
    result = trainer.train(resume_from_checkpoint=phase == "resume")
    with open(os.path.join(out, f"{phase}-{os.getpid()}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "rank": trainer.args.process_index,
                   "loss": result.training_loss, "env": {k: os.environ.get(k) for k in
                                                         ("RANK", "LOCAL_RANK")}}, f)
    # As a DDP job should end (the Trainer leaves its process group up): without it, gloo's
    # threads could still be running when the interpreter tears the group down at exit, and
    # the C++ runtime aborts the rank ("terminate called without an active exception").
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
