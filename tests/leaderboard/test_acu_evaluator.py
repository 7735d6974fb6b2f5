"""The AutoACU evaluators (`a2cu-r/-p/-f`, `a3cu`, `a3cu-r/-p/-f`, `semiautoacu`) on tiny local
models, without the official package (tests/leaderboard/test_acu_official.py compares with it):
registration and options, a checkpoint of the wrong kind, bad references and units, the units
and verdicts kept across systems, several references, RoSE's ACUs as a units file, and
Lite²Pyramid with ACUs (the `pyramid` evaluator over that file)."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from bench.acu_official import (
    build_a3cu,
    build_classifier,
    build_deberta_tokenizer,
    build_generator,
)
from leaderboard.evaluators.acu import evaluator as acu
from leaderboard.evaluators.acu import models as acu_models
from leaderboard.evaluators.acu.rose import read_records, rose_units, write_rose_units
from leaderboard.evaluators.pyramid.evaluator import PyramidEvaluator
from tasks.metrics.correlation import correlation
from tasks.metrics.evaluators import EVALUATORS, score_summaries
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.kept import forget_models
from tasks.units.unit_files import read_unit_file

from helpers import sumbench
from lb_helpers import SYSTEMS as PYRAMID_SYSTEMS
from lb_helpers import write_pyramid_folder

REFERENCES = ["The council closed the bridge in Ohio in 1877.",
              "Paris hosted the Olympic games in 1924."]
SYSTEMS = {"one": ["An Ohio bridge closed in 1877.", "The games were held in Paris."],
           "two": ["A bridge closed.", ""]}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("acu")
    texts = REFERENCES + [text for texts in SYSTEMS.values() for text in texts]
    generator = build_generator(texts, root / "generator")
    tokenizer = build_deberta_tokenizer(texts * 3)
    pairs = [(summary, reference) for summary in texts for reference in REFERENCES]
    classifier = build_classifier(tokenizer, root / "classifier", pairs=pairs)
    a3cu = build_a3cu(texts, root / "a3cu")
    forget_models()
    yield {"root": root, "generator": str(generator), "classifier": str(classifier),
           "a3cu": str(a3cu),
           "a2cu": {"generator": str(generator), "generator_tokenizer": str(generator),
                    "classifier": str(classifier), "classifier_tokenizer": str(classifier),
                    "device": "cpu"}}
    forget_models()


def _a2cu(models, side="r", **options):
    return acu.A2CUEvaluator(f"a2cu-{side}", side, {**models["a2cu"], **options})


def test_every_name_is_registered_with_its_settings():
    acu.register()
    names = ("a2cu-r", "a2cu-p", "a2cu-f", "a3cu", "a3cu-r", "a3cu-p", "a3cu-f", "semiautoacu")
    assert all(name in EVALUATORS for name in names)
    settings = EVALUATORS.get("a2cu-f").settings
    assert settings["value"] == "f1" and settings["variant"] == "pypi"
    assert settings["generator"] == "Yale-LILY/a2cu-generator"
    assert settings["classifier_tokenizer"] == "microsoft/deberta-xlarge-mnli"
    assert EVALUATORS.get("a3cu").settings["value"] == "recall"
    assert EVALUATORS.get("semiautoacu").reads_references is False
    head = EVALUATORS.get("a2cu-r").with_options({"variant": "head", "batch_size": "4"})
    assert (head.settings["variant"], head.settings["batch_size"]) == ("head", 4)


@pytest.mark.parametrize("name, options, message", [
    ("a2cu-r", {"variant": "git"}, "unknown A2CU variant 'git'"),
    ("a2cu-p", {"batch_size": "0"}, "batch_size='0': expected a positive integer"),
    ("a2cu-f", {"generation_batch_size": "x"}, "generation_batch_size='x'"),
    ("a3cu-r", {"generator": "x"}, "unknown a3cu option 'generator'"),
    ("semiautoacu", {"variant": "head"}, "unknown semiautoacu option 'variant'"),
])
def test_bad_options_are_one_line_errors(name, options, message):
    acu.register()
    with pytest.raises(SumbenchError) as error:
        EVALUATORS.get(name).with_options(options)
    assert message in str(error.value) and "\n" not in str(error.value)


def _bert_without_head(models):
    from trainers.models.tiny import build_tiny_bert_encoder

    folder = models["root"] / "bert"
    if not folder.exists():
        build_tiny_bert_encoder(REFERENCES, folder)
    return str(folder)


@pytest.mark.parametrize("evaluator, option, model, message", [
    ("a2cu-r", "classifier", "generator", "is a t5 checkpoint, not a deberta or deberta-v2"),
    ("a2cu-r", "generator", "classifier", "is a deberta checkpoint, not a t5 one"),
    ("a3cu-r", "model", "generator", "is a t5 checkpoint, not a bert one"),
    ("a3cu-r", "model", "bert", "has no trained 'linear' weights"),
    ("a2cu-r", "classifier", "missing", "does not exist"),
])
def test_a_checkpoint_of_the_wrong_kind_is_a_one_line_error(models, evaluator, option, model,
                                                            message):
    folder = {"generator": models["generator"], "classifier": models["classifier"],
              "bert": _bert_without_head(models) if model == "bert" else "",
              "missing": str(models["root"] / "nothing-here")}[model]
    options = {"device": "cpu", option: folder}
    if evaluator.startswith("a2cu"):
        options = {**models["a2cu"], **options}
    family = acu.A2CUEvaluator if evaluator.startswith("a2cu") else acu.A3CUEvaluator
    with pytest.raises(SumbenchError) as error:
        family(evaluator, "r", options).score(SYSTEMS["one"], [[r] for r in REFERENCES], None)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_classifier_without_its_head_is_refused(models, tmp_path):
    from transformers import DebertaConfig, DebertaModel

    DebertaModel(DebertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=32)
                 ).save_pretrained(tmp_path / "bare")
    values = acu.parse_options("semiautoacu", {"classifier": str(tmp_path / "bare"),
                                               "device": "cpu"})
    with pytest.raises(SumbenchError, match="no trained 'classifier' weights"):
        acu.matcher_of(values)


def test_references_of_the_wrong_length_or_missing_are_one_line_errors(models):
    evaluator = _a2cu(models)
    with pytest.raises(SumbenchError, match="1 references for 2 summaries"):
        score_summaries(evaluator, SYSTEMS["one"], [[REFERENCES[0]]], None)
    with pytest.raises(SumbenchError, match="summary 2 has no reference"):
        score_summaries(evaluator, SYSTEMS["one"], [[REFERENCES[0]], []], None)


def test_a_device_torch_lacks_is_a_one_line_error(models):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SumbenchError, match="torch sees no cuda device"):
        _a2cu(models, device="cuda").score(SYSTEMS["one"], [[r] for r in REFERENCES], None)


def test_reference_units_are_generated_once_for_every_system(models):
    forget_models()
    recall = _a2cu(models, "r")
    writer = acu.writer_of(recall.values)
    generated = []
    original = writer._generate
    writer._generate = lambda rows: generated.extend(rows) or original(rows)
    scores = {system: recall.score(texts, [[r] for r in REFERENCES], None)
              for system, texts in SYSTEMS.items()}
    assert len(generated) == len(REFERENCES)  # once each, not once per system
    matcher = acu.matcher_of(recall.values)
    classified = len(matcher.cache)
    f1 = _a2cu(models, "f").score(SYSTEMS["one"], [[r] for r in REFERENCES], None)
    assert len(generated) == len(REFERENCES) + len(SYSTEMS["one"])  # the summaries' units
    assert len(matcher.cache) > classified
    assert all(0.0 <= value <= 1.0 for value in scores["one"] + scores["two"] + f1)


def test_the_empty_summary_is_scored_as_the_official_code_scores_it(models):
    """"" reaches the classifier as `[CLS] [SEP] unit [SEP]` (test_acu_official checks the
    value against the package); no summaries give no scores."""
    scores = _a2cu(models, "r").score(["", "  "], [[r] for r in REFERENCES], None)
    assert len(scores) == 2 and scores[0] == scores[1]
    assert _a2cu(models, "r").score([], [], None) == []


@pytest.mark.parametrize("family, side", [("a2cu", "r"), ("a2cu", "f"), ("a3cu", "p")])
def test_several_references_give_the_best_single_reference_value(models, family, side):
    if family == "a2cu":
        evaluator = _a2cu(models, side)
    else:
        evaluator = acu.A3CUEvaluator("a3cu-p", "p", {"model": models["a3cu"],
                                                      "device": "cpu"})
    summaries = SYSTEMS["one"]
    single = [evaluator.score(summaries, [[reference]] * 2, None) for reference in REFERENCES]
    both = evaluator.score(summaries, [REFERENCES, REFERENCES[::-1]], None)
    assert both == [max(values) for values in zip(*single)]


def test_a3cu_batches_keep_each_summary_in_place(models):
    """Pairs sorted by length and batched come back in the summaries' order."""
    options = {"model": models["a3cu"], "device": "cpu"}
    texts = SYSTEMS["one"] + SYSTEMS["two"]
    references = [[REFERENCES[0]], [REFERENCES[1]]] * 2
    batched = acu.A3CUEvaluator("a3cu-r", "r", {**options, "batch_size": 3}).score(
        texts, references, None)
    single = [acu.A3CUEvaluator("a3cu-r", "r", {**options, "batch_size": 1}).score(
        [text], [refs], None)[0] for text, refs in zip(texts, references)]
    assert batched == pytest.approx(single, abs=1e-4)
    assert len(set(round(value, 6) for value in single)) == len(single)


def test_meta_eval_runs_a2cu_beside_another_metric_from_the_command_line(models, tmp_path,
                                                                         capsys):
    """`meta-eval --metric a2cu-r --metric chrf` with the models given as folders: one table,
    each system's A2CU mean that of the evaluator's own scores, the models in the settings."""
    folder = write_pyramid_folder(tmp_path / "pyramid", n_examples=2)
    (folder / "references.txt").write_text("\n".join(REFERENCES) + "\n")
    texts = {"alpha": SYSTEMS["one"], "beta": ["A bridge closed.", "Games."],
             "gamma": REFERENCES[::-1]}
    for system, summaries in texts.items():
        (folder / "summaries" / f"{system}.summary").write_text("\n".join(summaries) + "\n")
    options = [argument for key, value in models["a2cu"].items()
               for argument in ("--metric-option", f"a2cu-r:{key}={value}")]
    out = tmp_path / "out.json"
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", folder, "--metric",
                                  "a2cu-r", "--metric", "chrf", *options, "--out", out)
    assert code == 0, err
    assert list(json.loads(printed)) == ["a2cu-r", "chrf"]
    written = json.loads(out.read_text())
    references = [[line] for line in (folder / "references.txt").read_text().splitlines()]
    recall = _a2cu(models, "r")
    for system in PYRAMID_SYSTEMS:
        summaries = (folder / "summaries" / f"{system}.summary").read_text().splitlines()
        expected = float(np.mean(recall.score(summaries, references, None)))
        assert written["system_means"]["metrics"]["a2cu-r"][system] == pytest.approx(
            expected, abs=1e-12)
    settings = {entry["label"]: entry["settings"] for entry in written["config"]["metrics"]}
    assert settings["a2cu-r"]["generator"] == models["generator"]
    assert settings["a2cu-r"]["classifier"] == models["classifier"]
    means = written["system_means"]
    for metric in ("a2cu-r", "chrf"):
        expected = correlation([means["metrics"][metric][s] for s in PYRAMID_SYSTEMS],
                               [means["human"][s] for s in PYRAMID_SYSTEMS], "kendall")
        found = written["correlations"][metric]["all"]["system"]["kendall"]
        assert found == expected or (found is None and math.isnan(expected)), metric


def test_pickled_hub_checkpoints_load_as_the_safetensors_ones(models, tmp_path):
    """The hub's AutoACU repositories hold `pytorch_model.bin` only: the same weights saved
    that way score the same (transformers reads them weights-only)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    pickled = {}
    for role, auto_class in (("classifier", AutoModelForSequenceClassification),
                             ("a3cu", acu_models.linear_head_bert_class())):
        folder = tmp_path / role
        shutil.copytree(models[role], folder)
        state = auto_class.from_pretrained(models[role]).state_dict()
        torch.save(state, folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
        pickled[role] = str(folder)
    forget_models()
    texts, references = SYSTEMS["one"], [[r] for r in REFERENCES]
    a2cu = _a2cu(models, "r").score(texts, references, None)
    a3cu = acu.A3CUEvaluator("a3cu-r", "r", {"model": models["a3cu"], "device": "cpu"})
    a3cu_scores = a3cu.score(texts, references, None)
    forget_models()
    assert _a2cu(models, "r", classifier=pickled["classifier"]).score(
        texts, references, None) == a2cu
    assert acu.A3CUEvaluator("a3cu-r", "r", {"model": pickled["a3cu"], "device": "cpu"}).score(
        texts, references, None) == a3cu_scores
    forget_models()


# ---- SemiAutoACU and Lite²Pyramid over human ACUs --------------------------------------------
def _semi(models, units):
    return acu.SemiAutoACUEvaluator("semiautoacu", options={
        "classifier": models["classifier"], "classifier_tokenizer": models["classifier"],
        "device": "cpu", "units": units})


def test_semiautoacu_needs_a_units_file_of_one_line_per_summary(models, tmp_path):
    assert "needs units=FILE" in _semi(models, None).problem()
    assert "no units file" in _semi(models, str(tmp_path / "none.tsv")).problem()
    units = tmp_path / "acus.tsv"
    units.write_text("The bridge closed.\tIt was in Ohio.\n")
    with pytest.raises(DataError) as error:
        _semi(models, str(units)).score(SYSTEMS["one"], None, None)
    assert str(units) in str(error.value) and "1 examples but the folder has 2" in \
        str(error.value)
    units.write_text("The bridge closed.\tIt was in Ohio.\nParis hosted the games.\n")
    scores = score_summaries(_semi(models, str(units)), SYSTEMS["one"],
                             [[r] for r in REFERENCES], None)
    matcher = acu.matcher_of(_semi(models, str(units)).values)
    expected = [sum(matcher.labels([(SYSTEMS["one"][0], u) for u in ("The bridge closed.",
                                                                    "It was in Ohio.")])) / 2,
                float(matcher.labels([(SYSTEMS["one"][1], "Paris hosted the games.")])[0])]
    assert scores == expected
    assert _semi(models, str(units)).settings["units_sha256"]


HF_RECORD = {"source": "doc", "reference": "Ref one.", "reference_acus": ["A unit.", "B unit."],
             "annotations": {"bart": {"acu": 0.5}}}
PAGE_RECORD = {"id": 3, "reference": "Ref two.", "acu": ["C unit.", "D\tunit  with\nbreak."]}


def test_rose_records_become_a_units_file_pyramid_and_semiautoacu_read(tmp_path):
    listed, lines = tmp_path / "rose.json", tmp_path / "rose.jsonl"
    listed.write_text(json.dumps([HF_RECORD, PAGE_RECORD]))
    lines.write_text(json.dumps(HF_RECORD) + "\n\n" + json.dumps(PAGE_RECORD) + "\n")
    assert read_records(listed) == read_records(lines)
    units = tmp_path / "acus.tsv"
    assert write_rose_units(lines, units) == 2
    assert read_unit_file(units).units == (("A unit.", "B unit."),
                                           ("C unit.", "D unit with break."))
    # Lite²Pyramid with ACUs: the pyramid evaluator over the same file
    pyramid = PyramidEvaluator({"units": str(units), "presence": "lexical",
                                "threshold": "0.5"})
    assert pyramid.problem() is None
    assert pyramid.score(["A unit. B unit.", "nothing alike"], None, None) == [1.0, 0.0]


@pytest.mark.parametrize("records, message", [
    ([{"reference": "r"}], "record 1 has no ACUs"),
    ([HF_RECORD, {"acu": []}], "record 2: expected a non-empty list"),
    ([{"reference_acus": ["ok", 3]}], "field 'reference_acus'"),
    ([{"acu": ["  "]}], "record 1: expected a non-empty list of non-empty strings"),
])
def test_bad_rose_records_are_one_line_errors(records, message):
    with pytest.raises(DataError) as error:
        rose_units(records, "rose.json")
    assert message in str(error.value) and "rose.json" in str(error.value)


def test_unreadable_rose_files_name_the_file_and_line(tmp_path):
    broken = tmp_path / "rose.jsonl"
    broken.write_text(json.dumps(HF_RECORD) + "\n{not json\n")
    with pytest.raises(DataError, match=r"rose.jsonl:2: not JSON"):
        read_records(broken)
    with pytest.raises(DataError, match="cannot read the RoSE records"):
        read_records(tmp_path / "absent.json")
