"""EXT/EVEXT windows of whole sentences, cut as the USB release's Flan-T5 conversion cuts them.

The release (experiments/flant5/convert_datasets_for_flant5.py, budget 1024) counts the
prefix and each `SENT{k} {line}` separately, without special tokens, and adds a line only
while the sum stays strictly below the budget; EVEXT caps a line's count so that it fits an
empty window. The hand-computed tests use a word-level tokenizer that also splits digits, so
that `SENT{k}` costs 1 + the number of digits of k.
"""
from __future__ import annotations

import math
import re

import pytest

from tasks import get_task
from tasks.base import ModelInput
from tasks.plumbing.io import read_jsonl
from tasks.usb.common import sent_source, sentence_windows

EXT_PREFIX = "For each sentence, predict if it is important. "  # 10 words and marks


def wrap(tokenizer_object, eos: bool = True):
    """A transformers tokenizer; like T5's, it appends </s> unless `eos` is False."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    if eos:
        eos_id = tokenizer_object.token_to_id("</s>")
        tokenizer_object.post_processor = processors.TemplateProcessing(
            single="$A </s>", special_tokens=[("</s>", eos_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer_object, unk_token="<unk>",
                                   pad_token="<pad>", eos_token="</s>")


def word_level(texts, split_digits: bool = False, eos: bool = True):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    steps = [pre_tokenizers.Whitespace()]
    if split_digits:
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(
        special_tokens=["<pad>", "</s>", "<unk>"]))
    return wrap(tokenizer, eos)


CRAFTED_TEXTS = [EXT_PREFIX, "For each sentence in the content, predict if it provides any "
                 "evidence for the claim.  CLAIM: c CONTENT: ", "SENT0123456789 a b c d e f w"]


@pytest.fixture(scope="module")
def digits():
    """Words and marks are one token each, and so is every digit; appends </s>."""
    return word_level(CRAFTED_TEXTS, split_digits=True)


def fixture_texts(usb_fixture_dir) -> list[str]:
    texts = list(CRAFTED_TEXTS) + [" ".join(f"SENT{k} Yes SENT{k} No" for k in range(40))]
    for name in ("extractive_summarization", "evidence_extraction"):
        for record in read_jsonl(usb_fixture_dir / "task_datasets" / "all" / name / "test.jsonl"):
            texts.extend(record["input_lines"] + record.get("summary_lines", []))
    return texts


@pytest.fixture(scope="module")
def word_tokenizer(usb_fixture_dir):
    """A word-level tokenizer trained on the fixture texts; appends </s>."""
    return word_level(fixture_texts(usb_fixture_dir))


@pytest.fixture(scope="module")
def bpe_tokenizer(usb_fixture_dir):
    """A small byte-level BPE (GPT-2 style, no prefix space): counts are not additive."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(fixture_texts(usb_fixture_dir), trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return wrap(tokenizer)


class CharChunkTokenizer:
    """A real (if crude) tokenizer: one token per started 7 characters, plus one end token.

    Its counts are far from additive over pieces: counting the pieces alone (as the release
    does) and counting the joined string give different windows.
    """

    def __call__(self, text, add_special_tokens: bool = True):
        def ids(piece: str) -> list[int]:
            return [0] * (math.ceil(len(piece) / 7) + (1 if add_special_tokens else 0))
        if isinstance(text, list):
            return {"input_ids": [ids(piece) for piece in text]}
        return {"input_ids": ids(text)}


def count(tokenizer, text: str) -> int:
    """Tokens without special tokens, as the release counts."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def line_counts(task, instance, tokenizer, budget, lines) -> list[int]:
    """The release's count of each line of a window, `SENT{k}` numbered from 0."""
    counts = [count(tokenizer, f"SENT{k} {line}") for k, line in enumerate(lines)]
    if task.cap_line_tokens:
        cap = budget - count(tokenizer, task.prefix(instance)) - 1
        counts = [min(n, cap) for n in counts]
    return counts


def official_count(task, instance, tokenizer, budget, lines) -> int:
    return (count(tokenizer, task.prefix(instance))
            + sum(line_counts(task, instance, tokenizer, budget, lines)))


def ext(lines, labels=None) -> dict:
    return {"id": "a", "input_lines": list(lines), "labels": list(labels or [0] * len(lines))}


def evext(lines, evidence=(), claim="c") -> dict:
    return {"task": "evidence_extraction", "id": "a", "summ_idx": 0, "input_lines": list(lines),
            "labels": list(evidence), "claim": claim}


def check_windows(task, instance, tokenizer, budget) -> list[ModelInput]:
    """Every property the release's windowing has; returns the windows."""
    lines = instance["input_lines"]
    inputs = task.format(instance, tokenizer=tokenizer, max_input_tokens=budget)
    assert [m.window for m in inputs] == list(range(len(inputs)))
    assert inputs[0].lines[0] == 0 and inputs[-1].lines[1] == len(lines)
    for before, after in zip(inputs, inputs[1:]):
        assert before.lines[1] == after.lines[0]  # consecutive, each line exactly once
    prefix = task.prefix(instance)
    for index, model_input in enumerate(inputs):
        start, end = model_input.lines
        assert end > start
        assert model_input.source == sent_source(prefix, lines[start:end])
        numbers = [int(k) for k in re.findall(r" SENT(\d+) ", model_input.source + " ")]
        assert numbers == list(range(end - start))  # numbering restarts at SENT0
        fits = official_count(task, instance, tokenizer, budget, lines[start:end]) < budget
        assert fits or (end - start == 1 and not task.cap_line_tokens)  # EXT's lone long line
        if index + 1 < len(inputs):  # greedy: the next line would have reached the budget
            longer = official_count(task, instance, tokenizer, budget, lines[start:end + 1])
            assert longer >= budget
    parsed = [task.parse(m.target, instance, m) for m in inputs]
    gold = [float(label) for label in task.line_labels(instance)]
    assert task.combine(parsed, instance, inputs) == gold
    assert task.combine(parsed[::-1], instance, inputs[::-1]) == gold
    return inputs


# ---- hand-computed boundaries ------------------------------------------------------------
def test_digit_tokenizer_counts_as_the_tests_assume(digits):
    task = get_task("EVEXT")
    assert count(digits, EXT_PREFIX) == 10 == count(digits, get_task("EXT").prefix(ext([])))
    assert count(digits, task.prefix(evext([]))) == 22
    assert [count(digits, text) for text in ("SENT0 a b c", "SENT9 w", "SENT10 w")] == [5, 3, 4]
    assert len(digits("SENT0 a b c")["input_ids"]) == 6  # </s> appended, but never counted


def test_strict_budget_closes_a_window_that_would_reach_it(digits):
    task = get_task("EXT")
    instance = ext(["a b c", "d e f", "f", "a b", "a b c d e"], [1, 0, 1, 1, 0])
    # prefix 10; SENT0 a b c = 5 -> 15; SENT1 d e f = 5 -> 20 = budget: closes
    # then 10 + 5 + (SENT1 f) 3 = 18, + (SENT2 a b) 4 = 22: closes; 10 + 4 + 7 = 21: closes
    inputs = check_windows(task, instance, digits, 20)
    assert [m.lines for m in inputs] == [(0, 1), (1, 3), (3, 4), (4, 5)]
    assert inputs[1].source == f"{EXT_PREFIX} SENT0 d e f SENT1 f"
    assert inputs[1].target == "SENT0 No SENT1 Yes"
    # one more token of budget: 20 < 21 joins; 10 + 3 + 4 = 17, + (SENT2 a b c d e) 7 = 24
    assert [m.lines for m in check_windows(task, instance, digits, 21)] == \
        [(0, 2), (2, 4), (4, 5)]


def test_special_tokens_do_not_count_and_the_bound_is_strict():
    """Same windows whether the tokenizer appends </s> or not: the release counts none."""
    lines = ["a b c", "d e f", "f", "a b", "a b c d e"]
    for eos in (True, False):
        tokenizer = word_level(CRAFTED_TEXTS, split_digits=True, eos=eos)
        assert sentence_windows(EXT_PREFIX, lines, tokenizer, 20) == \
            [(0, 1), (1, 3), (3, 4), (4, 5)]


def test_line_counts_use_the_number_within_the_window(digits):
    task = get_task("EXT")
    # SENT0..SENT9 w cost 3 each: 10 + 30 = 40; SENT10 w costs 4: 44 = budget closes
    inputs = check_windows(task, ext(["w"] * 12), digits, 44)
    assert [m.lines for m in inputs] == [(0, 10), (10, 12)]
    assert inputs[1].source == f"{EXT_PREFIX} SENT0 w SENT1 w"
    assert [m.lines for m in check_windows(task, ext(["w"] * 12), digits, 45)] == \
        [(0, 11), (11, 12)]
    # numbering restarts: lines 10..19 cost 3 each in their own window (40 < 41); numbered
    # globally they would cost 4 and only 7 would fit
    assert [m.lines for m in check_windows(task, ext(["w"] * 20), digits, 41)] == \
        [(0, 10), (10, 20)]


def test_pieces_are_counted_alone_not_joined():
    """CharChunk counts ceil(len / 7): prefix 47 chars = 7; `SENT{k} ` + 8 chars = 14 = 2."""
    lines = ["abcdefgh"] * 8
    assert len(EXT_PREFIX) == 47
    # 7 + 2 * 6 = 19 < 20, a seventh line reaches 21
    assert sentence_windows(EXT_PREFIX, lines, CharChunkTokenizer(), 20) == [(0, 6), (6, 8)]
    # the joined six-line string is 137 characters: 20 tokens, over the budget with </s>
    assert len(sent_source(EXT_PREFIX, lines[:6])) == 137


def test_evext_caps_a_long_line_to_fit_an_empty_window(digits):
    task = get_task("EVEXT")
    long_line = " ".join(["w"] * 20)  # SENT1 + 20 words = 22 tokens, capped at 30 - 22 - 1 = 7
    instance = evext(["a b", long_line, "d"], evidence=[1, 2])
    # 22 + 4 = 26, + 7 = 33: closes; 22 + 7 = 29, + (SENT1 d) 3 = 32: closes; 22 + 3
    inputs = check_windows(task, instance, digits, 30)
    assert [m.lines for m in inputs] == [(0, 1), (1, 2), (2, 3)]
    assert inputs[1].source == f"{task.prefix(instance)} SENT0 {long_line}"  # nothing cut
    assert [m.target for m in inputs] == ["SENT0 No", "SENT0 Yes", "SENT0 Yes"]
    assert official_count(task, instance, digits, 30, [long_line]) == 29
    # a budget of prefix + 1 caps every line at 0 tokens (transformers truncates to nothing
    # at max_length=0), so the release puts all lines in one window
    assert [m.lines for m in task.format(instance, digits, 23)] == [(0, 3)]


def test_ext_line_too_long_for_any_window_gets_its_own(digits):
    """The one deviation: the release loops forever on such a line."""
    task = get_task("EXT")
    long_line = " ".join(["w"] * 15)  # SENT1/SENT0 + 15 words = 17 tokens; 10 + 17 >= 20
    instance = ext(["a", long_line, "b", "c"], [0, 1, 0, 1])
    inputs = check_windows(task, instance, digits, 20)
    assert [m.lines for m in inputs] == [(0, 1), (1, 2), (2, 4)]
    assert inputs[1].source == f"{EXT_PREFIX} SENT0 {long_line}"
    assert sentence_windows(EXT_PREFIX, [long_line] * 3, digits, 20) == [(0, 1), (1, 2), (2, 3)]


def test_no_lines_one_empty_window(digits):
    assert sentence_windows(EXT_PREFIX, [], digits, 20) == [(0, 0)]


# ---- fixture data --------------------------------------------------------------------------
def instances_of(usb_fixture_dir, name):
    task = get_task(name)
    path = usb_fixture_dir / "task_datasets" / "all" / task.name / "test.jsonl"
    return task, task.instances(read_jsonl(path))


@pytest.mark.parametrize("name", ["EXT", "EVEXT"])
@pytest.mark.parametrize("tokenizer_name", ["word_tokenizer", "bpe_tokenizer", "chars"])
def test_windows_fit_cover_and_stitch_back(usb_fixture_dir, request, name, tokenizer_name):
    tokenizer = (CharChunkTokenizer() if tokenizer_name == "chars"
                 else request.getfixturevalue(tokenizer_name))
    task, instances = instances_of(usb_fixture_dir, name)
    for instance in instances[:6]:
        lines = instance["input_lines"]
        whole = official_count(task, instance, tokenizer, 10 ** 6, lines)
        smallest = count(tokenizer, task.prefix(instance)) + 2  # room for a capped line
        for budget in (whole // 4, whole // 2, whole, whole + 1, whole + 50):
            budget = max(budget, smallest)
            inputs = check_windows(task, instance, tokenizer, budget)
            assert (len(inputs) == 1) == (budget > whole)
            if budget <= whole // 2:
                assert len(inputs) >= 2


def test_word_tokenizer_windows_pinned(usb_fixture_dir, word_tokenizer):
    task, instances = instances_of(usb_fixture_dir, "EXT")
    instance = instances[1]  # 11 lines
    # prefix 10; per line SENT{k} 1 + its words and marks: 4, 3, 13, 13, 2, 13 -> 58 < 60,
    # + 13 closes; 13 + 3 + 13 + 13 -> 52, + 13 closes; then the last line
    inputs = check_windows(task, instance, word_tokenizer, 60)
    assert [m.lines for m in inputs] == [(0, 6), (6, 10), (10, 11)]
    assert [official_count(task, instance, word_tokenizer, 60, instance["input_lines"][a:b])
            for a, b in (m.lines for m in inputs)] == [58, 52, 23]
    assert inputs[1].source == (
        "For each sentence, predict if it is important.  SENT0 Hollow Creek Bridge founded a "
        "larger plant in Perth in 1990. SENT1 Early life SENT2 Hollow Creek Bridge rebuilt a new "
        "plant in Kent in 1941. SENT3 Hollow Creek Bridge renamed a new plant in Bergen in 1871.")
    assert inputs[1].target == "SENT0 No SENT1 No SENT2 Yes SENT3 Yes"
    # 58 reaches a budget of 58: the sixth line moves to the second window
    assert [m.lines for m in check_windows(task, instance, word_tokenizer, 58)][0] == (0, 5)


def test_evext_tiny_budget_puts_each_line_alone(usb_fixture_dir, word_tokenizer):
    task, instances = instances_of(usb_fixture_dir, "EVEXT")
    instance = instances[0]
    budget = count(word_tokenizer, task.prefix(instance)) + 2  # every line capped at 1 token
    inputs = check_windows(task, instance, word_tokenizer, budget)
    assert [m.lines for m in inputs] == [(k, k + 1) for k in range(len(instance["input_lines"]))]
    assert all(m.source.endswith(f"CONTENT:  SENT0 {line}")
               for m, line in zip(inputs, instance["input_lines"]))


def test_without_tokenizer_or_budget_one_window(usb_fixture_dir, word_tokenizer):
    task, instances = instances_of(usb_fixture_dir, "EXT")
    instance = instances[0]
    for kwargs in ({}, {"tokenizer": word_tokenizer}, {"max_input_tokens": 5}):
        (model_input,) = task.format(instance, **kwargs)
        assert model_input.lines == (0, len(instance["input_lines"]))


def test_combine_rejects_gaps_and_fits_window_lengths(usb_fixture_dir, word_tokenizer):
    task, instances = instances_of(usb_fixture_dir, "EXT")
    instance = instances[1]
    inputs = task.format(instance, tokenizer=word_tokenizer, max_input_tokens=60)
    sizes = [m.lines[1] - m.lines[0] for m in inputs]
    with pytest.raises(ValueError, match="starts at line"):
        task.combine([[1.0] * s for s in sizes[1:]], instance, inputs[1:])
    with pytest.raises(ValueError, match="cover"):
        task.combine([[1.0] * s for s in sizes[:-1]], instance, inputs[:-1])
    short_and_long = [[0.9], [0.8] * 9] + [[0.5] * s for s in sizes[2:]]
    combined = task.combine(short_and_long, instance, inputs)
    assert combined[:sizes[0] + sizes[1]] == [0.9] + [0.0] * (sizes[0] - 1) + [0.8] * sizes[1]
    assert len(combined) == len(instance["input_lines"])
