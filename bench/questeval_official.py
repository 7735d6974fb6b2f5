"""The official QuestEval package's own code (`questeval` 0.2.4 from PyPI, installed without its
stale pins: `pip install --no-deps --target DIR questeval==0.2.4`), runnable here on local
models: what tests/leaderboard/test_questeval_official.py checks sumbench against, and the
baseline arm of bench/questeval_speed.py.

Only what no longer loads or cannot exist here is shimmed:
- `datasets.load_metric` (gone in datasets 3); its `bertscore` metric is bert-score's
  `BERTScorer` as datasets 1.7 ran it, given the `build_inputs_with_special_tokens` that
  transformers 5 tokenizers lack;
- `spacy.load("en_core_web_sm")` (not on PyPI): a blank English pipeline whose entities are
  recorded answers, and no noun chunks;
- the tokenizer class (a locally trained tokenizer is not SentencePiece);
- the token ids 73 and 1176, set on the loaded models to the local tokenizer's pieces;
- the hub names: the official names point at local folders, bert-base-multilingual-cased at
  a local BERT read at its layer 2.
"""
from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from unittest import mock

ENV = "SUMBENCH_QUESTEVAL_OFFICIAL"
BERT_LAYER = 2


def official_folder() -> Path | None:
    """The folder the official package is installed in (SUMBENCH_QUESTEVAL_OFFICIAL), or
    None."""
    folder = os.environ.get(ENV)
    if folder and (Path(folder) / "questeval" / "questeval_metric.py").is_file():
        return Path(folder)
    return None


class BertScoreMetric:
    """datasets 1.7's `bertscore` metric as the official code uses it (U:165-184): pairs
    added, then `compute(model_type, device)` by one cached `BERTScorer` at the model's
    layer (the stand-in's BERT_LAYER)."""

    def __init__(self, folder: Path):
        self.folder, self.pending, self.scorer = folder, ([], []), None

    def add_batch(self, predictions, references):
        self.pending[0].extend(predictions)
        self.pending[1].extend(references)

    def compute(self, model_type, device):
        from bert_score import BERTScorer

        assert model_type == "bert-base-multilingual-cased"
        if self.scorer is None:
            self.scorer = BERTScorer(model_type=str(self.folder), num_layers=BERT_LAYER,
                                     device=device)
            tokenizer = self.scorer._tokenizer
            tokenizer.build_inputs_with_special_tokens = lambda ids: [
                tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
        (candidates, references), self.pending = self.pending, ([], [])
        return {"f1": self.scorer.score(candidates, references)[2].tolist()}


class _Span:
    def __init__(self, text: str):
        self.text = text


class _Doc:
    """spaCy's blank English doc, with recorded answers as its entities."""

    def __init__(self, doc, answers):
        self._doc, self.ents, self.noun_chunks = doc, [_Span(a) for a in answers], []
        self.text = doc.text

    def __iter__(self):
        return iter(self._doc)

    def __getitem__(self, key):
        return self._doc[key]

    def __len__(self):
        return len(self._doc)


@contextlib.contextmanager
def official_questeval(folder: Path, models: Mapping[str, Path], joined: Mapping[str, list],
                       pieces: Mapping[str, int], bert: Path | None = None) -> Iterator:
    """The official `QuestEval` class, its imports shimmed (see the module). `models`: hub
    name -> local folder; `joined`: the text the official code parses for answers (its first
    five sentences joined by one space) -> the recorded answers; `pieces`: the local
    tokenizer's ids for "unanswerable" ("qa") and "true" ("weighter")."""
    import datasets
    import spacy
    from transformers import AutoTokenizer

    nlp = spacy.blank("en")
    with contextlib.ExitStack() as stack:
        def patch(target, name, value):
            stack.enter_context(mock.patch.object(target, name, value, create=True))
        sys.path.insert(0, str(folder))
        stack.callback(sys.path.remove, str(folder))
        stack.enter_context(mock.patch.dict(sys.modules))  # restored: no questeval left
        patch(datasets, "load_metric", lambda name, *args, **kwargs: BertScoreMetric(bert)
              if name == "bertscore" else None)
        try:
            import unidecode  # noqa: F401 (data2text only)
        except ImportError:
            sys.modules["unidecode"] = types.ModuleType("unidecode")
        patch(spacy, "load", lambda name: lambda text: _Doc(nlp(text), joined.get(text, [])))
        for name in [name for name in sys.modules if name.startswith("questeval")]:
            del sys.modules[name]
        import questeval.questeval_metric as metric
        import questeval.utils as utils

        patch(utils, "T5Tokenizer", AutoTokenizer)

        class LocalModel(utils.API_T2T):
            def __init__(self, pretrained_model_name_or_path, **keywords):
                super().__init__(str(models[pretrained_model_name_or_path]),
                                 **{**keywords, "device": "cpu"})
                self.pretrained_model_name_or_path = pretrained_model_name_or_path
                if self.keep_score_idx == 73:
                    self.keep_score_idx = pieces["qa"]
                elif self.keep_score_idx == 1176:
                    self.keep_score_idx = pieces["weighter"]

        patch(metric, "API_T2T", LocalModel)
        yield metric.QuestEval


def spread(model, tokenizer, texts) -> None:
    """Point the output rows of "unanswerable"'s and "true"'s first pieces where their
    first-step probabilities range over (0, 1) from input to input: a random model's sit at
    0, every score would be 0.5, and a miscounted question would go unseen. The row is the
    mean first-step state, scaled to the top logit, plus its first direction of spread."""
    import torch

    from leaderboard.evaluators.questeval.models import TRUE, UNANSWERABLE, first_piece

    encoded = tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True,
                        max_length=512)
    start = torch.full((len(texts), 1), model.config.decoder_start_token_id)
    with torch.no_grad():
        out = model(**encoded, decoder_input_ids=start, output_hidden_states=True)
        states = out.decoder_hidden_states[-1][:, 0]  # what the output layer reads
        mean, top = states.mean(0), out.logits[:, 0].max(-1).values.mean()
        direction = (states[0] - mean) / (states[0] - mean).norm()
        deviation = ((states - mean) @ direction).std()
        for word in (UNANSWERABLE, TRUE):
            model.lm_head.weight[first_piece(tokenizer, word, "model")] = \
                direction * (3.0 / deviation) + mean * (top / (mean @ mean))
