"""A2CU's computation, as `autoacu==0.1.0:autoacu/a2cu.py` does it (line numbers below are that
file's), on any device and without its temporary files:

- units (46-99): each text stripped, at most 256 tokens with the tokenizer's special tokens,
  beam search (4 beams, `max_length=512`, `length_penalty=1.0`, `early_stopping=True`, and in
  the PyPI variant `min_length=10`), decoded with special tokens skipped and no clean-up,
  split on `|||`. GitHub HEAD's variant (f3aca1f, a2cu.py:85-95) passes no `min_length` and
  keeps each distinct unit once (its `list(set(...))`; the order, which a set does not keep,
  cannot change a mean).
- matching (135-198): `[CLS] text [SEP] unit [SEP]`, the text at most 200 tokens and the unit
  at most 100 (no special tokens), token types 0 for `[CLS] text [SEP]` and 1 after, the
  attention mask `ids != pad`; a unit is found when the softmax's label 2 (entailment) is
  above 0.5; a text's score is the share of its units found.
- recall: the reference's units checked against the summary; precision: the summary's units
  checked against the reference (255-289).

What differs is only how the work is done: each distinct text's units are generated once and
kept (meta-eval scores many systems against the same references), each distinct
(text, unit) pair is classified once, and pairs go through the classifier longest first, in
batches that padding fills to at most a fifth (leaderboard.evaluators.batching; the official
code runs them in the given order, one per batch by default)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leaderboard.evaluators.acu.models import ENTAILMENT
from leaderboard.evaluators.batching import filled_batches

#: what the generator reads of a text, and what the classifier reads of a text and of a unit
SOURCE_TOKENS, TEXT_TOKENS, UNIT_TOKENS = 256, 200, 100
SEPARATOR = "|||"
#: the generation settings both variants share (a2cu.py:85-93)
GENERATION = {"max_length": 512, "num_beams": 4, "length_penalty": 1.0, "early_stopping": True}
#: a bounded cache is emptied when it would hold more than this many entries (a worker's
#: memory stays flat): units and verdicts, and the token ids of texts (longer entries)
CACHE_LIMIT, TOKEN_CACHE_LIMIT = 200_000, 20_000


@dataclass(frozen=True)
class Variant:
    """Which AutoACU generation: `min_length` passed to generate (None: not passed) and
    whether each text's units are de-duplicated."""
    name: str
    min_length: int | None
    deduplicate: bool


VARIANTS = {"pypi": Variant("pypi", 10, False), "head": Variant("head", None, True)}


class BoundedCache(dict):
    """A dict emptied before it would grow past `limit` entries."""

    def __init__(self, limit: int = CACHE_LIMIT):
        super().__init__()
        self.limit = limit

    def store(self, items) -> None:
        items = list(items)
        if len(self) + len(items) > self.limit:
            self.clear()
        self.update(items)


def padded(rows: Sequence[Sequence[int]], pad_id: int, device):
    """The rows right-padded with `pad_id` into one long tensor on `device`."""
    import torch

    width = max(len(row) for row in rows)
    return torch.tensor([list(row) + [pad_id] * (width - len(row)) for row in rows],
                        dtype=torch.long, device=device)


def pair_row(tokenizer, first: Sequence[int], second: Sequence[int]
             ) -> tuple[list[int], list[int]]:
    """(token ids, token types) of `[CLS] first [SEP] second [SEP]` (BERT's pair layout)."""
    ids = [tokenizer.cls_token_id, *first, tokenizer.sep_token_id, *second,
           tokenizer.sep_token_id]
    return ids, [0] * (len(first) + 2) + [1] * (len(second) + 1)


def pair_batch(rows: Sequence[tuple[list[int], list[int]]], pad_id: int, device) -> tuple:
    """(ids, attention mask, token types) tensors of `pair_row` rows, right-padded."""
    ids = padded([row[0] for row in rows], pad_id, device)
    return ids, ids != pad_id, padded([row[1] for row in rows], 0, device)


def chunks(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]


class UnitWriter:
    """The generator's units of texts, each distinct text generated once (kept in `cache`)."""

    def __init__(self, model, tokenizer, variant: Variant, batch_size: int = 1):
        self.model, self.tokenizer, self.variant = model, tokenizer, variant
        self.batch_size, self.cache = batch_size, BoundedCache()

    def units(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        texts = [text.strip() for text in texts]
        todo = [text for text in dict.fromkeys(texts) if text not in self.cache]
        inputs = {text: self.tokenizer(text, add_special_tokens=True, truncation=True,
                                       max_length=SOURCE_TOKENS)["input_ids"] for text in todo}
        todo.sort(key=lambda text: len(inputs[text]), reverse=True)
        written = {}
        for batch in chunks(todo, self.batch_size):
            written.update(zip(batch, self._generate([inputs[text] for text in batch])))
        self.cache.store(written.items())
        return [written[text] if text in written else self.cache[text] for text in texts]

    def _generate(self, rows: Sequence[Sequence[int]]) -> list[tuple[str, ...]]:
        import torch

        pad_id = self.tokenizer.pad_token_id
        ids = padded(rows, pad_id, self.model.device)
        settings = dict(GENERATION)
        if self.variant.min_length is not None:
            settings["min_length"] = self.variant.min_length
        with torch.inference_mode():
            outputs = self.model.generate(input_ids=ids, attention_mask=ids != pad_id,
                                          **settings)
        texts = [self.tokenizer.decode(output, skip_special_tokens=True,
                                       clean_up_tokenization_spaces=False) for output in outputs]
        return [self.split(text) for text in texts]

    def split(self, text: str) -> tuple[str, ...]:
        units = text.split(SEPARATOR)
        return tuple(dict.fromkeys(units)) if self.variant.deduplicate else tuple(units)


class UnitMatcher:
    """The classifier's verdict (1 found, 0 not) on (text, unit) pairs, each distinct pair
    classified once (kept in `cache`)."""

    def __init__(self, model, tokenizer, batch_size: int = 32):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.cache, self.token_ids = BoundedCache(), BoundedCache(TOKEN_CACHE_LIMIT)

    def labels(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        pairs = [(text.strip(), unit.strip()) for text, unit in pairs]
        todo = [pair for pair in dict.fromkeys(pairs) if pair not in self.cache]
        rows = {pair: self.pair_input(*pair) for pair in todo}
        todo.sort(key=lambda pair: len(rows[pair][0]), reverse=True)
        found = {}
        for batch in filled_batches(todo, lambda pair: (len(rows[pair][0]),), self.batch_size):
            found.update(zip(batch, self.entailed([rows[pair] for pair in batch])))
        self.cache.store(found.items())
        return [found[pair] if pair in found else self.cache[pair] for pair in pairs]

    def ids(self, text: str, limit: int) -> list[int]:
        key = (text, limit)
        found = self.token_ids.get(key)
        if found is None:
            found = self.tokenizer(text, add_special_tokens=False, truncation=True,
                                   max_length=limit)["input_ids"]
            self.token_ids.store([(key, found)])
        return found

    def pair_input(self, text: str, unit: str) -> tuple[list[int], list[int]]:
        """(token ids, token types) of `[CLS] text [SEP] unit [SEP]`."""
        return pair_row(self.tokenizer, self.ids(text, TEXT_TOKENS), self.ids(unit, UNIT_TOKENS))

    def entailed(self, rows: Sequence[tuple[list[int], list[int]]]) -> list[int]:
        import torch

        batch = pair_batch(rows, self.tokenizer.pad_token_id, self.model.device)
        with torch.inference_mode():
            logits = self.model(*batch, return_dict=True).logits
        probabilities = torch.softmax(logits, dim=1)
        return (probabilities[:, ENTAILMENT] > 0.5).long().tolist()


def unit_recall(matcher: UnitMatcher, texts: Sequence[str],
                units: Sequence[Sequence[str]]) -> list[float]:
    """Per text, the share of its units (`units[i]`, at least one each) the classifier finds
    in it."""
    pairs = [(text, unit) for text, text_units in zip(texts, units) for unit in text_units]
    labels = iter(matcher.labels(pairs))
    return [sum(float(next(labels)) for _ in text_units) / len(text_units)
            for text_units in units]


def f1(recall: float, precision: float) -> float:
    """AutoACU's F1 (a2cu.py:280, a3cu.py:128)."""
    return 2 * (recall * precision) / (recall + precision + 1e-10)


@dataclass
class A2CU:
    """A2CU's recall and precision of summaries against one reference each."""
    writer: UnitWriter
    matcher: UnitMatcher

    def recall(self, summaries: Sequence[str], references: Sequence[str]) -> list[float]:
        return unit_recall(self.matcher, summaries, self.writer.units(references))

    def precision(self, summaries: Sequence[str], references: Sequence[str]) -> list[float]:
        return unit_recall(self.matcher, references, self.writer.units(summaries))
