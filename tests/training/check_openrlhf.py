"""OpenRLHF's own code on our files and flags (run inside the environment that has OpenRLHF).

    python check_openrlhf.py dataset JSONL TOKENIZER_DIR   -> JSON: rows, and whether each prompt+chosen /
                                                              prompt+rejected decodes to the full conversation
    python check_openrlhf.py parse FLAG...                 -> JSON: the arguments train_dpo parsed from FLAGs
flash-attn cannot be built without CUDA; OpenRLHF imports it at module level, so a stub stands in for it.
"""

import importlib.machinery
import json
import runpy
import sys
import types
from types import SimpleNamespace


def stub_flash_attn() -> None:
    for name in ["flash_attn", "flash_attn.bert_padding", "flash_attn.utils", "flash_attn.utils.distributed"]:
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        for attr in ["index_first_axis", "pad_input", "rearrange", "unpad_input", "all_gather"]:
            setattr(module, attr, None)
        sys.modules[name] = module


def check_dataset(path: str, tokenizer_dir: str) -> None:
    from openrlhf.datasets import RewardDataset
    from openrlhf.datasets.utils import blending_datasets
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    data = SimpleNamespace(prompt_key="prompt", chosen_key="chosen", rejected_key="rejected",
                           apply_chat_template=True, tokenizer_chat_template=None)
    strategy = SimpleNamespace(args=SimpleNamespace(data=data, use_ms=False), print=lambda *a: None,
                               is_rank_0=lambda: True)
    rows = blending_datasets(path, None, strategy)
    ds = RewardDataset(rows, tok, 4096, strategy, is_dpo=True, num_processors=1)
    whole = []
    for i in range(len(ds)):
        chosen_ids, _, rejected_ids, _, prompt_len = ds[i]
        row = rows[i]
        for ids, key in ((chosen_ids, "chosen"), (rejected_ids, "rejected")):
            text = tok.apply_chat_template(row["prompt"] + row[key], tokenize=False).rstrip("\n")
            whole.append(tok.decode(ids[0].tolist()) == text and prompt_len < ids.shape[1])
    print(json.dumps({"rows": len(ds), "whole": whole}))


def check_parse(flags: list[str]) -> None:
    import openrlhf.utils.config as config

    real = config.hierarchize

    def dump_and_stop(args):
        print(json.dumps(vars(args), default=str))
        real(args)  # the dotted names must also nest cleanly
        sys.exit(0)

    config.hierarchize = dump_and_stop
    sys.argv = ["train_dpo", *flags]
    runpy.run_module("openrlhf.cli.train_dpo", run_name="__main__")


if __name__ == "__main__":
    stub_flash_attn()
    if sys.argv[1] == "dataset":
        check_dataset(sys.argv[2], sys.argv[3])
    else:
        check_parse(sys.argv[2:])
