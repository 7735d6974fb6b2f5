"""QuestEval (Scialom et al., 2021) on summaries, with a source, references or both.

For every text (the summary, the source, each reference) answers are selected
(leaderboard.evaluators.questeval.answers) and a question is generated for each (QG input
`sv1 </s> {answer} </s> {context}`, M:589-590, the context the whole text, or under v0.1.1
and `paper` the answer's sentence, M:416-419 (v0.1.1)). Each compared text's questions are
answered on the summary and the summary's on it (`{question} </s> {text}`, M:601), each
answer compared with the one the question came from (SQuAD F1), and the answerability read
off the first decoding step. With the weighter, the source's questions get a weight (v0.2.4:
`{answer} </s> {question} </s> {source}`, w = 1 - p("true"), M:542-543; v0.1.1:
`{sentence index} </s> {answer} </s> {question} </s> {source}`, w = p_max when it answers
"true", else 1 - p_max, M:278-286 (v0.1.1)). With the bertscore question score, each QA
answer's BERTScore against its gold answer (leaderboard.evaluators.questeval.bertscore).
tasks.metrics.questeval does the arithmetic.

Every model output is kept in an optional SQLite cache keyed by the model's revision and its
exact input (so a new answer, context or model is computed anew; BERTScores by the pair):
a rerun computes only what is new.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.metrics.questeval import (
    DEFAULT_SCORES,
    Asked,
    Compared,
    check_protocol,
    check_score_types,
    protocol_score,
    squad_f1,
)
from tasks.plumbing.errors import SumbenchError
from trainers.models.disk_cache import cache_key

SEP = "</s>"
QG_PREFIX = "sv1"
#: whether each protocol weighs the source's questions unless told (v0.2.4: M:29, off; the
#: paper's recall is weighted)
DEFAULT_WEIGHTER = {"v0.2.4": False, "v0.1.1": False, "paper": True}


@dataclass(frozen=True)
class Summary:
    id: str
    summary: str
    source: str | None = None
    references: tuple[str, ...] = ()
    system: str | None = None


@dataclass(frozen=True)
class Settings:
    protocol: str = "v0.2.4"
    question_scores: tuple[str, ...] | None = None   # None: the protocol's
    weighter: bool | None = None                     # None: the protocol's
    source_windows: bool = False     # an extension: the source answered window by window
    window_stride: int = 128         # tokens between window starts (FEQA's document stride)

    def __post_init__(self) -> None:
        check_protocol(self.protocol)
        if self.question_scores is not None:
            check_score_types(self.question_scores)
        if not isinstance(self.window_stride, int) or self.window_stride < 1:
            raise SumbenchError(f"the window stride is a positive number of tokens, got "
                                f"{self.window_stride!r}")

    @property
    def name(self) -> str:
        """The protocol as outputs name it: an extension is never an official name alone."""
        return self.protocol + (f" + source windows (stride {self.window_stride}, an "
                                f"extension)" if self.source_windows else "")

    @property
    def scores(self) -> tuple[str, ...]:
        return self.question_scores or DEFAULT_SCORES[self.protocol]

    @property
    def weighted(self) -> bool:
        return DEFAULT_WEIGHTER[self.protocol] if self.weighter is None else self.weighter

    @property
    def per_sentence(self) -> bool:
        return self.protocol in ("v0.1.1", "paper")


@dataclass
class Models:
    """The question generator, answerer, (optional) weighter and BERTScore, with their
    revisions."""
    generator: Any
    answerer: Any
    weighter: Any = None
    bertscore: Any = None
    revisions: Mapping[str, str] = field(default_factory=dict)


class Outputs:
    """Model outputs by (model, input), from the cache when it has them."""

    def __init__(self, models: Models, cache=None, progress=None):
        self.models, self.cache, self.progress = models, cache, progress
        self.computed = {"answers": 0, "generator": 0, "answerer": 0, "weighter": 0,
                         "bertscore": 0}

    def run(self, role: str, inputs: Sequence) -> dict:
        """input -> output for the distinct `inputs` of model `role`: (text, probability,
        top) for a T5 model's input string, the F1 for a BERTScore (prediction, gold)."""
        distinct = list(dict.fromkeys(inputs))
        revision = self.models.revisions.get(role, role)
        keys = {item: cache_key("questeval", role, revision, item) for item in distinct}
        found = self.cache.get_many(list(keys.values())) if self.cache is not None else {}
        missing = [item for item in distinct if keys[item] not in found]
        results = {item: _stored(found[keys[item]]) for item in distinct if keys[item] in found}
        if missing:
            model = getattr(self.models, role)
            bar = self.progress(role, len(missing)) if self.progress else None
            outputs = model.predict(missing, bar)
            if bar is not None:
                bar.close()
            self.computed[role] += len(missing)
            fresh = {item: out if isinstance(out, float) else (out.text, out.probability,
                                                                 out.top)
                     for item, out in zip(missing, outputs)}
            if self.cache is not None:
                self.cache.set_many((keys[item], value if isinstance(value, float) else
                                     list(value)) for item, value in fresh.items())
            results.update(fresh)
        return results

    def contexts(self, texts: Sequence[str], answers, settings: Settings) -> dict[str, list]:
        """text -> (answer, QG context, sentence index) of each answer. A model's answers
        (spaCy) are kept in the cache by the text and the answer selection's settings (the
        pipeline, its version and spaCy's, the sentence limit, per sentence or not);
        recorded answers are read again."""
        distinct = list(dict.fromkeys(texts))
        description = getattr(answers, "description", {})
        if self.cache is None or description.get("answers") == "recorded":
            return {text: _contexts(text, answers, settings) for text in distinct}
        keys = {text: cache_key("questeval", "answers", description, settings.per_sentence,
                                text) for text in distinct}
        found = self.cache.get_many(list(keys.values()))
        result = {text: [tuple(item) for item in found[keys[text]]]
                  for text in distinct if keys[text] in found}
        fresh = {text: _contexts(text, answers, settings) for text in distinct
                 if text not in result}
        if fresh:
            self.cache.set_many((keys[text], [list(item) for item in items])
                                for text, items in fresh.items())
        self.computed["answers"] += len(fresh)
        return {**result, **fresh}


def _stored(value):
    """A cached output as computed: a (text, probability, top) tuple, or a float."""
    return tuple(value) if isinstance(value, list) else float(value)


@dataclass
class TextQuestions:
    """A text's questions: (question, its answer, its weight) in answer order."""
    text: str
    items: list[tuple[str, str, float]]


def _contexts(text: str, answers, settings: Settings) -> list[tuple[str, str, int]]:
    """(answer, QG context, sentence index) of each answer of `text`."""
    if not text:
        return []
    if not settings.per_sentence:
        return [(answer, text, 0) for answer in answers.answers(text)]
    return [(answer, sentence, index)
            for index, (sentence, found) in enumerate(answers.sentence_answers(text))
            for answer in found]


def _question_input(answer: str, context: str) -> str:
    return f"{QG_PREFIX} {SEP} {answer} {SEP} {context}"


def _weighter_input(answer: str, question: str, source: str, index: int,
                    settings: Settings) -> str:
    if settings.per_sentence:
        return f"{index} {SEP} {answer} {SEP} {question} {SEP} {source}"
    return f"{answer} {SEP} {question} {SEP} {source}"


def _weight(output: tuple, settings: Settings) -> float:
    text, probability, top = output
    if settings.per_sentence:
        return top if text == "true" else 1 - top
    return 1 - probability


def text_questions(texts: Mapping[str, str], answers, outputs: Outputs, settings: Settings,
                   weighted_roles: set[str]) -> dict[tuple[str, str], TextQuestions]:
    """(role, text) -> its questions, for every text of `texts` ((role, text) -> text)."""
    selected = outputs.contexts(list(texts.values()), answers, settings)
    planned = {key: selected[text] for key, text in texts.items()}
    generated = outputs.run("generator", [_question_input(answer, context)
                                          for items in planned.values()
                                          for answer, context, _ in items])
    weights: dict[str, tuple] = {}
    if settings.weighted and outputs.models.weighter is not None:
        weights = outputs.run("weighter", [
            _weighter_input(answer, generated[_question_input(answer, context)][0], text,
                            index, settings)
            for (role, text), items in planned.items() if role in weighted_roles
            for answer, context, index in items])
    result = {}
    for (role, text), items in planned.items():
        rows = []
        for answer, context, index in items:
            question = generated[_question_input(answer, context)][0]
            weight = 1.0
            if role in weighted_roles and weights:
                weight = _weight(weights[_weighter_input(answer, question, text, index,
                                                         settings)], settings)
            rows.append((question, answer, weight))
        result[(role, text)] = TextQuestions(text, rows)
    return result


#: tokens of the source one window holds: the QA input is cut at 512 tokens, and the question
#: (at most 20 tokens) and its separator come first
WINDOW_TOKENS = 480


def source_windows(text: str, tokenizer, stride: int, size: int = WINDOW_TOKENS) -> list[str]:
    """`text` as windows of `size` of the tokenizer's tokens, one starting every `stride`
    tokens and the last ending at the text's end (the whole text when it fits in one)."""
    offsets = tokenizer(text, add_special_tokens=False,
                        return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= size:
        return [text]
    starts = dict.fromkeys([*range(0, len(offsets) - size, stride), len(offsets) - size])
    return [text[offsets[start][0]:offsets[start + size - 1][1]] for start in starts]


def _fold_windows(answered: dict, questions: Sequence[str], source: str,
                  windows: Sequence[str]) -> None:
    """Each question's answer on `source`: that of the window where it is most answerable
    (the lowest probability of "unanswerable"; the first of equals)."""
    for question in questions:
        answered[f"{question} {SEP} {source}"] = min(
            (answered[f"{question} {SEP} {window}"] for window in windows),
            key=lambda output: output[1])


def _asked(questions: TextQuestions, on: str, answered: Mapping[str, tuple],
           bertscores: Mapping[tuple[str, str], float] | None) -> list[Asked]:
    """`questions` answered on the text `on` (SQuAD F1, and BERTScore when computed, against
    each question's answer)."""
    rows = []
    for question, gold, weight in questions.items:
        text, probability, _ = answered[f"{question} {SEP} {on}"]
        similarity = {"f1": squad_f1(gold, text)}
        if bertscores is not None:
            similarity["bertscore"] = bertscores[(text, gold)]
        rows.append(Asked(question, gold, text, 1 - probability, similarity, weight))
    return rows


def _directions(summary: Summary, questions, compared: list[tuple[str, str]]):
    """(compared text, its questions, the summary's) of each pair with two texts."""
    mine = questions[("hyp", summary.summary)]
    return [(text, questions[(role, text)], mine) for role, text in compared
            if summary.summary and text]


def _bertscores(summaries, questions, compared_of, answered, outputs: Outputs):
    """(QA answer, gold answer) -> BERTScore F1, for every question asked both ways."""
    if outputs.models.bertscore is None:
        raise SumbenchError("the bertscore question score needs a BERTScore model")
    pairs = [(answered[f"{question} {SEP} {on}"][0], gold)
             for summary in summaries
             for text, theirs, mine in _directions(summary, questions, compared_of[summary.id])
             for asked, on in ((theirs, summary.summary), (mine, text))
             for question, gold, _ in asked.items]
    return outputs.run("bertscore", pairs)


def check_summaries(summaries: Sequence[Summary], settings: Settings) -> None:
    counts = {len(summary.references) for summary in summaries}
    for number, summary in enumerate(summaries, start=1):
        if summary.source is None and not summary.references:
            raise SumbenchError(f"summary {number} ({summary.id!r}) has neither a source nor "
                                f"references: QuestEval compares it with one of them")
    if len(counts) > 1 and settings.protocol != "paper":
        raise SumbenchError(f"summaries have {sorted(counts)} references: QuestEval takes the "
                            f"same number for every summary (M:184)")
    if settings.protocol == "v0.1.1" and max(counts, default=0) > 1:
        raise SumbenchError("protocol v0.1.1 takes one reference per summary")


def questeval(summaries: Sequence[Summary], models: Models, answers, settings: Settings,
              cache=None, progress=None, details: bool = False) -> dict:
    """Per summary {"id", "system", "score", "precision", "recall", "questions": {"summary",
    "compared"}} (with `details`, every question), the corpus mean, the model calls made
    (`computed`: what the cache did not hold) and the texts without answers."""
    check_summaries(summaries, settings)
    outputs = Outputs(models, cache, progress)
    texts: dict[tuple[str, str], str] = {}
    for summary in summaries:
        texts[("hyp", summary.summary)] = summary.summary
        if summary.source is not None:
            texts[("src", summary.source)] = summary.source
        for reference in summary.references:
            texts[("ref", reference)] = reference
    questions = text_questions(texts, answers, outputs, settings, {"src"})
    compared_of = {summary.id: [("src", summary.source)] * (summary.source is not None)
                   + [("ref", reference) for reference in summary.references]
                   for summary in summaries}
    windows = {summary.source: source_windows(summary.source, models.answerer.tokenizer,
                                              settings.window_stride)
               for summary in summaries if settings.source_windows and summary.source}
    qa_inputs, folds = [], []
    for summary in summaries:
        mine = [q for q, _, _ in questions[("hyp", summary.summary)].items]
        for role, text in compared_of[summary.id]:
            if summary.summary and text:
                qa_inputs += [f"{q} {SEP} {summary.summary}" for q, _, _ in
                              questions[(role, text)].items]
                parts = windows.get(text, [text]) if role == "src" else [text]
                qa_inputs += [f"{q} {SEP} {part}" for q in mine for part in parts]
                if len(parts) > 1:
                    folds.append((mine, text, parts))
    answered = outputs.run("answerer", qa_inputs)
    for mine, text, parts in folds:
        _fold_windows(answered, mine, text, parts)
    bertscores = _bertscores(summaries, questions, compared_of, answered, outputs) \
        if "bertscore" in settings.scores else None
    rows = [_summary_row(summary, questions, compared_of[summary.id], answered, bertscores,
                         settings, details) for summary in summaries]
    mean = sum(row["score"] for row in rows) / len(rows) if rows else None
    return {"summaries": rows, "corpus_score": mean, "computed": dict(outputs.computed),
            "without_answers": without_answers(questions)}


def without_answers(questions) -> dict[str, int]:
    """How many distinct non-empty texts of each role had no answers (so no questions: a
    summary of them scores 0 on that pair)."""
    names = {"hyp": "summaries", "src": "sources", "ref": "references"}
    counts = dict.fromkeys(names.values(), 0)
    for (role, text), asked in questions.items():
        if text and not asked.items:
            counts[names[role]] += 1
    return counts


def _summary_row(summary: Summary, questions, compared: list[tuple[str, str]],
                 answered: Mapping[str, tuple], bertscores, settings: Settings,
                 details: bool) -> dict:
    mine = questions[("hyp", summary.summary)]
    pairs = []
    for role, text in compared:
        theirs = questions[(role, text)]
        live = bool(summary.summary and text)
        pairs.append(Compared("source" if role == "src" else "reference", not text,
                              _asked(theirs, summary.summary, answered, bertscores)
                              if live else [],
                              _asked(mine, text, answered, bertscores) if live else []))
    result = protocol_score(settings.protocol, not summary.summary, pairs, settings.scores,
                            settings.weighted)
    row = {"id": summary.id, "system": summary.system, "score": result.score,
           "precision": result.precision, "recall": result.recall,
           "questions": {"summary": len(mine.items),
                         "compared": [len(questions[key].items) for key in compared]}}
    if details:
        row["details"] = [{"role": pair.role, "recall": [_detail(a) for a in pair.recall],
                           "precision": [_detail(a) for a in pair.precision]}
                          for pair in pairs]
    return row


def _detail(asked: Asked) -> dict:
    return {"answer": asked.gold, "question": asked.question, "qa_answer": asked.answer,
            "answerability": asked.answerability, **asked.similarity, "weight": asked.weight}
