"""Lite²·⁵Pyramid's mix of SCUs and STUs, by the rules of the official `mix_scus_stus`
(ZhangShiyue/Lite2-3Pyramid, metric/extract_stus.py lines 228-353), official line numbers in
brackets; and REALSumm's reproduction, reproduce/utils.py `mix_scus_stus_by_folds`, whose
rules differ in one place: each document's sentences are scored by the regressor of its
cross-validation fold (`fold{k}_xgb.json` for the ids of `fold{k+1}.id`), and the threshold
is pooled over all of them (`fold_easiness`).

A reference's sentences are those of its STU extraction (coreference replaced first, NLTK
sentences, one frame each: `stu_extraction.reference_sentences`); a sentence's words are its
frame's words, lower-cased [274].

- SCUs: each SCU goes to the sentence sharing the most distinct words with it (the SCU
  lower-cased, commas and full stops made spaces, `nltk.word_tokenize`d as NLTK 3.8.1 did
  [278]; tasks.plumbing.treebank); a tie goes to
  the earlier sentence, an SCU sharing no word to the first [281].
- STUs of a sentence: the coreference STUs aligned to it by the same rule, on the text of the
  lower-cased unit between its first and second "is" (`split("is")[1]`, so inside words too
  [293]), then the sentence's frame STUs [306].
- Easiness: one score per sentence (the official scores come from an XGBoost regressor on
  constituency-tree features, `sentence_features`). The threshold is the k-th highest score
  of all sentences of all references, k = int(n · P / 100) [333]; a sentence above it
  (strictly [342]) takes its STUs, the others their SCUs; a sentence with no SCU aligned to
  it is left out [339]. So at P = 50 a little under half the sentences take STUs.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_number_rows, read_text
from tasks.plumbing.treebank import word_tokenize
from tasks.units.stus import ReferenceSentences, jsonl_records, sentence_units

# the constituency labels counted by the official features, in their order (extract_stus.py
# `non_terminal_tokens`): a regressor trained on those features reads them in this order
TREE_LABELS = (
    "WRB", "RBR", "ADVP", "VBG", "$", "''", "WHADVP", "-RRB-", "JJR", "NAC", "PRP", "NNS", "WP",
    "VBZ", "MD", "WDT", "NP", "ADJP", "PDT", "EX", "UH", "NN", "NFP", "SYM", "PRP$", "RBS",
    "FRAG", "NX", "CONJP", "RP", "WHPP", "CC", "VBD", "LS", ".", "SBAR", "TO", "JJ", "IN", "VP",
    "-LRB-", "S", "QP", "SQ", "CD", "``", "X", "POS", "XX", "PP", "PRT", "JJS", "HYPH", ",",
    "RB", "VBN", ":", "VBP", "DT", "VB", "SINV", "UCP", "WHNP", "NNPS", "NNP")


def best_sentence(words: Sequence[str], sentence_words: Sequence[set[str]]) -> int:
    """The sentence sharing the most distinct words (the first on a tie; 0 when none)."""
    best, best_overlap = 0, 0
    unique = set(words)
    for index, candidates in enumerate(sentence_words):
        overlap = len(unique & candidates)
        if overlap > best_overlap:
            best, best_overlap = index, overlap
    return best


def align_scus(scus: Sequence[str], sentence_words: Sequence[set[str]]) -> dict[int, list[str]]:
    """{sentence index: its SCUs}, only sentences with at least one."""
    aligned: dict[int, list[str]] = {}
    for scu in scus:
        words = word_tokenize(scu.lower().replace(",", " ").replace(".", " "))
        aligned.setdefault(best_sentence(words, sentence_words), []).append(scu)
    return aligned


def align_stus(reference: ReferenceSentences) -> list[list[str]]:
    """Per sentence: the coreference STUs aligned to it, then its frame STUs."""
    sentence_words = reference.sentence_words
    aligned: list[list[str]] = [[] for _ in reference.frames]
    for unit in reference.coref_units:
        pieces = unit.lower().split("is")
        if len(pieces) < 2:
            raise SumbenchError(f"the coreference STU {unit!r} has no 'is'")
        aligned[best_sentence(word_tokenize(pieces[1]), sentence_words)].append(unit)
    for index, frame in enumerate(reference.frames):
        aligned[index] += sentence_units(frame)
    return aligned


def easiness_threshold(scores: Sequence[float], percentage: int) -> float:
    """The k-th highest score, k = int(n · percentage / 100)."""
    if not 0 < percentage <= 100:
        raise SumbenchError(f"--percentage must be in 1..100, got {percentage}")
    count = int(len(scores) * percentage / 100)
    if count == 0:
        raise SumbenchError(f"{percentage}% of {len(scores)} sentences is none: the "
                            f"official mix needs at least one")
    return sorted(scores, reverse=True)[count - 1]


def mix_units(references: Sequence[ReferenceSentences], scus: Sequence[Sequence[str]],
              easiness: Sequence[Sequence[float]], percentage: int
              ) -> tuple[list[list[str]], dict]:
    """(per reference its Lite²·⁵ units, counts: sentences, stus, scus, dropped, threshold)."""
    if not len(references) == len(scus) == len(easiness):
        raise SumbenchError(f"{len(references)} references, {len(scus)} SCU lines and "
                            f"{len(easiness)} easiness lines")
    threshold = easiness_threshold([s for scores in easiness for s in scores], percentage)
    counts = {"sentences": 0, "stus": 0, "scus": 0, "dropped": 0}
    units = []
    for reference, reference_scus, scores in zip(references, scus, easiness):
        scu_sentences = align_scus(reference_scus, reference.sentence_words)
        stu_sentences = align_stus(reference)
        row: list[str] = []
        for index, score in enumerate(scores):
            counts["sentences"] += 1
            if index not in scu_sentences:
                counts["dropped"] += 1
            elif score > threshold:
                counts["stus"] += 1
                row += stu_sentences[index]
            else:
                counts["scus"] += 1
                row += scu_sentences[index]
        units.append(row)
    return units, {**counts, "threshold": threshold, "percentage": percentage}


def read_easiness(path: str | Path, references: Sequence[ReferenceSentences]
                  ) -> list[list[float]]:
    """Per reference its sentences' easiness: one line per reference, TAB-separated numbers,
    one per sentence of its STU extraction; errors name the line."""
    import math

    scores = read_number_rows(
        path, [len(reference.frames) for reference in references], what="easiness file",
        lines_for="references",
        count_error=lambda found, wanted: f"{found} scores for the reference's {wanted} "
                                          f"sentences")
    for number, row in enumerate(scores, start=1):
        if not all(map(math.isfinite, row)):
            raise DataError("scores must be finite", path=str(path), line=number)
    return scores


def sentence_features(tokens: Sequence[str], tree: str) -> list[float]:
    """The official regressor's features of one sentence (`_get_features`): token count, the
    tree string's length, its bracket depth, tokens per depth, then how often each of
    `TREE_LABELS` opens a bracket."""
    labels = [0] * len(TREE_LABELS)
    opened = closed = depth = 0
    previous, label = None, ""
    for char in tree:
        if char == " " and label:
            if label in TREE_LABELS:
                labels[TREE_LABELS.index(label)] += 1
            previous, label = None, ""
            continue
        if previous == "(":
            label += char
        else:
            previous = char
        if char == "(":
            opened += 1
        elif char == ")":
            closed += 1
        depth = max(depth, opened - closed)
    if depth == 0:
        raise SumbenchError(f"the tree {tree[:60]!r} has no brackets")
    return [len(tokens), len(tree), depth, len(tokens) / depth, *labels]


class RecordedTrees:
    """Constituency trees recorded in a JSONL file: {"sentence", "tokens", "trees"} per line
    (AllenNLP's constituency parser's output), keyed by the sentence's words joined by
    spaces."""

    def __init__(self, path: str | Path):
        self.path, self.trees = str(path), {}
        for line, record in jsonl_records(path, ("sentence", "tokens", "trees")):
            if not isinstance(record["tokens"], list) or not isinstance(record["trees"], str):
                raise DataError("expected a list of tokens and a tree string", path=self.path,
                                line=line, field="trees")
            self.trees[record["sentence"]] = (record["tokens"], record["trees"])

    def __call__(self, sentence: str) -> tuple[list[str], str]:
        if sentence not in self.trees:
            raise SumbenchError(f"{self.path} has no tree for the sentence {sentence!r}")
        return self.trees[sentence]


def _first_line(error: Exception, empty: str) -> str:
    """An error's first line (`empty` when it has no text)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else empty


def regressor_easiness(model: str | Path, trees: RecordedTrees,
                       references: Sequence[ReferenceSentences]) -> list[list[float]]:
    """Per reference its sentences' easiness by an XGBoost regressor (the official
    regressors/*/..._xgb.json) on `sentence_features`, all sentences in one matrix."""
    try:
        import numpy as np
        import xgboost
    except ImportError:
        raise SumbenchError("--regressor needs xgboost: pip install 'sumbench[lite25]'") from None
    rows = [sentence_features(*trees(text)) for reference in references
            for text in reference.texts]
    booster = xgboost.Booster({"nthread": 4})
    try:
        booster.load_model(str(model))
    except xgboost.core.XGBoostError as error:
        raise SumbenchError(f"{model}: not an XGBoost model "
                            f"({_first_line(error, 'unreadable')})") from None
    try:
        scores = booster.predict(xgboost.DMatrix(np.array(rows))).tolist() if rows else []
    except xgboost.core.XGBoostError as error:
        raise SumbenchError(f"{model}: the regressor cannot score the {len(TREE_LABELS) + 4} "
                            f"official features ({_first_line(error, 'failed')})") from None
    out, start = [], 0
    for reference in references:
        out.append(scores[start:start + len(reference.frames)])
        start += len(reference.frames)
    return out


def fold_easiness(models: Sequence[str | Path], folds: Sequence[str | Path],
                  ids: Sequence[str], trees: RecordedTrees,
                  references: Sequence[ReferenceSentences]) -> list[list[float]]:
    """Per reference its sentences' easiness by the regressor of its fold, as REALSumm's
    reproduction scores them (`mix_scus_stus_by_folds`): the k-th fold file lists the
    document ids the k-th model scores; every reference's id must be in exactly one."""
    if len(models) != len(folds):
        raise SumbenchError(f"{len(folds)} --folds files for {len(models)} --regressor models: "
                            f"give one regressor per fold, in the same order")
    fold_of = read_folds(folds)
    unknown = [doc_id for doc_id in ids if doc_id not in fold_of]
    if unknown:
        raise SumbenchError(f"document {unknown[0]!r} is in no --folds file "
                            f"({len(unknown)} of {len(ids)} are not)")
    scores: list[list[float]] = [[] for _ in references]
    for fold, model in enumerate(models):
        members = [index for index, doc_id in enumerate(ids) if fold_of[doc_id] == fold]
        fold_scores = regressor_easiness(model, trees, [references[i] for i in members])
        for index, values in zip(members, fold_scores):
            scores[index] = values
    return scores


def read_folds(folds: Sequence[str | Path]) -> dict[str, int]:
    """document id -> its fold (the index of the file that lists it); a DataError for an id
    two files list."""

    fold_of: dict[str, int] = {}
    for fold, path in enumerate(folds):
        for number, line in enumerate(read_text(path).splitlines(), start=1):
            doc_id = line.strip()
            if not doc_id:
                continue
            if doc_id in fold_of:
                raise DataError(f"document {doc_id!r} is in fold {fold_of[doc_id] + 1} too",
                                path=str(path), line=number)
            fold_of[doc_id] = fold
    return fold_of
