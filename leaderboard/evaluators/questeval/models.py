"""QuestEval's three T5 models (question generation, question answering, the weighter) as
the official code runs them (`API_T2T`, U:47-120), faster with the same outputs: inputs cut
at 512 tokens, greedy decoding to 20 decoder tokens (the default at the official pin
transformers 4.8.1, given explicitly here), texts decoded without special tokens; and from
the first decoding step, the probability of one token. That token comes from the model's
own tokenizer (the first piece of "unanswerable" for QA, of "true" for the weighter: 73 and
1176 hold for T5's vocabulary only).

Where the official code pads every input to 512 tokens and keeps the whole first-step
distribution of every generated question, batches here are sorted by length and padded to
their longest input, and only the wanted probability is kept.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.inference.generation import resolve_device, seq2seq_output_batches
from trainers.models.disk_cache import model_revision
from trainers.models.model_loading import load_seq2seq_safetensors

#: the official hub models (M:135-156)
QUESTION_GENERATOR = "ThomasNLG/t5-qg_squad1-en"
QUESTION_ANSWERER = "ThomasNLG/t5-qa_squad2neg-en"
WEIGHTER = "ThomasNLG/t5-weighter_cnndm-en"
MAX_INPUT_TOKENS = 512
#: decoder tokens, the start token included (transformers' default `max_length` at 4.8.1)
MAX_LENGTH = 20
UNANSWERABLE, TRUE = "unanswerable", "true"


@dataclass(frozen=True)
class Generated:
    text: str
    probability: float   # of the model's token at the first step (1 - it, for QA)
    top: float           # the highest first-step probability (the v0.1.1 weighter's)


def first_piece(tokenizer: Any, word: str, role: str) -> int:
    """The id of the first piece of `word` in the tokenizer's vocabulary; an error naming
    the model when the word has no piece of its own (only the unknown token)."""
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    if not ids or ids[0] == tokenizer.unk_token_id:
        raise SumbenchError(f"the {role}'s tokenizer has no piece for {word!r} (QuestEval "
                            f"reads the probability of its first piece): not a QuestEval "
                            f"{role}")
    return int(ids[0])


class T2TModel:
    """A seq2seq model answering batches of input strings greedily (see the module)."""

    def __init__(self, model: Any, tokenizer: Any, *, role: str, word: str | None,
                 batch_size: int = 48):
        self.model, self.tokenizer, self.batch_size = model.eval(), tokenizer, batch_size
        self.token = first_piece(tokenizer, word, role) if word else None

    def predict(self, inputs: Sequence[str], progress=None) -> list[Generated]:
        """One `Generated` per input, in input order (batches sorted by length)."""
        results: list[Generated | None] = [None] * len(inputs)
        for chosen, out in seq2seq_output_batches(
                self.model, self.tokenizer, inputs, batch_size=self.batch_size,
                max_input_tokens=MAX_INPUT_TOKENS, length_sorted=True, progress=progress,
                max_length=MAX_LENGTH, output_scores=True, return_dict_in_generate=True):
            texts = self.tokenizer.batch_decode(out.sequences, skip_special_tokens=True,
                                                clean_up_tokenization_spaces=True)
            first = out.scores[0].float().softmax(-1)
            wanted = first[:, self.token].tolist() if self.token is not None else \
                [0.0] * len(chosen)
            top = first.max(-1).values.tolist()
            for index, text, probability, best in zip(chosen, texts, wanted, top):
                results[index] = Generated(text, float(probability), float(best))
        return results  # type: ignore[return-value]


def load_t2t(name: str, *, role: str, word: str | None, batch_size: int,
             device: str = "auto") -> tuple[T2TModel, str]:
    """A model by hub id or folder (safetensors only), and its revision for cache keys."""
    model, tokenizer = load_seq2seq_safetensors(name, f"the QuestEval {role}")
    model.to(resolve_device(device))
    return T2TModel(model, tokenizer, role=role, word=word, batch_size=batch_size), \
        model_revision(name, model)
