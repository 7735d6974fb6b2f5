"""sumbench's QuestEval (protocol v0.2.4) against the official package's own code on the same
tiny models, answers and texts: `questeval` 0.2.4 from PyPI, installed without its stale pins
into a folder of its own (`.ci/run` does; SUMBENCH_QUESTEVAL_OFFICIAL names the folder), run
with only what no longer loads or cannot exist here shimmed (bench/questeval_official.py says
what). The tiny models' generation configs say 20 decoder tokens, the official pin's
default."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.questeval_official import official_folder, official_questeval, spread
from leaderboard.evaluators.questeval.answers import RecordedAnswers, sentences
from leaderboard.evaluators.questeval.models import (
    QUESTION_ANSWERER,
    QUESTION_GENERATOR,
    TRUE,
    UNANSWERABLE,
    WEIGHTER,
    T2TModel,
    first_piece,
)
from leaderboard.evaluators.questeval.scoring import Models, Settings, Summary, questeval

from helpers import official_or_skip

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
    return official_or_skip(official_folder(), "SUMBENCH_REQUIRE_QUESTEVAL",
                            "the official questeval 0.2.4 is not installed (pip install "
                            "--no-deps --target DIR questeval==0.2.4; "
                            "SUMBENCH_QUESTEVAL_OFFICIAL=DIR)")


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
        spread(model, tokenizer, texts)
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


@pytest.fixture(scope="module")
def official(lab):
    """The official QuestEval class, its imports shimmed."""
    with official_questeval(_official_folder(), lab["folders"], lab["joined"], lab["pieces"],
                            lab["bert"]) as metric:
        yield metric


def _ours(lab, summaries, weighter: bool, scores) -> list[float]:
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from leaderboard.evaluators.questeval.bertscore import load_bertscore

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
