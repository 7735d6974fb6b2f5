"""SemiAutoQAPyramid (gold QAs + automatic presence) and AutoQAPyramid (generated QAs +
automatic presence).

Score of a summary = (QAs judged present) / (QAs of its reference); a system's score is the
mean over its examples. Presence comes from any `PresenceBackend` (leaderboard.evaluators.
presence): its label by default (`use="label"`, as human QAPyramid counts present QAs), or its
probability (`use="probability"`, a soft count). Units are shown to the backend as QA pairs
("question? answer") or as statements (`unit_kind="statement"`), with the example id so
few-shot backends never draw shots from the same example.

AutoQAPyramid's generator is any callable `references -> [[(question, answer), ...] per
reference]`; `seq2seq_qa_generator` builds one from a model trained on the `qa_generation`
format and a predicate finder (`predicates(reference) -> [predicate words]`). Each distinct
reference is generated once, whatever the number of systems. `gold_predicates` gives the
predicate words of an example's gold QAs, one per gold predicate group (a repeated verb
repeats), as the `qa_generation` task shows them to the model.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.metrics.qa import parse_qa_list
from tasks.qapyramid.qa_generation import QAGeneration
from tasks.qapyramid.units import predicate_word, unit_text
from trainers.inference.generation import seq2seq_texts

QAPair = tuple[str, str]
QAGenerator = Callable[[Sequence[str]], list]


def system_means(per_summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """{system: mean of its per-summary scores} (plain sum / count)."""
    return {system: sum(rows.values()) / len(rows) for system, rows in per_summary.items()}


@dataclass(frozen=True)
class QAPyramidResult:
    """Per-summary scores {system: {example_id: score}}, system means, and the presence value
    of every QA {system: {example_id: [value per QA]}}."""
    per_summary: dict[str, dict[str, float]]
    system: dict[str, float]
    presence: dict[str, dict[str, list[float]]]
    qas: dict[str, list[QAPair]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"per_summary": self.per_summary, "system": self.system,
                "presence": self.presence,
                "qas": {key: [list(pair) for pair in value] for key, value in self.qas.items()}}


def _check_items(items: Sequence[Mapping]) -> None:
    seen = set()
    for position, item in enumerate(items):
        if "example_id" not in item or "summaries" not in item:
            raise ValueError(f"item {position} needs 'example_id' and 'summaries'")
        if item["example_id"] in seen:
            raise ValueError(f"duplicate example_id {item['example_id']!r}")
        seen.add(item["example_id"])
    systems = {system for item in items for system in item["summaries"]}
    for item in items:
        missing = sorted(system for system in systems
                         if not isinstance(item["summaries"].get(system), str))
        if missing:
            raise ValueError(f"example {item['example_id']!r} has no output of system(s) "
                             f"{', '.join(map(repr, missing))}; every system needs a summary "
                             "of every example (a system mean over fewer examples would not "
                             "compare)")


def score_with_backend(backend: Any, items: Sequence[Mapping], qas: Mapping[str, Sequence],
                       unit_kind: str = "qa", use: str = "label") -> QAPyramidResult:
    """QAPyramid scores of every (example, system) summary in `items` against `qas[example_id]`.

    `items`: [{"example_id": id, "summaries": {system: text}}, ...]. Examples without QAs are
    skipped for every system (the score would be undefined).
    """
    if use not in ("label", "probability"):
        raise ValueError(f"use must be 'label' or 'probability', got {use!r}")
    _check_items(items)
    jobs = [(item["example_id"], system, summary) for item in items
            for system, summary in item["summaries"].items()
            if qas.get(item["example_id"])]
    pairs = ((summary, unit_text(unit_kind, q, a), example_id)
             for example_id, _, summary in jobs for q, a in qas[example_id])
    results = iter(backend.score_iter(pairs))
    presence: dict[str, dict[str, list[float]]] = {}
    for example_id, system, _ in jobs:
        values = [float(getattr(next(results), use)) for _ in qas[example_id]]
        presence.setdefault(system, {})[example_id] = values
    per_summary = {system: {eid: sum(v) / len(v) for eid, v in rows.items()}
                   for system, rows in presence.items()}
    return QAPyramidResult(per_summary, system_means(per_summary), presence,
                           {item["example_id"]: [tuple(p) for p in qas.get(item["example_id"], [])]
                            for item in items})


class SemiAutoQAPyramid:
    """Gold QAs + a presence backend."""

    def __init__(self, backend: Any, unit_kind: str = "qa", use: str = "label"):
        self.backend, self.unit_kind, self.use = backend, unit_kind, use

    def score(self, items: Sequence[Mapping]) -> QAPyramidResult:
        """`items`: [{"example_id", "qas": [(question, answer), ...], "summaries": {...}}]."""
        qas = {item["example_id"]: [tuple(pair) for pair in item["qas"]] for item in items}
        return score_with_backend(self.backend, items, qas, self.unit_kind, self.use)

    def score_examples(self, examples: Sequence[Any],
                       systems: Sequence[str] | None = None) -> QAPyramidResult:
        """From QAPyramid dataset examples (tasks.qapyramid.dataset.QAPyramidExample)."""
        return self.score([{"example_id": ex.example_id, "qas": list(ex.qas),
                            "summaries": {s: t for s, t in ex.system_outputs.items()
                                          if systems is None or s in systems}}
                           for ex in examples])


class AutoQAPyramid:
    """QAs generated from the reference + a presence backend."""

    def __init__(self, generator: QAGenerator, backend: Any, unit_kind: str = "qa",
                 use: str = "label"):
        self.generator, self.backend = generator, backend
        self.unit_kind, self.use = unit_kind, use

    def generate(self, references: Mapping[str, str]) -> dict[str, list[QAPair]]:
        """Generated QAs per example id (one generator call per distinct reference text)."""
        texts = list(dict.fromkeys(references.values()))
        generated = self.generator(texts)
        if len(generated) != len(texts):
            raise ValueError(f"the QA generator returned {len(generated)} lists for "
                             f"{len(texts)} references")
        by_text = {text: [(str(q), str(a)) for q, a in qas] for text, qas in zip(texts, generated)}
        return {example_id: by_text[text] for example_id, text in references.items()}

    def score(self, items: Sequence[Mapping]) -> QAPyramidResult:
        """`items`: [{"example_id", "reference": text, "summaries": {system: text}}]."""
        _check_items(items)
        qas = self.generate({item["example_id"]: item["reference"] for item in items})
        return score_with_backend(self.backend, items, qas, self.unit_kind, self.use)


def seq2seq_qa_generator(model: Any, tokenizer: Any, predicates: Callable[[str], list[str]], *,
                         max_new_tokens: int = 128, batch_size: int = 8,
                         max_input_tokens: int = 512) -> QAGenerator:
    """A generator from a seq2seq model trained on the `qa_generation` format: for each
    reference, one greedy generation per predicate, parsed and concatenated."""
    task = QAGeneration()

    def generate(references: Sequence[str]) -> list[list[QAPair]]:
        from tqdm import tqdm

        jobs = [(r, task.source_text(reference, p)) for r, reference in enumerate(references)
                for p in predicates(reference)]
        with tqdm(total=len(jobs), desc="QA generation", unit="prompt", disable=None,
                  leave=False) as bar:
            texts = seq2seq_texts(model, tokenizer, [source for _, source in jobs],
                                  batch_size=batch_size, max_input_tokens=max_input_tokens,
                                  max_new_tokens=max_new_tokens, progress=bar)
        output: list[list[QAPair]] = [[] for _ in references]
        for (r, _), text in zip(jobs, texts):
            output[r].extend(parse_qa_list(text))
        return output

    return generate


def gold_predicates(example: Any) -> list[str]:
    """The predicate words of a dataset example's gold QAs: `units.predicate_word` of each
    `predicate_groups()` group (the `qa_generation` task's inputs), one entry per group in
    order, so a verb that is two predicates ("opened a bakery and later opened a cafe") is
    generated for twice, as the gold QAs have it; groups without a verb are left out."""
    words = (predicate_word([example.qas[i][0] for i in group], example.reference)
             for group in example.predicate_groups())
    return [word for word in words if word]
