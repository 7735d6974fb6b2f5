"""The official AutoACU package's own code (`autoacu==0.1.0` from PyPI, installed without its
pins: `pip install --no-deps --target DIR autoacu==0.1.0`; SUMBENCH_AUTOACU_OFFICIAL names DIR),
runnable here on local models: what tests/leaderboard/test_acu_official.py checks
leaderboard.evaluators.acu against, and the baseline arm of bench/acu_speed.py.

Only what cannot load here is shimmed:
- the tokenizers, which the package loads by hard-coded hub names with SentencePiece's and
  GPT-2's classes (`bigscience/T0_3B`, `microsoft/deberta-xlarge-mnli`): the local tiny
  tokenizers, loaded by AutoTokenizer;
- the CUDA device A2CU's matching moves its batches to whatever its device (a2cu.py:168-169):
  `Tensor.to("cuda:<device>")` goes to `<device>` while the official code runs;
- A3CU's `BertClassifier` never calls `post_init()`, which transformers 5's `from_pretrained`
  needs: it is called after the class's own `__init__`;
- GitHub HEAD's generation (`head=True`): 0.1.0's `acu_generation` with `min_length` dropped
  and each text's units put through `list(set(...))`, HEAD's only two changes (f3aca1f).

It also builds the tiny models both sides run: a T5 generator over a locally trained
tokenizer, whose `|||` row is raised so that some texts get several (and repeated) units; a
DeBERTa classifier whose entailment probabilities fall on both sides of 0.5; and a BERT with
A3CU's linear head, its outputs spread."""
from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

ENV = "SUMBENCH_AUTOACU_OFFICIAL"
REQUIRE_ENV = "SUMBENCH_REQUIRE_AUTOACU"
HUB_TOKENIZERS = ("bigscience/T0_3B", "microsoft/deberta-xlarge-mnli")
DEBERTA_SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")


def official_folder() -> Path | None:
    """The folder the official package is installed in (SUMBENCH_AUTOACU_OFFICIAL when set,
    else the repository's .ci-autoacu), or None."""
    folder = Path(os.environ.get(ENV) or Path(__file__).resolve().parents[1] / ".ci-autoacu")
    return folder if (folder / "autoacu" / "a2cu.py").is_file() else None


def _head_generation(original):
    """0.1.0's acu_generation as GitHub HEAD has it: no min_length, units through set()."""
    def generation(self, ref_path, output_path, batch_size):
        generate = self.generation_model.generate

        def without_min_length(*args, **kwargs):
            kwargs.pop("min_length", None)
            return generate(*args, **kwargs)
        with mock.patch.object(self.generation_model, "generate", without_min_length):
            acus = [list(set(units)) for units in original(self, ref_path, output_path,
                                                          batch_size)]
        import json

        Path(output_path).write_text("".join(json.dumps({"acus": units}) + "\n"
                                             for units in acus))
        return acus
    return generation


@contextlib.contextmanager
def official_autoacu(folder: Path, tokenizers: dict[str, Path], device: str = "cpu",
                     head: bool = False) -> Iterator:
    """The official `autoacu` module, shimmed (see the module docstring). `tokenizers`: hub
    name -> local folder."""
    import torch
    from transformers import AutoTokenizer

    def tokenizer_from(name, *args, **kwargs):
        return AutoTokenizer.from_pretrained(str(tokenizers.get(name, name)))

    original_to = torch.Tensor.to

    def to(tensor, *args, **kwargs):
        if args and isinstance(args[0], str) and args[0].startswith("cuda:"):
            args = (args[0].split(":", 1)[1], *args[1:])
        return original_to(tensor, *args, **kwargs)

    with contextlib.ExitStack() as stack:
        sys.path.insert(0, str(folder))
        stack.callback(sys.path.remove, str(folder))
        stack.enter_context(mock.patch.dict(sys.modules))  # restored: no autoacu left
        for name in [name for name in sys.modules if name.startswith("autoacu")]:
            del sys.modules[name]
        import autoacu
        import autoacu.a2cu as a2cu
        import autoacu.a3cu as a3cu

        loader = type("Tokenizer", (), {"from_pretrained": staticmethod(tokenizer_from)})
        for module, name in ((a2cu, "T5Tokenizer"), (a2cu, "DebertaTokenizer")):
            stack.enter_context(mock.patch.object(module, name, loader))
        stack.enter_context(mock.patch.object(torch.Tensor, "to", to))
        init = a3cu.BertClassifier.__init__

        def init_then_post_init(self, config):
            init(self, config)
            self.post_init()
        stack.enter_context(mock.patch.object(a3cu.BertClassifier, "__init__",
                                              init_then_post_init))
        if head:
            stack.enter_context(mock.patch.object(
                a2cu.A2CU, "acu_generation", _head_generation(a2cu.A2CU.acu_generation)))
        yield autoacu


# ---- the tiny models both sides run ----------------------------------------------------------
#: the tiny generator's output row of " |||" is scaled by this: some texts get runs of it
SEPARATOR_SCALE = 3.0
#: the tiny generator's configured length (it overrides the official `max_length=512`, which a
#: random model would fill)
NEW_TOKENS = 12


def build_generator(texts: Sequence[str], folder: Path, seed: int = 0, **shape) -> Path:
    """A tiny T5 over a tokenizer trained on `texts` (`|||` one token), saved in `folder`,
    writing NEW_TOKENS tokens, some of them runs of `|||` (repeated units for HEAD's set)."""
    import torch

    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer([*texts, "a ||| b ||| c"] * 2, vocab_size=400,
                                     whole_words=("|||",))
    model = build_tiny_t5(tokenizer, seed=seed, **{"d_model": 32, **shape})
    with torch.no_grad():
        model.lm_head.weight[tokenizer.convert_tokens_to_ids(" |||")] *= SEPARATOR_SCALE
    model.generation_config.max_new_tokens = NEW_TOKENS
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_deberta_tokenizer(texts: Sequence[str], vocab_size: int = 600):
    """A byte-level BPE trained on `texts` with DeBERTa's special tokens ([CLS] A [SEP])."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  special_tokens=list(DEBERTA_SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    backend.train_from_iterator(list(texts), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        unk_token="[UNK]", mask_token="[MASK]", model_max_length=512,
        clean_up_tokenization_spaces=False)


#: DeBERTa v1 shapes: the test's, and the real classifier's (deberta-xlarge-mnli) and smaller
DEBERTA_SHAPES = {
    "tiny": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64},
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "vocab_size": 50265},
    "large": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "intermediate_size": 4096, "vocab_size": 50265},
    "xlarge": {"hidden_size": 1024, "num_hidden_layers": 48, "num_attention_heads": 16,
               "intermediate_size": 4096, "vocab_size": 50265},
}


def spread_head(model, head, batches: Sequence[dict], row: int, offset: float = 0.0,
                split: bool = False) -> None:
    """Point output `row` of the linear layer `head` along the first direction in which its
    inputs vary over `batches` (model inputs); the other rows become 0. A random model's
    outputs barely move from input to input: every A2CU label would be the same, every A3CU
    score equal. Without `split`: about 3 per standard deviation, the median at `offset`. With
    `split`: the widest gap between neighbouring inputs in the middle half is put at `offset`
    and scaled to 6, so that no input sits within rounding of `offset` (a threshold there)."""
    import torch

    seen = []
    hook = head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    with torch.no_grad():
        for batch in batches:
            model(**batch)
        hook.remove()
        states = torch.cat(seen)
        direction = states[0] - states.mean(0)
        direction = direction / direction.norm()
        projections = states @ direction
        centre, scale = projections.median(), 3.0 / projections.std().clamp_min(1e-6)
        if split:
            ordered = projections.sort().values
            low, high = len(ordered) // 4, max(len(ordered) * 3 // 4, len(ordered) // 4 + 1)
            gaps = ordered[low + 1:high + 1] - ordered[low:high]
            widest = low + int(gaps.argmax())
            centre = (ordered[widest] + ordered[widest + 1]) / 2
            scale = 6.0 / gaps.max().clamp_min(1e-6)
        head.weight.zero_()
        head.bias.zero_()
        head.weight[row] = direction * scale
        head.bias[row] = offset - float(centre * scale)


def pair_batches(tokenizer, pairs: Sequence[tuple[str, str]]) -> list[dict]:
    """One model input per (first, second) pair: `[CLS] first [SEP] second [SEP]`, types 0 then
    1, as both metrics build them."""
    import torch

    batches = []
    for first, second in pairs:
        a = tokenizer(first, add_special_tokens=False)["input_ids"]
        b = tokenizer(second, add_special_tokens=False)["input_ids"]
        ids = [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id]
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        batches.append({"input_ids": torch.tensor([ids]), "token_type_ids": torch.tensor([types]),
                        "attention_mask": torch.ones(1, len(ids), dtype=torch.long)})
    return batches


def build_classifier(tokenizer, folder: Path, seed: int = 0, shape: str = "tiny",
                     pairs: Sequence[tuple[str, str]] = ()) -> Path:
    """A DeBERTa (v1, relative attention, token types used) 3-way classifier, saved with
    `tokenizer` in `folder`; with `pairs` (text, unit), its entailment output is spread so that
    its probability falls on both sides of 0.5 over them."""
    from transformers import DebertaConfig, DebertaForSequenceClassification

    from trainers.models.tiny import _seeded_init

    sizes = {"vocab_size": len(tokenizer), **DEBERTA_SHAPES[shape]}
    config = DebertaConfig(
        **sizes, max_position_embeddings=512, relative_attention=True,
        pos_att_type=["c2p", "p2c"], max_relative_positions=-1, position_biased_input=False,
        type_vocab_size=2, num_labels=3, pad_token_id=tokenizer.pad_token_id,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = _seeded_init(seed, lambda: DebertaForSequenceClassification(config)).eval()
    if pairs:  # p(entailment) = e^z / (e^z + 2) is 0.5 at z = ln 2
        spread_head(model, model.classifier, pair_batches(tokenizer, pairs), 2, math.log(2),
                    split=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_a3cu(texts: Sequence[str], folder: Path, seed: int = 0,
               pairs: Sequence[tuple[str, str]] = ()) -> Path:
    """A tiny BERT with A3CU's linear head and a WordPiece tokenizer trained on `texts`; with
    `pairs`, the head is spread over them (scores of about -1 to 5); a larger initial range
    than BERT's, so that the states vary well above float rounding."""
    from leaderboard.evaluators.acu.models import linear_head_bert_class
    from trainers.models.tiny import _seeded_init, build_tiny_bert_encoder

    build_tiny_bert_encoder(texts, folder, seed=seed)
    from transformers import BertConfig

    config = BertConfig.from_pretrained(folder)
    config.type_vocab_size, config.initializer_range = 2, 0.5
    model = _seeded_init(seed, lambda: linear_head_bert_class()(config)).eval()
    if pairs:
        from transformers import AutoTokenizer

        spread_head(model, model.linear, pair_batches(AutoTokenizer.from_pretrained(folder),
                                                      pairs), 0, offset=2.0)
    model.save_pretrained(folder)
    return folder
