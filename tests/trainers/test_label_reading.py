"""Reading the Llama / Vicuna styles' FAC, EXT and EVEXT answers (usb-baselines.md §5.4, §6):
P(Yes) / (P(Yes) + P(No)) recorded by the HF causal backend at generated Yes/No tokens (on a tiny
causal model with synthetic logits), only the answer's first line counted, the list-length rules,
the release's phrase rules, the records through the official scorer, and the unreadable count."""
from __future__ import annotations

import math
import re

import pytest

from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, read_jsonl
from tests.trainers.test_fewshot import OracleBackend, oracle, split
from trainers.fewshot.chat_client import ScoredText
from trainers.fewshot.label_reading import (
    DEFAULT_READINGS,
    LABEL_READINGS,
    answer_line,
    label_values,
    read_labels,
    resolve_label_reading,
)
from trainers.fewshot.prompts import Prompt, get_style
from trainers.fewshot.runner import fewshot_predict

OFFLINE_TEXTS = ["CONTENT: the cat sat on the mat.", "SUMMARY: a cat sat.", "LABEL: Yes",
                 "LABELS: SENT0 Yes SENT1 No", "the dog ran to the park."] * 20


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ---- a tiny causal model with synthetic logits ---------------------------------------------
@pytest.fixture(scope="module")
def bigram():
    """A tiny Llama whose logits at every position are a fixed row chosen by that position's
    token (a bigram table): the answers and their Yes/No scores are known in advance."""
    import torch

    from trainers.models.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(OFFLINE_TEXTS, vocab_size=400)
    model = build_tiny_causal_lm(tokenizer, seed=0)

    def token(text: str) -> int:
        return tokenizer.convert_tokens_to_ids(text)

    ids = {"yes": token("ĠYes"), "no": token("ĠNo"), "nl": token("Ċ"), "cat": token("Ġcat"),
           "colon": tokenizer("LABEL:", add_special_tokens=False)["input_ids"][-1],
           "dot": tokenizer("the cat.", add_special_tokens=False)["input_ids"][-1],
           "yes_lower": token("Ġyes")}
    vocab = len(tokenizer)
    table = torch.full((vocab, vocab), -30.0)
    table[:, tokenizer.eos_token_id] = 5.0

    def row(previous: int, logits: dict[int, float]) -> None:
        table[previous] = -30.0
        for chosen, value in logits.items():
            table[previous, chosen] = value

    # "LABEL:" -> " Yes" (3.0 against No's 1.0, with "cat" at 2.5 holding much of the mass)
    row(ids["colon"], {ids["yes"]: 3.0, ids["no"]: 1.0, ids["cat"]: 2.5})
    row(ids["yes"], {ids["nl"]: 4.0, ids["no"]: 1.0})      # " Yes" -> newline
    row(ids["nl"], {ids["no"]: 2.0, ids["yes"]: 1.5})      # newline -> " No" (after the cut)
    row(ids["no"], {ids["nl"]: 3.0})                       # " No" -> newline
    row(ids["dot"], {ids["yes_lower"]: 2.0, ids["yes"]: 1.0, ids["no"]: 0.0})  # -> " yes"
    original = model.forward

    def forward(input_ids=None, **options):
        output = original(input_ids=input_ids, **options)
        output.logits = table.to(output.logits.device)[input_ids]
        return output

    model.forward = forward
    return {"model": model, "tokenizer": tokenizer, "ids": ids, "table": table}


def text_prompt(text: str, stops=()) -> Prompt:
    return Prompt(text, None, "LABEL:", tuple(stops), "yes_no")


def test_the_backend_records_renormalised_yes_at_each_generated_yes_no_token(bigram, tmp_path):
    from trainers.fewshot.backends import CausalLMBackend

    backend = CausalLMBackend(bigram["model"], bigram["tokenizer"], batch_size=2,
                              cache=tmp_path / "cache.sqlite")
    prompt = text_prompt("CONTENT: the cat sat.\nSUMMARY: a cat.\nLABEL:")
    [answer] = backend.generate([prompt], [6], label_probabilities=True)
    assert isinstance(answer, ScoredText) and answer.startswith(" Yes\n No\n No")
    # P(Yes) / (P(Yes) + P(No)) of each step: sigmoid of the logit difference, whatever the
    # mass of the other tokens ("cat" at 2.5 beside Yes's 3.0)
    assert answer.yes_probabilities == pytest.approx(
        {1: sigmoid(3.0 - 1.0), 6: sigmoid(1.5 - 2.0), 10: sigmoid(1.5 - 2.0)})
    full_softmax_yes = math.exp(3.0) / (math.exp(3.0) + math.exp(1.0) + math.exp(2.5)
                                        + (len(bigram["tokenizer"]) - 3) * math.exp(-30.0))
    assert answer.yes_probabilities[1] != pytest.approx(full_softmax_yes, abs=1e-3)
    for offset in answer.yes_probabilities:
        assert answer[offset:].startswith(("Yes", "No"))
    # only the tokens before the first newline count
    read = read_labels("probabilities", answer, answer.yes_probabilities, None)
    assert read.values == pytest.approx([sigmoid(2.0)]) and read.ok and read.readable
    # cached outputs keep their probabilities; a plain request is another cache entry
    again = backend.generate([prompt], [6], label_probabilities=True)[0]
    assert backend.generated == 1 and again.yes_probabilities == answer.yes_probabilities
    # a plain request takes the cached text (the same greedy answer) without probabilities
    plain = backend.generate([prompt], [6])[0]
    assert backend.generated == 1 and plain == str(answer)
    assert not hasattr(plain, "yes_probabilities")
    other = text_prompt("CONTENT: the dog ran.\nSUMMARY: a cat.\nLABEL:")
    assert backend.generate([other], [6])[0] == " Yes\n No\n No\n"
    assert backend.generated == 2
    # a request with probabilities never takes a plain cached answer
    scored = backend.generate([other], [6], label_probabilities=True)[0]
    assert backend.generated == 3 and scored.yes_probabilities == answer.yes_probabilities


def test_a_stop_at_the_newline_drops_the_later_tokens_and_batches_change_nothing(bigram):
    from trainers.fewshot.backends import CausalLMBackend

    backend = CausalLMBackend(bigram["model"], bigram["tokenizer"], batch_size=3)
    prompts = [text_prompt("CONTENT: the cat sat.\nSUMMARY: a cat.\nLABEL:", ("\n",)),
               text_prompt("CONTENT: a longer content line here.\nSUMMARY: a cat.\nLABEL:",
                           ("\n",)),
               text_prompt("CONTENT: the cat.", ("\n",))]
    batched = backend.generate(prompts, [6, 6, 6], label_probabilities=True)
    alone = [backend.generate([prompt], [6], label_probabilities=True)[0] for prompt in prompts]
    assert [str(a) for a in batched] == [str(a) for a in alone] == [" Yes", " Yes", " yes"]
    for one, other in zip(batched, alone):
        assert one.yes_probabilities == pytest.approx(other.yes_probabilities)
    assert batched[0].yes_probabilities == pytest.approx({1: sigmoid(2.0)})
    # a lowercase "yes" is no label token: no value, so FAC has no readable label
    assert batched[2].yes_probabilities == {}
    read = read_labels("probabilities", batched[2], batched[2].yes_probabilities, None)
    assert read.values == [] and not read.ok and not read.readable


def test_the_seq2seq_backend_records_them_too(bigram):
    import torch

    from trainers.fewshot.backends import Seq2SeqBackend
    from trainers.models.tiny import build_tiny_t5

    tokenizer, ids = bigram["tokenizer"], bigram["ids"]
    table = bigram["table"].clone()
    table[tokenizer.pad_token_id] = -30.0                 # the decoder start -> " No" / " Yes"
    table[tokenizer.pad_token_id, ids["no"]] = 0.5
    table[tokenizer.pad_token_id, ids["yes"]] = 0.25
    model = build_tiny_t5(tokenizer, seed=0)
    original = model.forward

    def forward(input_ids=None, decoder_input_ids=None, **options):
        output = original(input_ids=input_ids, decoder_input_ids=decoder_input_ids, **options)
        output.logits = table.to(output.logits.device)[decoder_input_ids]
        return output

    model.forward = forward
    backend = Seq2SeqBackend(model, tokenizer)
    [answer] = backend.generate([text_prompt("CONTENT: the cat.\nLABEL:", ("\n",))], [4],
                                label_probabilities=True)
    assert str(answer) == " No" and answer.yes_probabilities == pytest.approx(
        {1: float(torch.sigmoid(torch.tensor(0.25 - 0.5)))})


# ---- the readers ---------------------------------------------------------------------------
def test_probability_reading_counts_only_label_words_of_the_first_line():
    raw = " Yes, yes No\nSENT1 Yes"
    known = {1: 0.9, 6: 0.8, 10: 0.3, 19: 0.7}
    assert answer_line(raw) == " Yes, yes No"
    assert label_values(raw, known) == [0.9, 0.3]
    assert label_values(raw, {str(k): v for k, v in known.items()}) == [0.9, 0.3]
    assert label_values(raw, None) == []


@pytest.mark.parametrize("raw, known, values, ok, readable", [
    (" Yes", {1: 0.8}, [0.8], True, True),
    (" No", {1: 0.1}, [0.1], True, True),
    (" maybe", {}, [], False, False),                          # nothing read
    (" Yes No", {1: 0.8, 5: 0.3}, [0.8, 0.3], False, False),   # several values
    (" yes", {1: 0.8}, [], False, False),                      # lowercase: no label token
    ("\n Yes", {2: 0.8}, [], False, False),                    # after the first newline
])
def test_fac_needs_exactly_one_value(raw, known, values, ok, readable):
    read = read_labels("probabilities", raw, known, None)
    assert (read.values, read.ok, read.readable) == (values, ok, readable)


@pytest.mark.parametrize("raw, known, values, ok, readable", [
    ("SENT0 Yes SENT1 No SENT2 No", {6: 0.9, 16: 0.2, 25: 0.1}, [0.9, 0.2, 0.1], True, True),
    ("SENT0 Yes SENT1 No", {6: 0.9, 16: 0.2}, [0.9, 0.2], False, True),        # short
    ("SENT0 Yes SENT1 No SENT2 No SENT3 Yes", {6: .9, 16: .2, 25: .1, 34: .6},
     [0.9, 0.2, 0.1, 0.6], False, True),                                      # long
    ("SENT0 SENT1", {}, [], False, False),                                    # none
])
def test_line_answers_keep_their_values_for_the_length_rules(raw, known, values, ok, readable):
    read = read_labels("probabilities", raw, known, 3)
    assert read.values == pytest.approx(values) and (read.ok, read.readable) == (ok, readable)


@pytest.mark.parametrize("raw, value, parsed", [
    (" The summary is not consistent with the content.", 0.0, True),
    (" the summary is partially consistent", 0.0, True),
    (" The summary is consistent with the content.", 1.0, True),
    (" Some of the claims are not supported.", 0.0, True),
    (" insufficient evidence", 0.0, True),
    (" Yes", 1.0, True), (" yes, it is", 1.0, True), (" True", 1.0, True),
    (" No", 0.0, True), (" false", 0.0, True),
    (" yes or no", 1.0, True),                        # yes before no
    (" I cannot tell", 1.0, False),                   # the release's default: supported
    ("\n Yes", 1.0, False),                           # nothing on the answer line
])
def test_fac_phrase_rules_on_their_documented_cases(raw, value, parsed):
    read = read_labels("phrases", raw, None, None)
    assert read.values == [value] and read.ok == read.readable == parsed


def test_line_phrase_rules_read_sent_yes_no_pairs():
    read = read_labels("phrases", " SENT0 Yes SENT1 no SENT1 Yes\nSENT2 Yes", None, 3)
    assert read.values == [1.0, 0.0, 0.0] and not read.ok and read.readable
    read = read_labels("phrases", "SENT0 Yes SENT1 No SENT2 yes", None, 3)
    assert read.values == [1.0, 0.0, 1.0] and read.ok and read.readable
    read = read_labels("phrases", "nothing", None, 2)
    assert read.values == [0.0, 0.0] and not read.ok and not read.readable


def test_which_styles_and_tasks_read_labels():
    fac, abs_ = get_task("FAC"), get_task("ABS")
    assert LABEL_READINGS == ("probabilities", "phrases")
    for style in ("llama", "vicuna", "vicuna-chat"):
        assert DEFAULT_READINGS[style] == "probabilities"
        assert resolve_label_reading(get_style(style), fac, None) == "probabilities"
        assert resolve_label_reading(get_style(style), fac, "phrases") == "phrases"
        assert resolve_label_reading(get_style(style), abs_, "phrases") is None
    assert resolve_label_reading(get_style("flan-t5"), fac, None) is None
    assert resolve_label_reading(get_style("flan-t5"), fac, "phrases") == "phrases"
    with pytest.raises(SumbenchError, match="asks for sentence ids"):
        resolve_label_reading(get_style("gpt-3.5"), fac, "probabilities")
    with pytest.raises(SumbenchError, match="must be one of probabilities, phrases"):
        resolve_label_reading(get_style("llama"), fac, "tokens")


# ---- records through the official scorer, and the report -----------------------------------
class ScriptedOracle(OracleBackend):
    """The gold answers, but every `every`-th prompt answered by `spoil(answer)`; p(Yes) at
    the capitalised label words as given (1.0 / 0.0)."""

    def __init__(self, answers, spoil, every=2):
        super().__init__(answers)
        self.spoil, self.every, self.calls = spoil, every, 0

    def generate(self, prompts, caps, label_probabilities=False):
        outputs = []
        for prompt in prompts:
            answer = self.answers[prompt.text]
            if self.calls % self.every == 0:
                answer = self.spoil(answer)
            self.calls += 1
            known = {m.start(): 1.0 if m.group() == "Yes" else 0.0
                     for m in re.finditer(r"\b(Yes|No)\b", answer)} if label_probabilities \
                else {}
            outputs.append(ScoredText(answer, known) if label_probabilities else answer)
        self.prompts.extend(prompts)
        return outputs


def test_fac_answers_without_one_label_go_to_the_scorer_default_and_are_counted(
        usb_fixture_dir, tmp_path):
    task = get_task("FAC")
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    answers = oracle(task, test, train, "vicuna", seed=3).answers
    backend = ScriptedOracle(answers, lambda answer: answer.lower())   # " yes" / " no"
    records, report = fewshot_predict(task, test, train, backend, "vicuna", seed=3,
                                      out_dir=tmp_path)
    spoiled = (len(test) + 1) // 2
    assert report["label_reading"] == "probabilities"
    assert report["unreadable_answers"] == report["unparseable"] == spoiled
    assert sum(record["prediction"] == [] for record in records) == spoiled
    scores = task.score(records)
    assert scores["length_mismatches"] == spoiled
    # the official scorer reads an empty list as "supported" (probability of unsupported 0)
    gold_ok = [record for index, record in enumerate(records) if index % 2]
    assert all(record["prediction"] == [1.0 - record["label"]] for record in gold_ok)
    meta = read_json(tmp_path / "outputs" / f"{task.name}.meta.json")
    assert meta["report"]["unreadable_answers"] == spoiled
    assert meta["fingerprint"]["label_reading"] == "probabilities"
    rows = read_jsonl(tmp_path / "outputs" / f"{task.name}.jsonl")
    assert sum(not row["readable"] for row in rows) == spoiled
    # the phrase rules read the same answers ("yes" / "no" in any case): nothing unreadable
    records, report = fewshot_predict(task, test, train, ScriptedOracle(answers, str.lower),
                                      "vicuna", seed=3, out_dir=tmp_path,
                                      label_reading="phrases")
    assert report["label_reading"] == "phrases" and report["unreadable_answers"] == 0
    assert task.score(records)["auc"] == pytest.approx(1.0)
    assert report["generated_this_run"] == len(test)   # another fingerprint: not reused


@pytest.mark.parametrize("alias", ["EXT", "EVEXT"])
def test_line_answers_are_truncated_or_padded_by_the_scorer(usb_fixture_dir, tmp_path, alias):
    from tasks.metrics.classification import align_to_labels

    task = get_task(alias)
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    short = 0
    for limit in (None, 500):       # whole items (the scorer pads) and windows (stitching pads)
        answers = oracle(task, test, train, "llama", seed=1, max_prompt_tokens=limit).answers
        backend = ScriptedOracle(answers, drop_last, every=1)
        out = tmp_path / str(limit)
        records, report = fewshot_predict(task, test, train, backend, "llama", seed=1,
                                          out_dir=out, max_prompt_tokens=limit)
        rows = read_jsonl(out / "outputs" / f"{task.name}.jsonl")
        sizes = [row["lines"][1] - row["lines"][0] for row in rows]
        assert report["unparseable"] == len(rows)
        assert report["unreadable_answers"] == sizes.count(1)      # no label left at all
        assert [len(row["parsed"]) for row in rows] == [size - 1 for size in sizes]
        for index, record in enumerate(records):
            task.validate_record(record)
            windows = [row for row in rows if row["instance"] == index]
            gold = task.gold_prediction(record)
            # each window's list, padded with 0 for its last line
            expected = [value for row in windows for value in [*row["parsed"], 0.0]]
            assert len(expected) == len(gold)
            aligned, mismatched = align_to_labels(record["prediction"], len(gold))
            assert aligned == expected and mismatched == (len(windows) == 1)
        scores = task.score(records)
        assert scores["length_mismatches"] == report["items"] - report["windowed_items"]
        short += scores["length_mismatches"]
        if limit is None:
            assert report["windowed_items"] == 0
    assert short > 0


def drop_last(answer: str) -> str:
    """The answer line without its last `SENTk Yes|No` pair: one label fewer than lines."""
    line, _, rest = answer.partition("\n")
    return line.rsplit(" SENT", 1)[0] + "\n" + rest


def test_a_backend_without_probabilities_is_refused_and_other_tasks_keep_their_parsers(
        usb_fixture_dir, tmp_path):
    task = get_task("FAC")
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    answers = oracle(task, test, train, "llama", seed=0).answers

    class TextOnly(OracleBackend):
        reads_label_probabilities = False

    with pytest.raises(SumbenchError, match="--label-reading phrases"):
        fewshot_predict(task, test, train, TextOnly(answers), "llama", seed=0)
    records, report = fewshot_predict(task, test, train, TextOnly(answers), "llama", seed=0,
                                      label_reading="phrases")
    assert report["unreadable_answers"] == 0 and task.score(records)["auc"] == 1.0
    abs_task = get_task("ABS")
    test, train = (split(usb_fixture_dir, abs_task, "test"),
                   split(usb_fixture_dir, abs_task, "train"))
    backend = TextOnly(oracle(abs_task, test, train, "llama", seed=0).answers)
    _, report = fewshot_predict(abs_task, test, train, backend, "llama", seed=0)
    assert "label_reading" not in report and "unreadable_answers" not in report


def test_a_tokenizer_without_single_label_tokens_is_refused_before_generating(
        usb_fixture_dir, bigram):
    from trainers.fewshot.backends import CausalLMBackend

    task = get_task("FAC")
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    backend = CausalLMBackend(bigram["model"], bigram["tokenizer"])

    def split_words(*args, **kwargs):
        raise SumbenchError("the tokenizer does not encode the label word 'Yes' as one token")

    backend.check_label_probabilities = split_words
    with pytest.raises(SumbenchError, match="one token; use --label-reading phrases"):
        fewshot_predict(task, test, train, backend, "llama", seed=0)
    assert backend.generated == 0


def test_the_label_reading_option_is_declared_once():
    from benchmark.commands.options import SHARED

    option = SHARED["label_reading"]
    assert option.flags == ("--label-reading",) and option.choices == LABEL_READINGS
    assert option.default is None
