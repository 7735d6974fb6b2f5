"""sumbench's A2CU, A3CU and SemiAutoACU against the official package's own code on the same
tiny models and texts: `autoacu` 0.1.0 from PyPI, installed without its pins into a folder of
its own (`.ci/run` does; SUMBENCH_AUTOACU_OFFICIAL names the folder), run with only what cannot
load here shimmed (bench/acu_official.py says what). GitHub HEAD's generation is 0.1.0's with
HEAD's two changes applied (no `min_length`, units through a set)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.acu_official import (
    HUB_TOKENIZERS,
    REQUIRE_ENV,
    build_a3cu,
    build_classifier,
    build_deberta_tokenizer,
    build_generator,
    official_autoacu,
    official_folder,
)
from leaderboard.evaluators.acu.evaluator import (
    A2CUEvaluator,
    A3CUEvaluator,
    SemiAutoACUEvaluator,
    parse_options,
    writer_of,
)
from tasks.plumbing.kept import forget_models

from helpers import official_or_skip

pytestmark = pytest.mark.slow

REFERENCES = ["Ada Lovelace wrote the first program. She worked with Babbage in London.",
              "The council closed the bridge in Ohio in 1877.",
              "Paris hosted the Olympic games in 1924.", ""]
SUMMARIES = ["Lovelace wrote a program for Babbage's engine.", "An Ohio bridge closed in 1877.",
             "", "The games were held in Paris."]
HUMAN_UNITS = [["Lovelace wrote a program.", "She worked with Babbage."],
               ["The bridge closed.", "It was in Ohio.", "It closed in 1877."],
               ["Paris hosted the games."], ["The games were held."]]


def _official() -> Path:
    return official_or_skip(official_folder(), REQUIRE_ENV,
                            "the official autoacu 0.1.0 is not installed (pip install --no-deps "
                            "--target .ci-autoacu autoacu==0.1.0, or SUMBENCH_AUTOACU_OFFICIAL="
                            "DIR)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The official folder, the tiny models and sumbench's options for them: the classifier
    spread over every (text, unit) pair the tests classify (one for the generated units, one
    for the human units)."""
    official = _official()
    root = tmp_path_factory.mktemp("acu-official")
    texts = REFERENCES + SUMMARIES
    generator = build_generator(texts, root / "generator")
    options = {"generator": str(generator), "generator_tokenizer": str(generator),
               "device": "cpu"}
    units = [tuple(unit for variant in ("pypi", "head") for unit in writer_of(parse_options(
        "a2cu", {**options, "variant": variant})).units([text])[0]) for text in texts]
    count = len(REFERENCES)
    pairs = [(text, unit.strip()) for reference, summary, ref_units, summary_units, human in
             zip(REFERENCES, SUMMARIES, units, units[count:], HUMAN_UNITS)
             for text, found in ((summary, ref_units), (reference, summary_units))
             for unit in found]
    tokenizer = build_deberta_tokenizer(texts * 3 + [unit for unit in sum(units, ())])
    classifier = build_classifier(tokenizer, root / "classifier", pairs=pairs)
    human = build_classifier(tokenizer, root / "human", pairs=[
        (summary, unit) for summary, units in zip(SUMMARIES, HUMAN_UNITS) for unit in units])
    a3cu = build_a3cu(texts, root / "a3cu", pairs=list(zip(SUMMARIES, REFERENCES)))
    forget_models()
    yield {"official": official, "root": root, "a3cu": str(a3cu), "human": str(human),
           "tokenizers": dict(zip(HUB_TOKENIZERS, (generator, classifier))),
           "options": {**options, "classifier": str(classifier),
                       "classifier_tokenizer": str(classifier)}}
    forget_models()


def _ours(lab, options=None) -> dict[str, list[float]]:
    values = {**lab["options"], **(options or {})}
    return {side: A2CUEvaluator(f"a2cu-{side}", side, values).score(
        SUMMARIES, [[text] for text in REFERENCES], None) for side in "rpf"}


@pytest.mark.parametrize("variant", ["pypi", "head"])
def test_a2cu_recall_precision_and_f1_equal_the_official_package(lab, variant):
    with official_autoacu(lab["official"], lab["tokenizers"], head=variant == "head") as acu:
        official = acu.A2CU(lab["options"]["generator"], lab["options"]["classifier"],
                            device="cpu")
        recall, precision, f1 = official.score(REFERENCES, SUMMARIES, recall_only=False,
                                               verbose=False)
    ours = _ours(lab, {"variant": variant})
    assert ours["r"] == pytest.approx(recall, abs=1e-6)
    assert ours["p"] == pytest.approx(precision, abs=1e-6)
    assert ours["f"] == pytest.approx(f1, abs=1e-6)
    # the check has teeth: units found and units missed
    assert len(set(recall + precision)) >= 2, (recall, precision)


def test_the_variants_differ_where_head_drops_repeated_units(lab):
    pypi = writer_of(parse_options("a2cu", {**lab["options"], "variant": "pypi"}))
    head = writer_of(parse_options("a2cu", {**lab["options"], "variant": "head"}))
    texts = REFERENCES + SUMMARIES
    repeated = [units for units in pypi.units(texts) if len(set(units)) < len(units)]
    assert repeated, "the tiny generator should repeat a unit somewhere"
    assert all(len(set(units)) == len(units) for units in head.units(texts))


def test_batched_matching_and_generation_equal_one_at_a_time(lab):
    """sumbench's length-sorted batches (pairs 32 at a time, texts 4 at a time) against the
    official code one at a time, its default."""
    forget_models()
    batched = _ours(lab, {"batch_size": 32, "generation_batch_size": 4})
    forget_models()
    single = _ours(lab, {"batch_size": 1, "generation_batch_size": 1})
    assert batched == single


def test_a3cu_raw_outputs_and_f1_equal_the_official_package(lab):
    with official_autoacu(lab["official"], lab["tokenizers"]) as acu:
        official = acu.A3CU(lab["a3cu"], cpu=True)
        recall, precision, f1 = official.score(REFERENCES, SUMMARIES, verbose=False)
    # one pair at a time, as the official default: identical; batches change the rounding,
    # which the tiny head (spread from barely varying states) magnifies
    for batch_size, tolerance in ((1, 1e-6), (16, 1e-4)):
        ours = {side: A3CUEvaluator(f"a3cu-{side}", side, {
            "model": lab["a3cu"], "device": "cpu", "batch_size": batch_size}).score(
                SUMMARIES, [[text] for text in REFERENCES], None) for side in "rpf"}
        assert ours["r"] == pytest.approx(recall, abs=tolerance)
        assert ours["p"] == pytest.approx(precision, abs=tolerance)
        assert ours["f"] == pytest.approx(f1, abs=tolerance)
    assert max(recall) - min(recall) > 1.0  # raw outputs, spread (no sigmoid)


def test_semiautoacu_equals_the_official_matching_over_the_same_units(lab, tmp_path):
    import json

    units_file = tmp_path / "acus.tsv"
    units_file.write_text("".join("\t".join(units) + "\n" for units in HUMAN_UNITS))
    ours = SemiAutoACUEvaluator("semiautoacu", options={
        "classifier": lab["human"], "classifier_tokenizer": lab["human"], "device": "cpu",
        "units": str(units_file)}).score(SUMMARIES, None, None)
    paths = {name: tmp_path / name for name in ("ref", "cand", "acus", "scores")}
    paths["ref"].write_text("".join(text + "\n" for text in REFERENCES))
    paths["cand"].write_text("".join(text + "\n" for text in SUMMARIES))
    paths["acus"].write_text("".join(json.dumps({"acus": units}) + "\n"
                                     for units in HUMAN_UNITS))
    with official_autoacu(lab["official"], lab["tokenizers"]) as acu:
        official = acu.A2CU(lab["options"]["generator"], lab["human"], device="cpu")
        official.acu_matching(str(paths["ref"]), str(paths["cand"]), str(paths["acus"]),
                              str(paths["scores"]), str(tmp_path), 1)
    expected = [float(line) for line in paths["scores"].read_text().split()]
    assert ours == pytest.approx(expected, abs=1e-6)
    assert len(set(expected)) >= 2, expected
