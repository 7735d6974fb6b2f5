"""AutoQAPyramid's official QA generation: the QASem joint argument parser, by the rules of
`qasem_parser` (plroit/qasem_parser, qasem_parser/argument_detection.py
`T2TQasemArgumentParser`; common_defs.py) as QAPyramid's `run_autoqapyramid.py` runs it
(`run_qa_gen`, `parse_qasem`), with the model `cattana/flan-t5-xl-qasem-joint-tokenized`.

- Sentences: NLTK's `sent_tokenize` of each reference; each distinct sentence is parsed once
  and a reference's QAs are its sentences' QAs in order (a repeated sentence repeats them).
- Predicates: the parser's spaCy tokens and its predicate detector's output (verbs by
  spaCy's POS; nominalisations by a BERT classifier and qanom's verb forms) are an input,
  recorded per sentence (`RecordedPredicates`): sumbench runs no spaCy model.
- Prompt: "Generate QA pairs:" then the tokens, the predicate written
  `<extra_id_0>word<extra_id_1>`, joined by spaces; beam search (4 beams, max_length 256).
- Output: special tokens kept, pad and eos removed; QA pairs split at `<extra_id_2>`, the
  question up to the first "?" (plus "?"), answers split at `<extra_id_3>`; each answer is
  located in the tokens (exact, then lower-cased; spaces between tokens optional) at the
  occurrence closest to the predicate, else dropped.
- QAs: each frame printed as qasem_parser prints it and read back by QAPyramid's
  `parse_qasem` (answer = text before the first "(", question = inside the brackets after
  the role's ":"), so an answer holding "(" or ":" is cut there, as officially. The role
  printed is qanom's `get_role` (its name, e.g. "R1"), as the official parser imports it, with
  `sumbench[qasem]`; without qanom every role prints "R", and `role_labels` says so in the
  output's provenance. A frame without arguments gives no QAs (`parse_qasem` raises
  ValueError on it).
- Run-time settings, as the official run: the model in fp32 (`as_official_dtype`), batches of
  32 prompts, decoding with the tokenizer's own space clean-up
  (`clean_up_tokenization_spaces` of its config).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.errors import DataError, SumbenchError
from tasks.units.stus import jsonl_records
from trainers.inference.generation import clean_up_spaces, seq2seq_texts

PROMPT_PREFIX = ("Generate", "QA", "pairs:")
PREDICATE_START, PREDICATE_END = "<extra_id_0>", "<extra_id_1>"
QA_SEPARATOR, ANSWER_SEPARATOR = "<extra_id_2>", "<extra_id_3>"
NUM_BEAMS, MAX_LENGTH, BATCH_SIZE = 4, 256, 32


@dataclass(frozen=True)
class Predicate:
    index: int
    lemma: str
    pos: str

    def __str__(self) -> str:
        return f"{self.lemma}-{self.pos[0].lower()}"


@dataclass(frozen=True)
class SentenceParse:
    """One sentence's tokens and predicates (the parser's spaCy tokens and detector)."""
    tokens: list[str]
    predicates: list[Predicate]


def prompt(tokens: Sequence[str], index: int) -> str:
    marked = f"{PREDICATE_START}{tokens[index]}{PREDICATE_END}"
    return " ".join([*PROMPT_PREFIX, *tokens[:index], marked, *tokens[index + 1:]])


def _match_end(tokens: Sequence[str], start: int, answer: str) -> int | None:
    """Where the answer ends when it starts at token `start` (spaces between tokens may be
    missing in the answer); None when it does not match."""
    answer = answer.strip()
    if not answer:
        return None
    position = 0
    for offset, token in enumerate(tokens[start:]):
        if token != answer[position:position + len(token)]:
            return None
        position += len(token)
        while position < len(answer) and answer[position].isspace():
            position += 1
        if position == len(answer):
            return start + offset + 1
    return None


def answer_spans(tokens: Sequence[str], answer: str) -> list[tuple[int, int]]:
    """Non-overlapping token spans that spell `answer` (`find_answer_idx`)."""
    found, last_end = set(), -1
    for start, token in enumerate(tokens):
        if answer[:len(token)] != token or start < last_end:
            continue
        end = _match_end(tokens, start, answer)
        if end is not None:
            found.add((start, end))
            last_end = end
    return sorted(found)


def locate_answer(tokens: Sequence[str], answer: str, index: int) -> tuple[int, int] | None:
    """The answer's span closest to the predicate token (exact, then lower-cased)."""
    spans = answer_spans(tokens, answer) or answer_spans([t.lower() for t in tokens],
                                                         answer.lower())
    if not spans:
        return None

    def distance(span: tuple[int, int]) -> int:
        start, end = span
        if min(end, index + 1) - max(start, index) > 0:
            return 0
        return index - end if start < index else start - (index + 1)

    return min(spans, key=distance)  # the first of the closest, as `get_closest_span`


def clean_question(raw: str) -> str:
    """qasem_parser's `_clean_question`: slots "_" removed, spaces single, one "?"."""
    words = [word for word in raw.replace("_", "").split() if word]
    if words and words[-1] == "?":
        words = words[:-1]
    question = " ".join(words)
    return question if question.endswith("?") else question + "?"


def frame_arguments(decoded: str, tokens: Sequence[str], index: int, pad: str, eos: str,
                    role: Callable[[str], str | None]) -> list[str]:
    """Each argument as qasem_parser prints it: "answer (role: question)"."""
    arguments = []
    for pair in decoded.replace(pad, "").replace(eos, "").strip().split(QA_SEPARATOR):
        pieces = pair.split("?", 1)
        if len(pieces) <= 1:
            continue
        raw_question = pieces[0].strip() + "?"
        name = role(raw_question)
        for answer in (a.strip() for a in pieces[1].split(ANSWER_SEPARATOR)):
            span = locate_answer(tokens, answer, index)
            if span is not None:
                text = " ".join(tokens[span[0]:span[1]])
                label = f"{name}: " if name else ""
                arguments.append(f"{text} ({label}{clean_question(raw_question)})")
    return arguments


def frame_qas(frame: str) -> list[tuple[str, str]]:
    """(question, answer) pairs of one printed frame, read as QAPyramid's `parse_qasem`
    reads them."""
    values = frame[frame.index(":") + 1:].strip()
    pairs = []
    for item in values.split("|"):
        answer = item[:item.index("(")].strip()
        question = item[item.index("("):-1].strip()
        if ":" in question:
            question = question[question.index(":") + 1:].strip()
        if "(" in question:
            question = question[question.index("(") + 1:].strip()
        if ")" in question:
            question = question[:question.index(")")].strip()
        pairs.append((question, answer))
    return pairs


#: the role printed for every argument without qanom
FALLBACK_ROLE = "R"


def role_labels() -> str:
    """Where the printed roles come from, for the output's provenance."""
    try:
        from importlib.metadata import version

        from qanom.question_info import get_role  # noqa: F401
    except ImportError:
        return (f"'{FALLBACK_ROLE}' for every role: qanom is not installed "
                f"(pip install 'sumbench[qasem]' for the official get_role)")
    return f"qanom {version('qanom')} get_role"


def default_role() -> Callable[[str], str | None]:
    """qanom's `get_role` (its role's name) when qanom is installed, else FALLBACK_ROLE."""
    try:
        from qanom.question_info import get_role
    except ImportError:
        return lambda question: FALLBACK_ROLE

    def role(question: str) -> str | None:
        found = get_role(question)
        return found.name if found else None

    return role


class RecordedPredicates:
    """Tokens and predicates per sentence in a JSONL file: {"sentence", "tokens",
    "predicates": [{"index", "lemma", "pos"}, ...]} per line (what qasem_parser's spaCy
    tokenizer and `BertPredicateDetector` give the sentence)."""

    def __init__(self, path: str | Path):
        self.path, self.parses = str(path), {}
        for line, record in jsonl_records(path, ("sentence", "tokens", "predicates")):
            self.parses[record["sentence"]] = self._parse(record, line)

    def _parse(self, record: dict, line: int) -> SentenceParse:
        tokens = record["tokens"]
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise DataError("expected a list of token strings", path=self.path, line=line,
                            field="tokens")
        predicates = []
        for item in record["predicates"] if isinstance(record["predicates"], list) else [None]:
            if not (isinstance(item, dict) and isinstance(item.get("index"), int)
                    and 0 <= item["index"] < len(tokens) and isinstance(item.get("lemma"), str)
                    and isinstance(item.get("pos"), str) and item["pos"]):
                raise DataError("expected predicates [{index (a token position), lemma, "
                                "pos}]", path=self.path, line=line, field="predicates")
            predicates.append(Predicate(item["index"], item["lemma"], item["pos"]))
        return SentenceParse(tokens, predicates)

    def __call__(self, sentence: str) -> SentenceParse:
        if sentence not in self.parses:
            raise SumbenchError(f"{self.path} has no tokens and predicates for the sentence "
                                f"{sentence!r}")
        return self.parses[sentence]


def as_official_dtype(model):
    """The parser in fp32, as the official run loaded it (transformers 4 loaded fp32 by
    default; transformers 5 keeps a checkpoint's own dtype)."""
    import torch

    return model.to(torch.float32)


def qasem_qa_generator(model, tokenizer, parses: Callable[[str], SentenceParse], *,
                       batch_size: int = BATCH_SIZE, num_beams: int = NUM_BEAMS,
                       max_length: int = MAX_LENGTH,
                       role: Callable[[str], str | None] | None = None):
    """`generate(references) -> [[(question, answer), ...] per reference]`."""
    role = role or default_role()

    def generate(references: Sequence[str]) -> list[list[tuple[str, str]]]:
        import nltk

        split = [nltk.sent_tokenize(reference) for reference in references]
        sentences = list(dict.fromkeys(s for sentence_list in split for s in sentence_list))
        frames = _parse_frames(model, tokenizer, [(s, parses(s)) for s in sentences],
                               batch_size, num_beams, max_length, role)
        qas = {s: [pair for frame in frames[s] for pair in frame_qas(frame)] for s in sentences}
        return [[pair for s in sentence_list for pair in qas[s]] for sentence_list in split]

    return generate


def decoded(tokenizer, output) -> list[str]:
    """The generated texts as the official parser decodes them: special tokens kept, spaces
    cleaned up when the tokenizer's own config says so (`clean_up_tokenization_spaces`)."""

    texts = tokenizer.batch_decode(output, skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return [clean_up_spaces(text) for text in texts]
    return texts


def _parse_frames(model, tokenizer, parsed, batch_size, num_beams, max_length, role
                  ) -> dict[str, list[str]]:
    """{sentence: its printed frames with arguments}, the model run in batches."""
    from tqdm import tqdm

    jobs = [(sentence, parse, predicate) for sentence, parse in parsed
            for predicate in parse.predicates]
    with tqdm(total=len(jobs), desc="QASem argument parser", unit="prompt", disable=None,
              leave=False) as bar:
        texts = seq2seq_texts(model, tokenizer, [prompt(p.tokens, pred.index)
                                                 for _, p, pred in jobs],
                              batch_size=batch_size, num_beams=num_beams,
                              max_length=max_length, progress=bar,
                              decode=lambda sequences: decoded(tokenizer, sequences))
    frames: dict[str, list[str]] = {sentence: [] for sentence, _ in parsed}
    for (sentence, parse, predicate), text in zip(jobs, texts):
        arguments = frame_arguments(text, parse.tokens, predicate.index,
                                    tokenizer.pad_token, tokenizer.eos_token, role)
        if arguments:
            frames[sentence].append(f"{predicate}:  {' | '.join(arguments)}")
    return frames
