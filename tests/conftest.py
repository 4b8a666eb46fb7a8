"""Shared test settings: never reach for a model hub (the model ships as a package); the
property tests' examples are the same on every run."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The property tests draw the same examples on every run ("ci", the default): a
# counterexample that a random draw happens upon must not block a landing at random (one
# did, December 6: NF4 on a block of float32 subnormals, a case the test itself got wrong).
# ``pytest --hypothesis-profile=explore`` draws new examples each run, to look for more.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("ci")


def write_tiny_llama(folder, hidden: int = 128, layers: int = 2, seed: int = 0):
    """A tiny random Llama (``transformers.LlamaConfig`` + ``save_pretrained``: the real
    loading code, a small model) with a byte-level BPE tokenizer trained on the project's
    calibration text, written into ``folder``; the folder."""
    from pathlib import Path

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from quant_core.mixed.texts import CALIBRATION_TEXT

    folder = Path(folder)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CALIBRATION_TEXT], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory):
    """A folder holding a tiny random Llama and its tokenizer (``write_tiny_llama``)."""
    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "tiny")
