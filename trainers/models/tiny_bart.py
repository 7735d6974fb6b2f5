"""A tiny, locally built BART (tokenizer and model) for tests and benchmarks of the
BARTScore evaluator; nothing here touches the network.

The tokenizer is a byte-level BPE trained on the texts given, laid out as BART's own
(`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, `<mask>` 4; `<s> A </s>`; no prefix space) and
saved with it, so the official code's `BartTokenizer.from_pretrained`
loads the same folder that sumbench's `AutoTokenizer` does. The model is a randomly
initialised `BartForConditionalGeneration` (seeded) of a small config; `init_std` well above
BART's 0.02 spreads its next-token distributions, so that scores differ from pair to pair.
"""
from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path

from trainers.models.tiny import _seeded_init, build_tiny_roberta_tokenizer

#: published BART shapes (random weights in benchmarks); "tiny" is the test shape
BART_SHAPES = {
    "tiny": {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2,
             "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "max_position_embeddings": 64},
    "bart-base": {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6,
                  "encoder_attention_heads": 12, "decoder_attention_heads": 12,
                  "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072,
                  "max_position_embeddings": 1024, "vocab_size": 50265},
    "bart-large-cnn": {"d_model": 1024, "encoder_layers": 12, "decoder_layers": 12,
                       "encoder_attention_heads": 16, "decoder_attention_heads": 16,
                       "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096,
                       "max_position_embeddings": 1024, "vocab_size": 50264},
}


def build_tiny_bart_tokenizer(texts: Iterable[str], save_dir: str | Path,
                              vocab_size: int = 400, model_max_length: int = 1024):
    """A BART-layout byte-level BPE trained on `texts`, saved in `save_dir` (tokenizer.json
    and its config) and loaded back as `BartTokenizer`."""
    from transformers import BartTokenizer

    save_dir = Path(save_dir).resolve()
    save_dir.mkdir(parents=True, exist_ok=True)
    trained = build_tiny_roberta_tokenizer(texts, vocab_size=vocab_size,
                                           model_max_length=model_max_length)
    with tempfile.TemporaryDirectory() as folder:
        trained.backend_tokenizer.model.save(folder)  # vocab.json, merges.txt
        vocab = json.loads((Path(folder) / "vocab.json").read_text(encoding="utf-8"))
        merges = [tuple(line.split(" ")) for line in (Path(folder) / "merges.txt").read_text(
            encoding="utf-8").splitlines() if line and not line.startswith("#version")]
    tokenizer = BartTokenizer(vocab=vocab, merges=merges, model_max_length=model_max_length)
    tokenizer.save_pretrained(str(save_dir))
    return BartTokenizer.from_pretrained(str(save_dir))


def tiny_bart_config(vocab_size: int, shape: str = "tiny", init_std: float = 0.5,
                     positions: int | None = None):
    """A BartConfig of `shape` (BART_SHAPES) with BART's special ids, dropout 0, and
    `positions` positions when given (else the shape's)."""
    from transformers import BartConfig

    sizes = {"vocab_size": vocab_size, **BART_SHAPES[shape],
             **({"max_position_embeddings": positions} if positions else {})}
    return BartConfig(**sizes, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                      init_std=init_std, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                      decoder_start_token_id=2, forced_bos_token_id=0,
                      forced_eos_token_id=2)


def build_tiny_bart(tokenizer, save_dir: str | Path | None = None, seed: int = 0,
                    shape: str = "tiny", init_std: float = 0.5, positions: int | None = None):
    """A randomly initialised `BartForConditionalGeneration` (seeded, eval mode) for
    `tokenizer`'s vocabulary at `shape` (a published shape keeps its own vocabulary size),
    saved (safetensors) with the tokenizer when `save_dir` is given; `positions`: see
    `tiny_bart_config`."""
    from transformers import BartForConditionalGeneration

    config = tiny_bart_config(len(tokenizer), shape, init_std, positions)
    model = _seeded_init(seed, lambda: BartForConditionalGeneration(config)).eval()
    if save_dir is not None:
        model.save_pretrained(str(Path(save_dir).resolve()))
        tokenizer.save_pretrained(str(Path(save_dir).resolve()))
    return model
