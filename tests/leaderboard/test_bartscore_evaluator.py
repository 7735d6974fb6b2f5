"""BARTScore (`bartscore-r`, `-p`, `-f`) against the official neulab/BARTScore `BARTScorer`:
its outputs on the tiny BART of tests/data/bartscore_official (recorded once by that
folder's record.py; its README says how) are matched within 1e-6 (relative) at every
batch size, with
texts cut at 32 tokens on both sides, the empty text, several references (mean and max) and
the runner's avg_f and harm_f; then options, the registry, the encoder states reused across
calls, and bad input (one-line errors)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from leaderboard.evaluators.bartscore import evaluator as bartscore
from leaderboard.evaluators.bartscore.evaluator import BartScoreEvaluator, parse_options
from leaderboard.evaluators.bartscore.scoring import BartScorer, check_seq2seq
from tasks.metrics.evaluators import configured, score_summaries
from tasks.plumbing.errors import SumbenchError
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

from helpers import recorded_models, sumbench
from lb_helpers import write_pyramid_folder

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "bartscore_official"
#: the tiny BART the recording ran on, rebuilt by record.py's builder (`_recorded_model`)
MODEL = Path()
RECORDED = json.loads((FIXTURE / "recorded.json").read_text(encoding="utf-8"))
CASES = RECORDED["cases"]
#: relative: the official's float32 scores (|score| about 8 here) are exact to one unit in the
#: last place, 9.5e-7, and move by that much between its own batch sizes
TOLERANCE = 1e-6


@pytest.fixture(scope="module", autouse=True)
def _recorded_model(tmp_path_factory):
    global MODEL
    MODEL = recorded_models(tmp_path_factory, "bartscore_official", "build_model")


@pytest.fixture(scope="module")
def loaded():
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(str(MODEL)), \
        AutoTokenizer.from_pretrained(str(MODEL))


def scorer_of(loaded, max_length: int, **kwargs) -> BartScorer:
    return BartScorer(*loaded, max_length=max_length, device="cpu", **kwargs)


def options(**extra) -> dict:
    return {"model": str(MODEL), "device": "cpu", **extra}


def assert_close(ours, official):
    assert len(ours) == len(official)
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, official))
    assert worst <= TOLERANCE, worst


@pytest.mark.parametrize("max_length", [32, 1024])
@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_pair_scores_equal_the_official_class_at_every_batch_size(loaded, max_length,
                                                                  batch_size):
    case = CASES[str(max_length)]
    pairs = list(zip(case["sources"], case["targets"]))
    ours = scorer_of(loaded, max_length).log_likelihoods(pairs, batch_size)
    assert_close(ours, case["scores"])
    assert len(set(case["scores"])) > len(pairs) // 2  # the pairs' scores differ


def test_the_model_forward_path_gives_the_same_scores(loaded):
    case = CASES["32"]
    pairs = list(zip(case["sources"], case["targets"]))
    scorer = scorer_of(loaded, 32)
    assert scorer.output_layer_at_tokens  # BART: its output layer at real tokens only
    scorer.output_layer_at_tokens = False  # the whole forward, as for other seq2seq models
    assert_close(scorer.log_likelihoods(pairs, 8), case["scores"])


def test_both_sides_are_cut_at_max_length_and_the_empty_text_scores(loaded):
    case, tokenizer = CASES["32"], loaded[1]
    assert case["longest_tokens"] > 100  # texts far over 32 tokens, on both sides
    scorer = scorer_of(loaded, 32)
    ids = scorer.token_ids(case["sources"] + case["targets"])
    assert max(map(len, ids.values())) == 32
    cut = ids[case["sources"][-3]]
    assert cut[0] == tokenizer.bos_token_id and cut[-1] == tokenizer.eos_token_id
    assert ids[""] == [tokenizer.bos_token_id, tokenizer.eos_token_id]
    empty = [index for index, text in enumerate(case["targets"]) if text == ""]
    assert empty and all(case["scores"][index] < 0 for index in empty)


@pytest.mark.parametrize("refs", ["mean", "max"])
def test_directions_references_and_f_equal_the_official_runner(loaded, refs):
    case = CASES["multi_ref"]
    official = case[refs]
    scorer = scorer_of(loaded, 1024)
    for name, extra, key in (("bartscore-r", {}, "hypo_ref"), ("bartscore-p", {}, "ref_hypo"),
                             ("bartscore-f", {}, "avg_f"),
                             ("bartscore-f", {"f": "harm"}, "harm_f")):
        evaluator = BartScoreEvaluator(name, {"refs": refs, **extra}, scorer=scorer)
        ours = evaluator.score(case["summaries"], case["references"], None)
        assert_close(ours, official[key])
    assert official["avg_f"] != official["harm_f"]


def test_reference_states_are_kept_across_systems_with_the_same_scores(loaded):
    case = CASES["multi_ref"]
    scorer = scorer_of(loaded, 1024)
    evaluator = BartScoreEvaluator("bartscore-p", scorer=scorer)
    first = evaluator.score(case["summaries"], case["references"], None)
    assert evaluator.cost()["encoder_texts"] == len({r for refs in case["references"]
                                                     for r in refs})
    second = evaluator.score(case["summaries"][::-1], case["references"][::-1], None)
    assert evaluator.cost()["encoder_texts"] == 0  # every reference encoded already
    assert second == pytest.approx(first[::-1], rel=TOLERANCE)
    small = scorer_of(loaded, 1024, cache_tokens=8)  # states dropped between groups
    assert BartScoreEvaluator("bartscore-p", scorer=small).score(
        case["summaries"], case["references"], None) == pytest.approx(first, rel=TOLERANCE)


def test_registered_evaluators_load_the_model_by_option_and_record_their_settings():
    bartscore.register()
    case = CASES["multi_ref"]
    evaluator = configured("bartscore-f", options(refs="max", batch_size="2"))
    assert isinstance(evaluator, BartScoreEvaluator) and evaluator.values["batch_size"] == 2
    scores = score_summaries(evaluator, case["summaries"], case["references"], None)
    assert_close(scores, case["max"]["avg_f"])
    settings = evaluator.settings
    assert settings["model"] == str(MODEL) and settings["refs"] == "max"
    assert settings["f"] == "avg" and settings["max_length"] == 1024
    assert settings["revision"].startswith("files:") and "248f511" in settings["implementation"]
    assert "log P(reference | summary)" in configured("bartscore-r").settings["direction"]
    assert configured("bartscore-r").settings["model"] == "facebook/bart-large-cnn"


def test_meta_eval_by_name_scores_each_system_as_the_evaluator_does(tmp_path, capsys):
    bartscore.register()
    pyramid = write_pyramid_folder(tmp_path / "realsumm")
    out = tmp_path / "meta.json"
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", str(pyramid), "--metric",
                            "bartscore-r", "--metric-option", f"model={MODEL}",
                            "--metric-option", "device=cpu", "--metric-option",
                            "max_length=60", "--out", str(out))
    assert code == 0, err
    written = json.loads(out.read_text())
    dataset = load_pyramid_dataset(pyramid)
    evaluator = BartScoreEvaluator("bartscore-r", options(max_length=60))
    for system, texts in dataset.summaries.items():
        scores = evaluator.score(texts, [[text] for text in dataset.references], None)
        assert written["system_means"]["metric"][system] == \
            pytest.approx(sum(scores) / len(scores), rel=TOLERANCE)
    settings = written["config"]["metric_settings"]
    assert settings["evaluator"] == "bartscore-r" and settings["max_length"] == 60
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", str(pyramid), "--metric",
                            "bartscore-r", "--metric-option", "refs=median")
    assert code == 2 and "bartscore-r option refs='median': expected mean or max" in err


@pytest.mark.parametrize("name, values, message", [
    ("bartscore-r", {"refs": "median"}, r"bartscore-r option refs='median': expected mean or"),
    ("bartscore-r", {"batch_size": "0"}, "batch_size='0': expected a positive integer"),
    ("bartscore-r", {"f": "harm"}, "unknown bartscore-r option 'f'"),
    ("bartscore-f", {"f": "geometric"}, "expected avg or harm"),
    ("bartscore-p", {"max_lenght": "32"}, "unknown bartscore-p option 'max_lenght'.*did you "
                                          "mean 'max_length'"),
])
def test_a_bad_option_is_one_line_naming_it(name, values, message):
    with pytest.raises(SumbenchError, match=message) as error:
        parse_options(name, values)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("summaries, references, message", [
    (["a", "b"], [["x"]], "bartscore-r: 1 reference lists for 2 summaries"),
    (["a", "b"], [["x"], []], "summary 2 has no reference"),
    (["a"], [["x", None]], "reference 2 of summary 1 is not text"),
    ([None], [["x"]], "summary 1 is not text"),
])
def test_bad_references_are_one_line_errors(loaded, summaries, references, message):
    evaluator = BartScoreEvaluator("bartscore-r", scorer=scorer_of(loaded, 32))
    with pytest.raises(SumbenchError, match=message) as error:
        evaluator.score(summaries, references, None)
    assert "\n" not in str(error.value)


def _save_wrong_kind(folder: Path, kind: str) -> Path:
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForSequenceClassification,
        GPT2Config,
        GPT2LMHeadModel,
    )

    tokenizer = AutoTokenizer.from_pretrained(str(MODEL))
    if kind == "bert":
        model = BertForSequenceClassification(BertConfig(
            vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=8, pad_token_id=1))
    else:
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=8, n_layer=1,
                                           n_head=2, n_positions=64))
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_a_checkpoint_that_is_not_a_seq2seq_model_is_a_one_line_error(tmp_path, kind):
    folder = _save_wrong_kind(tmp_path / kind, kind)
    bartscore.register()
    evaluator = configured("bartscore-r", options(model=str(folder)))
    with pytest.raises(SumbenchError, match=f"cannot load the BARTScore model {folder}") \
            as error:
        evaluator.score(["a"], [["b"]], None)
    assert "\n" not in str(error.value)


def test_a_missing_folder_or_a_model_without_labels_to_decoder_inputs_is_refused(tmp_path,
                                                                              loaded):
    from transformers import GPT2Config, GPT2LMHeadModel

    missing = tmp_path / "nowhere"
    with pytest.raises(SumbenchError, match=f"the BARTScore model path {missing} does not"):
        BartScoreEvaluator("bartscore-r", options(model=str(missing))).score(["a"], [["b"]],
                                                                             None)
    with pytest.raises(SumbenchError, match="needs a sequence-to-sequence model like BART"):
        check_seq2seq(GPT2LMHeadModel(GPT2Config(n_embd=8, n_layer=1, n_head=2)), loaded[1])


def test_the_official_tokenizer_class_reads_the_fixture_as_sumbench_does(loaded):
    from transformers import BartTokenizer

    official = BartTokenizer.from_pretrained(str(MODEL))
    texts = CASES["32"]["sources"]
    assert official(texts)["input_ids"] == loaded[1](texts)["input_ids"]
    assert (official.bos_token_id, official.pad_token_id, official.eos_token_id) == (0, 1, 2)
