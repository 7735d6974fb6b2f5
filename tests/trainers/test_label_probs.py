"""Yes/No label probabilities: label tokens, label positions, batched vs the official
one-generate-per-example computation, batch-size invariance, beams."""
from __future__ import annotations

import pytest

from tasks.plumbing.errors import SumbenchError
from trainers.inference.generation import GeneratedRow
from trainers.inference.label_probs import (
    LabelTokens,
    build_tiny_labeler,
    fit_to_lines,
    label_token_ids,
    label_values,
    marker_label_steps,
    official_label_probabilities,
    official_label_steps,
)
from trainers.inference.predict import PredictSpec, label_probabilities


@pytest.fixture(scope="module")
def fac_sources(fac_test_records):
    from tasks import get_task

    task = get_task("FAC")
    return [task.format(record)[0].source for record in fac_test_records]


@pytest.fixture(scope="module")
def tokenizer(fac_tokenizer):
    return fac_tokenizer


@pytest.fixture(scope="module")
def labeler(tokenizer, fac_sources):
    return build_tiny_labeler(tokenizer, fac_sources, stop_after_label=True)


@pytest.fixture(scope="module")
def repeater(tokenizer, fac_sources):
    return build_tiny_labeler(tokenizer, fac_sources, stop_after_label=False)


def cpu_spec(**fields) -> PredictSpec:
    return PredictSpec(**{"device": "cpu", "max_new_tokens": 5, **fields})


# ---- tokens and positions ----------------------------------------------------------------
def test_label_tokens_are_the_target_tokens(tokenizer):
    labels = label_token_ids(tokenizer)
    assert tokenizer.convert_ids_to_tokens([labels.yes_id, labels.no_id]) == ["ĠYes", "ĠNo"]
    target = tokenizer("SENT0 Yes SENT1 No", add_special_tokens=False)["input_ids"]
    assert labels.yes_id in target and labels.no_id in target


def test_label_tokens_refuse_a_tokenizer_without_single_label_tokens():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "SENT0": 3}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                        eos_token="</s>", unk_token="<unk>")
    with pytest.raises(SumbenchError, match="label word 'Yes'"):
        label_token_ids(tokenizer)


def test_official_steps_are_the_generated_yes_no_tokens(tokenizer):
    labels = label_token_ids(tokenizer)
    ids = tokenizer("SENT0 Yes SENT1 No maybe Yes", add_special_tokens=False)["input_ids"]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    expected = [step for step, piece in enumerate(pieces) if piece in ("ĠYes", "ĠNo")]
    assert len(expected) == 3
    assert official_label_steps(ids, labels) == expected


def test_marker_steps_follow_each_sent_marker(tokenizer):
    text = "SENT0 Yes SENT1 No SENT10 Yes SENT1 Yes SENT3"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    label_steps = [step for step, piece in enumerate(pieces) if piece in ("ĠYes", "ĠNo")]
    steps = marker_label_steps(tokenizer, ids)
    # SENT1 repeated: the first one counts; SENT3 at the very end has no label step
    assert steps == {0: label_steps[0], 1: label_steps[1], 10: label_steps[2]}


def test_fit_to_lines_pads_and_truncates_like_the_official_scorer():
    fitted = fit_to_lines([0.9, 0.8], [0, 2], 4)
    assert fitted.values == (0.9, 0.8, 0.0, 0.0) and fitted.missing == 2
    cut = fit_to_lines([0.9, 0.8, 0.7], [0, 2, 4], 2)
    assert cut.values == (0.9, 0.8) and cut.extra == 1 and cut.steps == (0, 2)


def test_positional_rule_gives_zero_to_lines_without_marker(tokenizer):
    labels = label_token_ids(tokenizer)
    ids = tuple(tokenizer("SENT0 Yes SENT2 No", add_special_tokens=False)["input_ids"])
    step_p = tuple(0.1 * (step + 1) for step in range(len(ids) + 1))
    row = GeneratedRow(0, ids, "SENT0 Yes SENT2 No", step_p)
    positional = label_values(row, 3, "positional", labels, tokenizer)
    yes_step, no_step = official_label_steps(ids, labels)
    assert positional.values == (step_p[yes_step], 0.0, step_p[no_step])
    assert positional.missing == 1
    official = label_values(row, 3, "official", labels, tokenizer)
    assert official.values == (step_p[yes_step], step_p[no_step], 0.0)
    first = label_values(row, None, "positional", labels, tokenizer)
    assert first.values == (step_p[0],) and first.missing == 0


# ---- against the official computation ----------------------------------------------------
@pytest.mark.slow
def test_batched_equals_one_generate_per_example(labeler, tokenizer, fac_sources):
    spec = cpu_spec(batch_size=4)
    batched = label_probabilities(labeler, tokenizer, fac_sources, spec)
    official = [official_label_probabilities(labeler, tokenizer, s, spec) for s in fac_sources]
    assert [len(p) for p in batched] == [1] * len(fac_sources)
    assert [len(p) for p in official] == [1] * len(fac_sources)
    assert max(abs(a[0] - b[0]) for a, b in zip(batched, official)) <= 1e-6
    values = [p[0] for p in batched]
    assert min(values) < 0.5 < max(values)  # the labeler answers both ways


def test_every_generated_label_counts_under_the_official_rule(repeater, tokenizer, fac_sources):
    spec = cpu_spec(batch_size=3, max_new_tokens=4)
    batched = label_probabilities(repeater, tokenizer, fac_sources[:6], spec)
    official = [official_label_probabilities(repeater, tokenizer, s, spec)
                for s in fac_sources[:6]]
    assert [len(p) for p in batched] == [4] * 6
    for ours, theirs in zip(batched, official):
        assert ours == pytest.approx(theirs, abs=1e-6)
    positional = label_probabilities(repeater, tokenizer, fac_sources[:6],
                                     cpu_spec(batch_size=3, label_rule="positional"))
    assert [p[0] for p in positional] == pytest.approx([p[0] for p in batched], abs=1e-6)


def test_results_do_not_depend_on_batch_size(repeater, tokenizer, fac_sources):
    sources = fac_sources[2:10]
    one = label_probabilities(repeater, tokenizer, sources, cpu_spec(batch_size=1,
                                                                     max_new_tokens=3))
    four = label_probabilities(repeater, tokenizer, sources, cpu_spec(batch_size=4,
                                                                      max_new_tokens=3))
    assert [len(p) for p in one] == [len(p) for p in four]
    assert max(abs(a - b) for p, q in zip(one, four) for a, b in zip(p, q)) <= 1e-6


def test_beam_search_labels_match_the_official_beam_handling(repeater, tokenizer, fac_sources):
    spec = cpu_spec(batch_size=3, max_new_tokens=3, label_num_beams=2)
    batched = label_probabilities(repeater, tokenizer, fac_sources[:6], spec)
    official = [official_label_probabilities(repeater, tokenizer, s, spec)
                for s in fac_sources[:6]]
    assert [len(p) for p in batched] == [3] * 6
    for ours, theirs in zip(batched, official):
        assert ours == pytest.approx(theirs, abs=1e-6)


def test_label_tokens_dataclass_is_frozen():
    labels = LabelTokens(1, 2)
    with pytest.raises(AttributeError):
        labels.yes_id = 3  # type: ignore[misc]
