"""Semantic-role frames from models run here: a frame source for `sumbench stus` in the
convention of AllenNLP's SRL BERT (`structured-prediction-srl-bert`, allennlp-models
srl_bert.py and the SRL dataset reader), with transformers only.

- Words: spaCy's rule-based English tokenizer, as AllenNLP's predictor split them
  (`spacy.blank("en")` needs no model: "43-year-old" is five words, as in the released
  REALSumm STUs' "43 - year"); a spaCy pipeline's own tokenizer when one tags the verbs.
- Verbs: the words a spaCy pipeline with a tagger (en_core_web_sm, as the official predictor
  loaded; `spacy_pipeline`) tags VERB or AUX, when one is installed; otherwise those a
  predicate detector marks (trainers.models.predicate_detector: a token-classification model, whose
  target is spaCy's VERB and AUX words).
- Tags, per verb: each word cut into word pieces by the tokenizer's WordPiece model alone
  (lower-cased for an uncased model), `[CLS]` pieces `[SEP]`; the verb's pieces have token
  type 1 (the verb indicator), all others 0; the model's softmax probabilities go through a
  Viterbi decode over the pieces in which I-X follows only B-X or I-X and no sequence starts
  with I- (`get_viterbi_pairwise_potentials`, `get_start_transitions`; the probabilities
  are summed as they are, as AllenNLP does); a word's tag is its first piece's.

`convert_allennlp_srl` turns an AllenNLP SRL BERT archive (weights.th, vocabulary/
labels.txt) into a transformers `BertForTokenClassification` folder this source loads.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.spacy_loader import (
    DEFAULT_PIPELINE,
    PipelineNotInstalled,
    blank_english,
)
from tasks.plumbing.spacy_loader import spacy_pipeline as load_spacy_pipeline
from tasks.usb.archive import extract_archive_safely
from trainers.fewshot.backends import context_positions
from trainers.models.model_loading import (
    check_model_source,
    load_errors,
    load_failure,
    resolve_model_path,
)
from trainers.models.predicate_detector import PredicateDetector


def bio_constraints(labels: Sequence[str]):
    """(transitions[i][j], start[j]): 0 where allowed, -inf where AllenNLP forbids."""
    infinity = float("inf")
    transitions = [[-infinity if i != j and label[0] == "I" and previous != "B" + label[1:]
                    else 0.0 for j, label in enumerate(labels)]
                   for i, previous in enumerate(labels)]
    start = [-infinity if label[0] == "I" else 0.0 for label in labels]
    return transitions, start


def viterbi(potentials: Sequence[Sequence[float]], transitions, start) -> list[int]:
    """The best label sequence: per step the potentials plus the transition from the
    previous label (ties to the lower index, as torch.max gives them)."""
    import torch

    potentials = torch.as_tensor(potentials, dtype=torch.float64)
    transitions = torch.as_tensor(transitions, dtype=torch.float64)
    scores = potentials[0] + torch.as_tensor(start, dtype=torch.float64)
    back = []
    for row in potentials[1:]:
        best, pointers = torch.max(scores[:, None] + transitions, dim=0)
        scores = best + row
        back.append(pointers)
    path = [int(torch.max(scores, dim=0).indices)]
    for pointers in reversed(back):
        path.append(int(pointers[path[-1]]))
    return path[::-1]


#: what spaCy tags the words the official predictor labels frames for
PREDICATE_POS = ("VERB", "AUX")
#: pipeline components that set a token's part of speech
TAGGING_PIPES = ("tagger", "morphologizer", "attribute_ruler")


def spacy_words(sentence: str) -> list[str]:
    """The sentence's words by spaCy's rule-based English tokenizer (no model needed)."""
    return [token.text for token in blank_english("stus")(sentence)]


def tagging_pipeline(name: str):
    """The spaCy pipeline `name` (a package or a folder) when it is installed and tags parts
    of speech; None otherwise."""
    try:
        pipeline = load_spacy_pipeline(name, extra="stus")
    except PipelineNotInstalled:
        return None
    return pipeline if any(pipeline.has_pipe(pipe) for pipe in TAGGING_PIPES) else None


class SpacyPredicates:
    """Words and verb positions from a spaCy pipeline with a tagger (VERB and AUX)."""

    def __init__(self, pipeline):
        self.pipeline = pipeline

    def __call__(self, sentence: str) -> tuple[list[str], list[int]]:
        document = self.pipeline(sentence)
        return [token.text for token in document], [
            index for index, token in enumerate(document) if token.pos_ in PREDICATE_POS]


class DetectorPredicates:
    """spaCy's rule-based words and the positions a predicate detector marks."""

    def __init__(self, model: str, device: str):
        self.detector = PredicateDetector(model, device=device)

    def __call__(self, sentence: str) -> tuple[list[str], list[int]]:
        words = spacy_words(sentence)
        return words, self.detector.positions(words)


def predicate_source(predicate_model: str | None, spacy_pipeline: str | None, device: str):
    """A spaCy pipeline that tags verbs (`spacy_pipeline`, else en_core_web_sm when
    installed) or else the predicate detector; a SumbenchError when there is neither."""
    pipeline = tagging_pipeline(spacy_pipeline or DEFAULT_PIPELINE)
    if pipeline is not None and (spacy_pipeline or not predicate_model):
        return SpacyPredicates(pipeline)
    if spacy_pipeline:
        raise SumbenchError(f"spaCy pipeline {spacy_pipeline!r} is not installed or tags no "
                            f"parts of speech")
    if not predicate_model:
        raise SumbenchError(f"no spaCy pipeline with a tagger is installed ({DEFAULT_PIPELINE}): "
                            f"give a predicate detector (--predicate-model DIR) or a pipeline "
                            f"(--spacy-pipeline NAME)")
    return DetectorPredicates(predicate_model, device)


class ModelFrames:
    """`frames(sentence) -> {"sentence", "words", "verbs": [{"verb", "tags"}]}` from an SRL
    token classifier (SRL BERT's convention) on the verbs a spaCy pipeline tags or a
    predicate detector marks (`predicate_source`)."""

    def __init__(self, srl_model: str, predicate_model: str | None = None, device: str = "cpu",
                 spacy_pipeline: str | None = None):
        import transformers

        self.predicates = predicate_source(predicate_model, spacy_pipeline, device)
        check_model_source(srl_model, "SRL model")
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                resolve_model_path(srl_model))
            self.model = transformers.AutoModelForTokenClassification.from_pretrained(
                resolve_model_path(srl_model)).to(device).eval()
        except load_errors() as error:
            raise load_failure(srl_model, error, "SRL model") from None
        self.labels = [self.model.config.id2label[i] for i in range(self.model.config.num_labels)]
        if not all(label == "O" or label[:2] in ("B-", "I-") for label in self.labels):
            raise SumbenchError(f"{srl_model}: the SRL model's labels must be BIO tags "
                                f"(O, B-X, I-X), got {self.labels[:6]}")
        self.constraints = bio_constraints(self.labels)
        self.device = device
        normalizer = self.tokenizer.backend_tokenizer.normalizer
        self.lowercase = normalizer is not None and normalizer.normalize_str("A") == "a"

    def pieces(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """(the word-piece ids with [CLS] and [SEP], each word's first piece's position)."""
        wordpiece = self.tokenizer.backend_tokenizer.model
        ids, starts = [self.tokenizer.cls_token_id], []
        for word in words:
            starts.append(len(ids))
            ids += [token.id for token in wordpiece.tokenize(word.lower() if self.lowercase
                                                             else word)]
        return ids + [self.tokenizer.sep_token_id], starts

    def tags(self, words: Sequence[str], verb: int) -> list[str]:
        import torch

        ids, starts = self.pieces(words)
        room = context_positions(self.model.config)
        if room is not None and len(ids) > room:
            raise SumbenchError(f"the sentence {' '.join(words)[:60]!r}... has {len(ids)} word "
                                f"pieces, more than the SRL model's {room} positions")
        end = starts[verb + 1] if verb + 1 < len(starts) else len(ids) - 1
        types = [1 if starts[verb] <= k < end else 0 for k in range(len(ids))]
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([ids], device=self.device),
                                token_type_ids=torch.tensor([types], device=self.device)
                                ).logits[0]
        path = viterbi(logits.softmax(-1).tolist(), *self.constraints)
        return [self.labels[path[k]] for k in starts]

    def __call__(self, sentence: str) -> dict[str, Any]:
        words, positions = self.predicates(sentence)
        verbs = [{"verb": words[index], "tags": self.tags(words, index)} for index in positions]
        return {"sentence": sentence, "words": words, "verbs": verbs}


def convert_allennlp_srl(archive: str | Path, bert: str | Path, out: str | Path) -> Path:
    """An AllenNLP SRL BERT archive (a .tar.gz or its unpacked folder: weights.th and
    vocabulary/labels.txt) as a transformers BertForTokenClassification folder, with the
    BERT config and tokenizer of `bert` (e.g. a local bert-base-uncased)."""
    import tempfile

    import torch
    import transformers

    with tempfile.TemporaryDirectory() as unpacked:
        folder = Path(archive)
        if folder.is_file():  # members checked, then extracted with the data filter where
            try:              # this Python has one (3.11.4 and newer)
                extract_archive_safely(folder, Path(unpacked) / "archive")
            except DataError as error:
                raise SumbenchError(f"{archive}: not a readable tar archive "
                                    f"({error.reason})") from None
            folder = Path(unpacked) / "archive"
        for needed in ("weights.th", "vocabulary/labels.txt"):
            if not (folder / needed).is_file():
                raise SumbenchError(f"{archive}: not an AllenNLP archive (no {needed})")
        labels = [line.strip() for line in (folder / "vocabulary" / "labels.txt")
                  .read_text(encoding="utf-8").splitlines() if line.strip()]
        try:
            weights = torch.load(folder / "weights.th", map_location="cpu", weights_only=True)
        except Exception as error:  # a pickle or zip error: not a state dict
            raise SumbenchError(f"{archive}: weights.th is not a readable state dict "
                                f"({type(error).__name__})") from None
    # older transformers saved the position and token-type id buffers too
    state = {key.replace("bert_model.", "bert.", 1).replace("tag_projection_layer.",
                                                             "classifier.", 1): value
             for key, value in weights.items() if not key.startswith("bert_model.pooler.")
             and not key.endswith(("embeddings.position_ids", "embeddings.token_type_ids"))}
    config = transformers.BertConfig.from_pretrained(str(bert), num_labels=len(labels),
                                                     id2label=dict(enumerate(labels)),
                                                     label2id={v: k for k, v in
                                                               enumerate(labels)})
    model = transformers.BertForTokenClassification(config)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as error:   # shapes of another BERT size
        first = str(error).strip().splitlines()
        raise SumbenchError(f"{archive}: weights do not fit the BERT of {bert} "
                            f"({first[1].strip() if len(first) > 1 else first[0]})") from None
    if missing or unexpected:
        raise SumbenchError(f"{archive}: weights do not fit BERT + a tag layer (missing "
                            f"{missing[:3]}, unexpected {unexpected[:3]})")
    with atomic_directory(out) as tmp:
        model.save_pretrained(str(tmp))
        transformers.AutoTokenizer.from_pretrained(str(bert)).save_pretrained(str(tmp))
    return Path(out)
