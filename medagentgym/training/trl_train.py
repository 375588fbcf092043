"""SFT or DPO with TRL on build-sft-data's files; a script run by path inside the TRL environment.

It imports nothing from medagentgym (that environment need not have it installed). The trained model and its
tokenizer are saved as a Hugging Face directory in --output-dir, which the next stage takes as a model path.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("kind", choices=["sft", "dpo"])
    p.add_argument("--model", required=True, help="a Hugging Face model directory or hub id")
    p.add_argument("--ref-model", default=None, help="DPO reference; default: a frozen copy of --model")
    p.add_argument("--train-file", required=True)
    p.add_argument("--val-file", default=None)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--max-length", type=int, default=4096)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wandb", action="store_true", help="report to wandb (key from WANDB_API_KEY)")
    return p.parse_args(argv)


def load(path: str | None, columns: list[str]):
    from datasets import load_dataset

    if not path:
        return None
    kind = "parquet" if path.endswith(".parquet") else "json"
    ds = load_dataset(kind, data_files=path, split="train")
    # Provenance columns stay out of training; TRL would try to collate them.
    return ds.remove_columns([c for c in ds.column_names if c not in columns])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    common = dict(
        output_dir=args.output_dir,
        learning_rate=args.lr,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        max_length=args.max_length,
        seed=args.seed,
        logging_steps=1,
        save_strategy="no",
        report_to=["wandb"] if args.wandb else [],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
    )
    if args.kind == "sft":
        from trl import SFTConfig, SFTTrainer

        # Loss on the assistant turns only, as verl's multi-turn dataset does.
        config = SFTConfig(assistant_only_loss=True, **common)
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=load(args.train_file, ["messages"]),
            eval_dataset=load(args.val_file, ["messages"]),
            processing_class=tokenizer,
        )
    else:
        from trl import DPOConfig, DPOTrainer

        ref = AutoModelForCausalLM.from_pretrained(args.ref_model, dtype=torch.float32) if args.ref_model else None
        config = DPOConfig(beta=args.beta, label_smoothing=args.label_smoothing, **common)
        cols = ["prompt", "chosen", "rejected"]
        trainer = DPOTrainer(
            model=model,
            ref_model=ref,
            args=config,
            train_dataset=load(args.train_file, cols),
            eval_dataset=load(args.val_file, cols),
            processing_class=tokenizer,
        )
    result = trainer.train()
    trainer.save_model(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)
    print(f"trained {result.global_step} steps, loss {result.training_loss:.4f}; saved to {args.output_dir}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main(sys.argv[1:]))
