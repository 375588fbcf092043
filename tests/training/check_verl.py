"""Loads an SFT parquet in verl's own MultiTurnSFTDataset (run inside the verl environment).

    python check_verl.py PARQUET TOKENIZER_DIR  ->  prints JSON: rows, and per row whether the loss mask covers
    exactly the assistant turns (their content and end-of-turn marker, not the role header).
"""

import json
import sys

import pandas as pd
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


def main(parquet: str, tokenizer_dir: str) -> None:
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = OmegaConf.create({"messages_key": "messages", "max_length": 4096, "pad_mode": "no_padding",
                               "truncation": "error"})
    ds = MultiTurnSFTDataset(parquet, tok, config)
    frame = pd.read_parquet(parquet)
    exact = []
    for i in range(len(ds)):
        item = ds[i]  # runs verl's sanity check: per-turn tokens == whole-conversation tokens
        trained = tok.decode(item["input_ids"][item["loss_mask"].bool()].tolist())
        expected = "".join(m["content"] + "<|im_end|>\n" for m in frame["messages"][i] if m["role"] == "assistant")
        exact.append(trained == expected)
    print(json.dumps({"rows": len(ds), "loss_mask_exact": exact}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
