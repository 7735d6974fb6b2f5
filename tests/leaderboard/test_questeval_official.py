"""sumbench's QuestEval (protocol v0.2.4) against the official package's own code on the same
tiny models, answers and texts: `questeval` 0.2.4 from PyPI, installed without its stale pins
into a folder of its own (`.ci/run` does; SUMBENCH_QUESTEVAL_OFFICIAL names the folder).

Only what no longer loads or cannot exist here is shimmed:
- `datasets.load_metric` (gone in datasets 3); its `bertscore` metric is bert-score's
  `BERTScorer` as datasets 1.7 ran it, given the `build_inputs_with_special_tokens` that
  transformers 5 tokenizers lack;
- `spacy.load("en_core_web_sm")` (not on PyPI): a blank English pipeline whose entities are
  the recorded answers, and no noun chunks;
- the tokenizer class (the tiny tokenizer is not SentencePiece);
- the token ids 73 and 1176, set on the loaded models to the tiny tokenizer's pieces;
- the hub names: the official names point at the local folders, bert-base-multilingual-cased
  at a tiny BERT read at its layer 2.
The tiny models' generation configs say 20 decoder tokens, the official pin's default."""
from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

from leaderboard.evaluators.questeval import Models, Settings, Summary, questeval
from leaderboard.evaluators.questeval_answers import RecordedAnswers, sentences
from leaderboard.evaluators.questeval_models import (
    QUESTION_ANSWERER,
    QUESTION_GENERATOR,
    TRUE,
    UNANSWERABLE,
    WEIGHTER,
    T2TModel,
    first_piece,
)

pytestmark = pytest.mark.slow

TEXTS = [
    ("Ada Lovelace wrote the first program. She worked with Babbage.",
     "Ada Lovelace wrote the first program for the Analytical Engine. Charles Babbage designed "
     "the engine. She worked with Babbage in London.",
     "Lovelace wrote a program for Babbage's engine."),
    ("The bridge in Ohio closed in 1877.",
     "The council closed the bridge in Ohio in 1877. It had stood for years. Nobody crossed it "
     "after May.", "An Ohio bridge closed in 1877."),
    ("Paris hosted the games.", "In 1924 Paris hosted the Olympic games. Many came.",
     "The games were held in Paris."),
]


def _official_folder() -> Path:
    folder = os.environ.get("SUMBENCH_QUESTEVAL_OFFICIAL")
    if folder and (Path(folder) / "questeval" / "questeval_metric.py").is_file():
        return Path(folder)
    reason = ("the official questeval 0.2.4 is not installed (pip install --no-deps --target "
              "DIR questeval==0.2.4; SUMBENCH_QUESTEVAL_OFFICIAL=DIR)")
    if os.environ.get("SUMBENCH_REQUIRE_QUESTEVAL"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from transformers import GenerationConfig

    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    root = tmp_path_factory.mktemp("questeval-official")
    texts = [text for triple in TEXTS for text in triple]
    tokenizer = build_tiny_tokenizer(texts + ["unanswerable true false sv1"], vocab_size=300)
    folders = {}
    for seed, name in enumerate((QUESTION_GENERATOR, QUESTION_ANSWERER, WEIGHTER)):
        folders[name] = root / name.split("/")[-1]
        model = build_tiny_t5(tokenizer, seed=seed, d_model=32)
        _spread(model, tokenizer, texts)
        model.generation_config = GenerationConfig.from_model_config(model.config)
        model.generation_config.max_length = 20
        model.save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    import spacy

    nlp, records = spacy.blank("en"), []
    for text in texts:
        words = [word.strip(".,'s") for word in text.split()
                 if word[:1].isupper() or word[:1].isdigit()]
        records.append({"text": text, "answers": words})
    answers = root / "answers.jsonl"
    answers.write_text("".join(json.dumps(record) + "\n" for record in records))
    # what the official code parses for answers: the first 5 sentences joined by one space
    joined = {" ".join(sentences(nlp, r["text"])[:5]): r["answers"] for r in records}
    from trainers.models.tiny import build_tiny_bert_encoder

    build_tiny_bert_encoder(texts * 5, root / "bert")
    return {"folders": folders, "answers": answers, "joined": joined, "bert": root / "bert",
            "pieces": {"qa": first_piece(tokenizer, UNANSWERABLE, "question answerer"),
                       "weighter": first_piece(tokenizer, TRUE, "weighter")}}


def _spread(model, tokenizer, texts) -> None:
    """Point the output rows of "unanswerable"'s and "true"'s first pieces where their
    first-step probabilities range over (0, 1) from input to input: a random tiny model's sit
    at 0, every score would be 0.5, and a miscounted question would go unseen. The row is the
    mean first-step state, scaled to the top logit, plus its first direction of spread."""
    import torch

    encoded = tokenizer(list(texts), return_tensors="pt", padding=True)
    start = torch.full((len(texts), 1), model.config.decoder_start_token_id)
    with torch.no_grad():
        out = model(**encoded, decoder_input_ids=start, output_hidden_states=True)
        states = out.decoder_hidden_states[-1][:, 0]  # what the output layer reads
        mean, top = states.mean(0), out.logits[:, 0].max(-1).values.mean()
        direction = (states[0] - mean) / (states[0] - mean).norm()
        spread = ((states - mean) @ direction).std()
        for word in (UNANSWERABLE, TRUE):
            model.lm_head.weight[first_piece(tokenizer, word, "model")] = \
                direction * (3.0 / spread) + mean * (top / (mean @ mean))


class _BertScoreMetric:
    """datasets 1.7's `bertscore` metric as the official code uses it (U:165-184): pairs
    added, then `compute(model_type, device)` by one cached `BERTScorer` at the model's
    layer (the stand-in's 2)."""

    def __init__(self, folder: Path):
        self.folder, self.pending, self.scorer = folder, ([], []), None

    def add_batch(self, predictions, references):
        self.pending[0].extend(predictions)
        self.pending[1].extend(references)

    def compute(self, model_type, device):
        from bert_score import BERTScorer

        assert model_type == "bert-base-multilingual-cased"
        if self.scorer is None:
            self.scorer = BERTScorer(model_type=str(self.folder), num_layers=2, device=device)
            tokenizer = self.scorer._tokenizer
            tokenizer.build_inputs_with_special_tokens = lambda ids: [
                tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
        (candidates, references), self.pending = self.pending, ([], [])
        return {"f1": self.scorer.score(candidates, references)[2].tolist()}


class _Span:
    def __init__(self, text: str):
        self.text = text


class _Doc:
    """spaCy's blank English doc, with the recorded answers as its entities."""

    def __init__(self, doc, answers):
        self._doc, self.ents, self.noun_chunks = doc, [_Span(a) for a in answers], []
        self.text = doc.text

    def __iter__(self):
        return iter(self._doc)

    def __getitem__(self, key):
        return self._doc[key]

    def __len__(self):
        return len(self._doc)


@pytest.fixture(scope="module")
def official(lab):
    """The official QuestEval class, its imports shimmed (see the module)."""
    import datasets
    import spacy
    from transformers import AutoTokenizer

    folder = _official_folder()
    nlp = spacy.blank("en")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        patch.setattr(datasets, "load_metric", lambda name, *args, **kwargs: _BertScoreMetric(
            lab["bert"]) if name == "bertscore" else None, raising=False)
        try:
            import unidecode  # noqa: F401 (data2text only)
        except ImportError:
            patch.setitem(sys.modules, "unidecode", types.ModuleType("unidecode"))
        patch.setattr(spacy, "load", lambda name: lambda text: _Doc(
            nlp(text), lab["joined"].get(text, [])))
        for name in [name for name in sys.modules if name.startswith("questeval")]:
            patch.delitem(sys.modules, name)
        import questeval.questeval_metric as metric
        import questeval.utils as utils

        patch.setattr(utils, "T5Tokenizer", AutoTokenizer)

        class LocalModel(utils.API_T2T):
            def __init__(self, pretrained_model_name_or_path, **keywords):
                super().__init__(str(lab["folders"][pretrained_model_name_or_path]),
                                 **{**keywords, "device": "cpu"})
                self.pretrained_model_name_or_path = pretrained_model_name_or_path
                if self.keep_score_idx == 73:
                    self.keep_score_idx = lab["pieces"]["qa"]
                elif self.keep_score_idx == 1176:
                    self.keep_score_idx = lab["pieces"]["weighter"]

        patch.setattr(metric, "API_T2T", LocalModel)
        yield metric.QuestEval


def _ours(lab, summaries, weighter: bool, scores) -> list[float]:
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from leaderboard.evaluators.questeval_bertscore import load_bertscore

    def load(name, word):
        folder = lab["folders"][name]
        return T2TModel(T5ForConditionalGeneration.from_pretrained(folder),
                        AutoTokenizer.from_pretrained(folder), role=name, word=word)

    bertscore = load_bertscore(str(lab["bert"]), 2, device="cpu")[0] \
        if "bertscore" in scores else None
    models = Models(load(QUESTION_GENERATOR, None), load(QUESTION_ANSWERER, UNANSWERABLE),
                    load(WEIGHTER, TRUE) if weighter else None, bertscore)
    result = questeval(summaries, models, RecordedAnswers(lab["answers"]),
                       Settings("v0.2.4", scores, weighter))
    return [row["score"] for row in result["summaries"]]


PLAIN, DEFAULT = ("answerability", "f1"), ("answerability", "bertscore", "f1")


@pytest.mark.parametrize("inputs, weighter, scores", [
    ("source", False, PLAIN), ("reference", False, PLAIN), ("both", False, PLAIN),
    ("source", True, PLAIN), ("both", True, DEFAULT),
])
def test_per_example_scores_equal_the_official_code_s(lab, official, inputs, weighter, scores):
    hypotheses = [triple[0] for triple in TEXTS] + [""]
    sources = [triple[1] for triple in TEXTS] + [TEXTS[0][1]]
    references = [[triple[2]] for triple in TEXTS] + [[TEXTS[0][2]]]
    use_source, use_references = inputs in ("source", "both"), inputs in ("reference", "both")
    metric = official(task="text2text", list_scores=scores,
                      do_weighter=weighter, no_cuda=True, use_cache=False)
    theirs = metric.corpus_questeval(hypothesis=hypotheses,
                                     sources=sources if use_source else None,
                                     list_references=references if use_references else None)
    summaries = [Summary(str(i), hypothesis, sources[i] if use_source else None,
                         tuple(references[i]) if use_references else ())
                 for i, hypothesis in enumerate(hypotheses)]
    ours = _ours(lab, summaries, weighter, scores)
    assert ours == pytest.approx(theirs["ex_level_scores"], abs=1e-6)
    assert ours[-1] == 0.0 and len({round(score, 3) for score in ours[:-1]}) == 3, ours
