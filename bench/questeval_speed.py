"""Benchmark (not a test): QuestEval v0.2.4, sumbench's against the official package's own code.

T5-small's published shape (random weights, a tokenizer trained on the texts; the first-step
rows of "unanswerable" spread as the official-code test does, so answerability varies) as
question generator and answerer; `--docs` REALSumm documents x `--systems` systems, each
summary against its document and its reference, as `sumbench questeval --pyramid` does;
answers recorded for every text (each of the first five sentences' capitalised words and
numbers), given to the official code through its spaCy call; question scores answerability
and F1 (BERTScore would add the same model to both arms). Arms, alternated `--repeat` times
(bench/harness.py):
  ours      leaderboard.evaluators.questeval.scoring.questeval: length-sorted batches padded
            to their longest input, each distinct model input once, no cache;
  baseline  the official `QuestEval(...).corpus_questeval` (bench/questeval_official.py;
            `use_cache=False`, its default batch sizes), every input padded to 512 tokens.
"identical": every per-summary score within 1e-5 (padding to 512 tokens or to the batch's
longest input changes float rounding: answerabilities move in the 7th digit). Needs the
official package in a folder (`pip install --no-deps --target DIR questeval==0.2.4`, then
--official DIR or SUMBENCH_QUESTEVAL_OFFICIAL=DIR) and ../shared/data/pyramid/realsumm.

    python bench/questeval_speed.py [--docs 10] [--systems 5] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
from questeval_official import official_folder, official_questeval, spread  # noqa: E402

from harness import T5_SHAPES, add_options, compare_arms, report  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "pyramid" / "realsumm"
SCORES = ("answerability", "f1")


def workload(data_dir: Path, n_docs: int, n_systems: int):
    """(summaries, every text) of the first `n_docs` examples and `n_systems` systems."""
    from leaderboard.evaluators.questeval.scoring import Summary
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    data = load_pyramid_dataset(data_dir, unit_kinds=(), labels=False)
    systems = sorted(data.systems)[:n_systems]
    summaries = [Summary(f"{system}/{data.ids[i]}", data.summaries[system][i],
                         data.documents[i], (data.references[i],), system)
                 for system in systems for i in range(n_docs)]
    texts = sorted({text for s in summaries for text in (s.summary, s.source, *s.references)})
    return summaries, texts


def recorded_answers(texts, folder: Path) -> tuple[Path, dict]:
    """The answers file, and what the official code parses for answers (a text's first five
    sentences joined by one space) -> the same answers."""
    import spacy

    from leaderboard.evaluators.questeval.answers import LIMIT_SENTENCES, sentences

    nlp, records = spacy.blank("en"), []
    for text in texts:
        found = sentences(nlp, text)[:LIMIT_SENTENCES]
        words = [word.strip(".,'s\"") for sentence in found for word in sentence.split()
                 if word[:1].isupper() or word[:1].isdigit()]
        records.append({"text": text, "answers": [word for word in words if word]})
    path = folder / "answers.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    joined = {" ".join(sentences(nlp, r["text"])[:LIMIT_SENTENCES]): r["answers"]
              for r in records}
    return path, joined


def build_models(texts, folder: Path) -> dict:
    """Hub name -> a folder holding a T5-small-shaped model (generation cap 20 tokens)."""
    from transformers import GenerationConfig

    from leaderboard.evaluators.questeval.models import QUESTION_ANSWERER, QUESTION_GENERATOR
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(list(texts) + ["unanswerable true false sv1"],
                                     vocab_size=4000)
    folders = {}
    for seed, name in enumerate((QUESTION_GENERATOR, QUESTION_ANSWERER)):
        model = build_tiny_t5(tokenizer, seed=seed, **T5_SHAPES["t5-small"])
        spread(model, tokenizer, texts[:64])
        model.generation_config = GenerationConfig.from_model_config(model.config)
        model.generation_config.max_length = 20
        folders[name] = folder / name.split("/")[-1]
        model.save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    return folders


def ours_arm(folders: dict, answers_path: Path, summaries):
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from leaderboard.evaluators.questeval.answers import RecordedAnswers
    from leaderboard.evaluators.questeval.models import (
        QUESTION_ANSWERER,
        QUESTION_GENERATOR,
        UNANSWERABLE,
        T2TModel,
    )
    from leaderboard.evaluators.questeval.scoring import Models, Settings, questeval

    def load(name, word, batch):
        return T2TModel(T5ForConditionalGeneration.from_pretrained(folders[name]),
                        AutoTokenizer.from_pretrained(folders[name]), role=name, word=word,
                        batch_size=batch)
    models = Models(load(QUESTION_GENERATOR, None, 36), load(QUESTION_ANSWERER, UNANSWERABLE, 48))
    answers = RecordedAnswers(answers_path)
    return lambda: [row["score"] for row in questeval(
        summaries, models, answers, Settings("v0.2.4", SCORES))["summaries"]]


def official_arm(metric_class, summaries):
    metric = metric_class(task="text2text", list_scores=SCORES, do_weighter=False,
                          no_cuda=True, use_cache=False)
    return lambda: list(metric.corpus_questeval(
        hypothesis=[s.summary for s in summaries], sources=[s.source for s in summaries],
        list_references=[list(s.references) for s in summaries])["ex_level_scores"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--docs", type=int, default=10)
    parser.add_argument("--systems", type=int, default=5)
    parser.add_argument("--official", type=Path, help="the official package's folder")
    add_options(parser)
    args = parser.parse_args(argv)
    official = args.official or official_folder()
    if official is None or not (Path(official) / "questeval").is_dir():
        parser.error("the official questeval 0.2.4 is needed: pip install --no-deps --target "
                     "DIR questeval==0.2.4, then --official DIR")
    if not args.data.is_dir():
        parser.error(f"{args.data}: no REALSumm folder (../shared/data/pyramid/realsumm)")
    from transformers import AutoTokenizer

    from leaderboard.evaluators.questeval.models import TRUE, UNANSWERABLE, first_piece

    summaries, texts = workload(args.data, args.docs, args.systems)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        answers_path, joined = recorded_answers(texts, folder)
        folders = build_models(texts, folder)
        tokenizer = AutoTokenizer.from_pretrained(next(iter(folders.values())))
        pieces = {"qa": first_piece(tokenizer, UNANSWERABLE, "answerer"),
                  "weighter": first_piece(tokenizer, TRUE, "weighter")}
        with official_questeval(Path(official), folders, joined, pieces) as metric_class:
            result = compare_arms(ours_arm(folders, answers_path, summaries),
                                  official_arm(metric_class, summaries), repeat=args.repeat,
                                  same=lambda a, b: max_difference(a, b) <= 1e-5)
    outputs = result["outputs"]
    extra = {"shape": "t5-small", "docs": args.docs, "systems": args.systems,
             "summaries": len(summaries), "question_scores": list(SCORES),
             "answers": sum(len(record) for record in joined.values()),
             "max_abs_difference": max_difference(outputs["ours"], outputs["baseline"]),
             "goal_met": result["ratio"] >= 3 and result["identical"]}
    report("questeval_speed", result, as_json=args.json, extra=extra,
           labels=("sumbench questeval (v0.2.4)", "official questeval 0.2.4"))
    return 0 if result["identical"] else 1


def max_difference(first, second) -> float:
    return max((abs(a - b) for a, b in zip(first, second)), default=0.0) \
        if len(first) == len(second) else float("inf")


if __name__ == "__main__":
    sys.exit(main())
