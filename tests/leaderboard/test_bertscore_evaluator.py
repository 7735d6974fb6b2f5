"""BERTScore P/R/F (leaderboard/evaluators/bertscore) against the official `bert_score.score`
(bert-score 0.3.13, run here) on a tiny RoBERTa (a byte-level BPE saved as a
`RobertaTokenizer`, so bert-score takes its RoBERTa branch) and a tiny BERT (WordPiece), several
references included; RoBERTa's prefix space; scores that do not depend on the batch or on
what was embedded before; empty texts; bad input."""
from __future__ import annotations

import json
import sys

import pytest

from leaderboard.evaluators.bertscore.encoder import load_encoder
from leaderboard.evaluators.bertscore.evaluator import (
    BertScoreEvaluator,
    parse_options,
    register,
)
from tasks.metrics.evaluators import configured, score_summaries
from tasks.plumbing.errors import SumbenchError

SUMMARIES = [
    "Hello world, the council closed the old bridge in Ohio in 1877.",
    "Ada Lovelace wrote the first program for the engine.",
    "The games were held in Paris in 1924, and many people came to watch them.",
    "Hello world, the council closed the old bridge in Ohio in 1877.",  # a duplicate
    "Nobody crossed it.",
    "  Babbage designed the engine in London.  ",
]
REFERENCES = [
    ["An Ohio bridge closed in 1877.", "The council closed a bridge in Ohio."],
    ["Lovelace wrote a program for Babbage's engine."],
    ["Paris hosted the Olympic games in 1924.", "In 1924 Paris hosted the games.",
     "Many came to the games."],
    ["The bridge in Ohio was closed by the council."],
    ["Nobody crossed the bridge after May."],
    ["Charles Babbage designed the Analytical Engine."],
]
CORPUS = SUMMARIES + [text for texts in REFERENCES for text in texts] + [
    "Hello world", "say Hello to the world", "Hello there"]
LAYER = 2  # of 3: the layers above it are dropped, as bert-score does


def _roberta_tokenizers():
    """The tiny byte-level BPE as two `RobertaTokenizer`s (bert-score's isinstance test):
    without the prefix space saved (as roberta-large's tokenizer ships), and with it."""
    from transformers import RobertaTokenizer

    from trainers.models.tiny import build_tiny_roberta_tokenizer

    fast = build_tiny_roberta_tokenizer(CORPUS * 20 + ["they said Hello world"] * 50,
                                        vocab_size=400)
    model = json.loads(fast.backend_tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split()) for m in model["merges"]]
    return [RobertaTokenizer(vocab=model["vocab"], merges=merges, add_prefix_space=prefix,
                             model_max_length=512) for prefix in (False, True)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """roberta (no prefix space saved), roberta-prefix (the same model, its tokenizer adding
    the prefix space itself, which the official code needs under transformers 5), bert, t5."""
    from transformers import RobertaModel

    from trainers.models.tiny import (
        _seeded_init,
        build_tiny_bert_encoder,
        build_tiny_t5,
        build_tiny_tokenizer,
        tiny_roberta_config,
    )

    root = tmp_path_factory.mktemp("bertscore")
    plain, prefixed = _roberta_tokenizers()
    config = tiny_roberta_config(len(plain), dropout=0.0)
    config.num_hidden_layers = 3
    model = _seeded_init(0, lambda: RobertaModel(config)).eval()
    for name, tokenizer in (("roberta", plain), ("roberta-prefix", prefixed)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    build_tiny_bert_encoder(CORPUS * 5, root / "bert", seed=1, layers=3)
    build_tiny_t5(build_tiny_tokenizer(CORPUS, vocab_size=300), root / "t5", d_model=32)
    return {name: str(root / name) for name in ("roberta", "roberta-prefix", "bert", "t5")}


def _official(folder: str, summaries, references) -> list[tuple[float, float, float]]:
    from bert_score import score

    precision, recall, f_score = score(summaries, references, model_type=folder,
                                       num_layers=LAYER, device="cpu", batch_size=4)
    return list(zip(precision.tolist(), recall.tolist(), f_score.tolist()))


def _flat(rows) -> list[float]:
    return [value for row in rows for value in row]


def _ours(folder: str, summaries, references, **options) -> list[tuple[float, ...]]:
    encoder = load_encoder(folder, LAYER)
    sides = [BertScoreEvaluator(side, {"model": folder, "layer": LAYER, **options},
                                encoder=encoder) for side in "prf"]
    return list(zip(*(side.score(summaries, references, None) for side in sides)))


def test_the_first_piece_of_hello_world_keeps_roberta_s_prefix_space(folders):
    from bert_score.utils import get_tokenizer, sent_encode

    encoder = load_encoder(folders["roberta"], LAYER)
    pieces = encoder.tokenizer.convert_ids_to_tokens(list(encoder.pieces("Hello world").ids))
    assert pieces == ["<s>", "ĠHello", "Ġworld", "</s>"]
    assert encoder.pieces(" Hello world ") == encoder.pieces("Hello world")
    # why the prefix space is added here: bert-score's call-time add_prefix_space=True is
    # ignored by transformers 5, so the official package drops it again (its issue #147)
    official = get_tokenizer(folders["roberta"])
    assert type(official).__name__ == "RobertaTokenizer"  # bert-score's RoBERTa branch
    assert official.convert_ids_to_tokens(sent_encode(official, "Hello world"))[1] == "Hello"


@pytest.mark.parametrize("model, official_model", [
    ("roberta", "roberta-prefix"), ("roberta-prefix", "roberta-prefix"), ("bert", "bert")])
def test_p_r_f_equal_the_official_bert_score_s(folders, model, official_model):
    ours = _ours(folders[model], SUMMARIES, REFERENCES)
    theirs = _official(folders[official_model], SUMMARIES, REFERENCES)
    assert _flat(ours) == pytest.approx(_flat(theirs), abs=1e-6)
    recalls = [row[1] for row in ours]
    assert len({round(value, 4) for value in recalls}) == len(ours), ours
    assert all(0.0 < value < 1.0 for row in ours for value in row)


def test_a_text_longer_than_the_model_is_cut_as_the_official_code_cuts_it(folders):
    long = " ".join(SUMMARIES * 30)  # about 1,400 pieces: cut at model_max_length, 512
    encoder = load_encoder(folders["roberta"], LAYER)
    assert len(encoder.pieces(long).ids) == 512
    ours = _ours(folders["roberta"], [long], [[long[:300]]])
    assert _flat(ours) == pytest.approx(_flat(_official(folders["roberta-prefix"], [long],
                                                        [[long[:300]]])), abs=1e-6)


def test_each_side_is_its_own_best_over_the_references(folders):
    """P, R and F each take the best reference; one-reference runs give every candidate."""
    multi = _ours(folders["bert"], SUMMARIES[2:3], REFERENCES[2:3])[0]
    singles = _official(folders["bert"], SUMMARIES[2:3] * 3, REFERENCES[2])
    assert multi == pytest.approx(tuple(max(values) for values in zip(*singles)), abs=1e-6)


def test_scores_depend_neither_on_the_batch_size_nor_on_what_was_embedded_before(folders):
    one = _ours(folders["roberta"], SUMMARIES, REFERENCES, batch_size=1)
    evaluator = BertScoreEvaluator("r", {"model": folders["roberta"], "layer": LAYER,
                                         "batch_size": 64},
                                   encoder=load_encoder(folders["roberta"], LAYER))
    first = evaluator.score(SUMMARIES, REFERENCES, None)
    assert first == pytest.approx([row[1] for row in one], abs=1e-6)
    unique = len({text.strip() for text in SUMMARIES + sum(REFERENCES, [])})
    assert evaluator.cost()["texts_embedded"] == unique
    # the next system against the same references embeds its own summaries only
    second = evaluator.score(SUMMARIES[::-1], REFERENCES[::-1], None)
    assert second == pytest.approx(first[::-1], abs=1e-6)
    assert evaluator.cost()["texts_embedded"] == 0
    evaluator.score(["A new summary."] + SUMMARIES[1:], REFERENCES, None)
    assert evaluator.cost()["texts_embedded"] == 1


def test_the_embedding_cache_is_bounded_and_eviction_changes_no_score(folders):
    small = load_encoder(folders["bert"], LAYER, cache_bytes=1)
    evaluator = BertScoreEvaluator("f", {"model": folders["bert"], "layer": LAYER},
                                   encoder=small)
    first = evaluator.score(SUMMARIES, REFERENCES, None)
    assert len(small.cache.values) == 1  # the latest text only: all the others went
    second = evaluator.score(SUMMARIES, REFERENCES, None)
    unique = len({text.strip() for text in SUMMARIES + sum(REFERENCES, [])})
    assert evaluator.cost()["texts_embedded"] == unique - 1
    assert second == pytest.approx(first, abs=1e-6)
    assert first == pytest.approx([row[2] for row in _official(folders["bert"], SUMMARIES,
                                                               REFERENCES)], abs=1e-6)


def test_an_empty_summary_or_reference_scores_0_where_the_official_code_fails(folders):
    rows = _ours(folders["roberta"], ["", "   ", SUMMARIES[1], SUMMARIES[1]],
                 [REFERENCES[1], REFERENCES[1], [""], ["", REFERENCES[1][0]]])
    assert rows[:3] == [(0.0, 0.0, 0.0)] * 3
    assert rows[3] == pytest.approx(_ours(folders["roberta"], SUMMARIES[1:2],
                                          REFERENCES[1:2])[0], abs=1e-6)
    with pytest.raises(AttributeError, match="build_inputs_with_special_tokens"):
        _official(folders["bert"], [""], [REFERENCES[1]])


def test_registered_sides_run_through_the_evaluator_interface(folders):
    register()
    options = {"model": folders["bert"], "layer": str(LAYER), "batch_size": "2",
               "device": "cpu"}
    values = {side: score_summaries(configured(f"bertscore-{side}", options), SUMMARIES,
                                    REFERENCES, None, f"bertscore-{side}") for side in "prf"}
    theirs = _official(folders["bert"], SUMMARIES, REFERENCES)
    ours = list(zip(values["p"], values["r"], values["f"]))
    assert _flat(ours) == pytest.approx(_flat(theirs), abs=1e-6)
    evaluator = configured("bertscore-r", options)
    settings = evaluator.settings
    assert (settings["model"], settings["layer"], settings["idf"], settings["value"]) == (
        folders["bert"], LAYER, False, "recall")
    assert configured("bertscore-f").settings["model"] == "roberta-large"
    assert configured("bertscore-f").settings["layer"] == 17
    # another model takes its own default layer, not roberta-large's: a folder has none
    assert "give layer=N" in configured("bertscore-f", {"model": folders["bert"]}).problem()


@pytest.mark.parametrize("model, options, references, message", [
    ("bert", {}, REFERENCES[:-1], "5 reference lists for 6 summaries"),
    ("bert", {}, REFERENCES[:-1] + [[]], "summary 6 has no reference"),
    ("t5", {}, REFERENCES, r"'.*t5' is an encoder-decoder checkpoint \(t5\), not an encoder"),
    ("bert", {"layer": 4}, REFERENCES, "layer 4 is out of range for .*: it has 3 layers"),
    ("missing", {}, REFERENCES, "the BERTScore model '.*missing' cannot be loaded"),
])
def test_bad_input_is_a_one_line_error_naming_it(folders, model, options, references,
                                                 message):
    folder = folders.get(model) or folders["bert"] + "-missing"
    evaluator = BertScoreEvaluator("r", {"layer": LAYER, **options, "model": folder,
                                         "device": "cpu"})
    with pytest.raises(SumbenchError, match=message) as caught:
        evaluator.score(SUMMARIES, references, None)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("options, message", [
    ({"colour": "red"}, "unknown BERTScore option 'colour'"),
    ({"batch_size": "0"}, "batch_size='0': expected a positive integer"),
    ({"layer": "-1"}, "layer='-1': expected a layer number >= 0"),
])
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(SumbenchError, match=message):
        parse_options(options)
    assert BertScoreEvaluator("r", {"model": "some/unknown-model"}).problem().endswith(
        "give layer=N")


def test_without_bert_score_another_model_s_layer_names_the_extra(monkeypatch):
    """bert-score's table is the only thing the evaluator takes from the package."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "bert_score" else found(name, *args))
    monkeypatch.setitem(sys.modules, "bert_score.utils", None)  # import fails
    assert BertScoreEvaluator("r", {"model": "bert-base-uncased"}).problem() == (
        "bertscore-r: the default layer of the model 'bert-base-uncased' comes from "
        "bert-score's table, and bert-score is not installed: pip install "
        "'sumbench[bertscore]', or give layer=N")
    assert BertScoreEvaluator("r", {"model": "bert-base-uncased", "layer": 9}).problem() is None
    assert BertScoreEvaluator("r").problem() is None  # roberta-large's 17 is sumbench's own
