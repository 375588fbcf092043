"""Builds a tiny random Qwen2 model and a locally trained byte-level BPE tokenizer with the Qwen2.5 chat template.

Run inside the TRL environment (model hubs are unreachable; TRL's wheel ships the real template):
    python tests/training/tiny_qwen.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import trl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "You solve clinical coding tasks. Reply with one JSON action.",
    "Compute the score for patient 12. Output: 7",
    '{"action": "validate_code", "params": {"code": "answer = 3"}}',
    "system user assistant tool import pandas as pd; SELECT COUNT(*) FROM patients;",
]


def main(out: Path) -> None:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=template
    )
    fast.save_pretrained(out)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
