"""The `alignscore` presence backend without the official package: its chunk and claim rules
on worked examples, the aggregation against each row scored alone and padded to 512 as the
official code pads, batching and cache invariance, the `claim_sentences` choice, and bad input
(each a one-line error; a checkpoint that holds code is refused without running it).
Identity with the official fork: tests/leaderboard/test_alignscore_official.py."""
from __future__ import annotations

import pickle
import re

import pytest

from leaderboard.evaluators.pyramid.alignscore import (
    AlignScoreBackend,
    claim_sentences,
    premise_chunks,
)
from leaderboard.evaluators.pyramid.alignscore_checkpoint import pair_max_length
from leaderboard.evaluators.pyramid.presence import (
    PRESENCE_BACKENDS,
    PresenceBackendError,
    build_backend,
)
from tasks.plumbing.errors import UnknownNameError

SENTENCE = "Ada Lovelace wrote the first program for the new engine in London."  # 12 words
SUMMARY = "Ada Lovelace wrote a program. Babbage designed the engine. It ran in London."
UNITS = ["Lovelace wrote a program.", "Who designed the engine? Babbage",
         "Mr. Smith closed a bridge in Ohio.", "Babbage designed it. Ada ran it."]


def words(count_sentences: int) -> str:
    return " ".join([SENTENCE] * count_sentences)


@pytest.mark.parametrize(("text", "expected_sizes"), [
    ("", [0]),                      # one empty chunk: [""]
    (SUMMARY, [3]),                 # under 350 words: one chunk
    (words(29), [29]),              # 348 words
    (words(30), [15, 15]),          # 360 words: 2 wanted, 15 sentences each
    (words(61), [20, 20, 20, 1]),   # 732 words: 3 wanted, 20 each, the rest a 4th
    (words(2) + " " + " ".join(["word"] * 400), [1, 1, 1]),  # 3 sentences, 2 wanted
], ids=["empty", "short", "348 words", "360 words", "732 words", "3 sentences, 424 words"])
def test_premise_chunks_follow_the_official_rule(text, expected_sizes):
    chunks = premise_chunks(text)
    assert [len(claim_sentences(c)) if c else 0 for c in chunks] == expected_sizes
    assert " ".join(chunks) == " ".join(claim_sentences(text)) if text else chunks == [""]


@pytest.mark.parametrize(("unit", "how", "expected"), [
    ("Who designed the engine? Babbage", "split", ["Who designed the engine?", "Babbage"]),
    ("Who designed the engine? Babbage", "whole", ["Who designed the engine? Babbage"]),
    ("Mr. Smith closed a bridge in Ohio.", "split", ["Mr. Smith closed a bridge in Ohio."]),
    ("  Babbage designed it.  Ada ran it. ", "split", ["  Babbage designed it.",
                                                       "Ada ran it."]),  # Punkt keeps it
    ("  Babbage designed it.  Ada ran it. ", "whole", ["Babbage designed it.  Ada ran it."]),
])
def test_claim_sentences(unit, how, expected):
    assert claim_sentences(unit, how) == expected


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A tiny RoBERTa base folder and an AlignScore-shaped Lightning checkpoint on it."""
    import torch
    from transformers import RobertaModel

    from trainers.models.tiny import build_tiny_roberta_tokenizer, tiny_roberta_config

    root = tmp_path_factory.mktemp("alignscore")
    tokenizer = build_tiny_roberta_tokenizer([SUMMARY, *UNITS, words(5)] * 5, vocab_size=400)
    config = tiny_roberta_config(len(tokenizer))
    base = root / "tiny-roberta"
    config.save_pretrained(base)
    tokenizer.save_pretrained(base)
    generator = torch.Generator().manual_seed(3)
    torch.manual_seed(0)
    state = {f"base_model.{k}": v for k, v in RobertaModel(config).state_dict().items()}
    hidden = config.hidden_size
    state.update({"tri_layer.weight": torch.randn(3, hidden, generator=generator) * 3,
                  "tri_layer.bias": torch.zeros(3), "bin_layer.weight": torch.zeros(2, hidden),
                  "bin_layer.bias": torch.zeros(2), "reg_layer.weight": torch.zeros(1, hidden),
                  "reg_layer.bias": torch.zeros(1), "mlm_head.bias": torch.zeros(5)})
    checkpoint = root / "AlignScore-tiny.ckpt"
    torch.save({"state_dict": state, "hyper_parameters": {"model": str(base),
                                                          "using_pretrained": True},
                "pytorch-lightning_version": "1.7.7", "epoch": 2}, checkpoint)
    return {"root": root, "base": base, "checkpoint": checkpoint, "state": state,
            "backend": AlignScoreBackend(str(checkpoint), batch_size=32)}


def test_registered_and_built_by_name(lab):
    assert PRESENCE_BACKENDS.get("alignscore") is AlignScoreBackend
    backend = build_backend("alignscore", model=str(lab["checkpoint"]),
                            base_model=str(lab["base"]), claim_sentences="whole")
    assert backend.claims == "whole" and backend.max_length == 512


def test_score_is_the_mean_of_maxima_of_rows_each_padded_to_512(lab):
    import torch

    backend = lab["backend"]
    pairs = [(summary, unit) for summary in (SUMMARY, words(61), "") for unit in UNITS]
    results = backend.score(pairs)
    for (summary, unit), result in zip(pairs, results):
        chunks, sentences = premise_chunks(summary), claim_sentences(unit)
        maxima = []
        for sentence in sentences:
            values = []
            for chunk in chunks:
                encoded = backend.tokenizer(chunk, sentence, truncation="only_first",
                                            padding="max_length", max_length=512,
                                            return_tensors="pt")
                with torch.inference_mode():
                    values.append(float(backend.model(encoded["input_ids"],
                                                      encoded["attention_mask"])[0]))
            maxima.append(max(values))
        assert result.details["sentence_scores"] == pytest.approx(maxima, abs=1e-6)
        assert result.probability == pytest.approx(sum(maxima) / len(maxima), abs=1e-6)
        assert result.label == int(result.probability > 0.5)
    assert len({round(r.probability, 4) for r in results}) > len(pairs) // 2


def test_batching_and_the_cache_leave_values_unchanged(lab, tmp_path):
    pairs = [(SUMMARY, unit) for unit in UNITS] + [(words(40), unit) for unit in UNITS]
    reference = [r.probability for r in lab["backend"].score(pairs)]
    one = AlignScoreBackend(str(lab["checkpoint"]), batch_size=1, chunk_size=3,
                            cache=tmp_path / "cache.sqlite")
    assert [r.probability for r in one.score(pairs)] == pytest.approx(reference, abs=1e-6)
    calls = one.forward_calls
    assert calls > len(pairs)  # one row per forward: the long premises have 2 chunks
    again = [r.probability for r in one.score(pairs + pairs[:2])]
    assert one.forward_calls == calls and again == pytest.approx(reference + reference[:2],
                                                                abs=1e-6)


def test_claim_sentences_whole_scores_a_qa_as_one_claim(lab):
    split = lab["backend"]
    whole = AlignScoreBackend(str(lab["checkpoint"]), claim_sentences="whole")
    qa, statement = UNITS[1], UNITS[0]
    split_qa, whole_qa, split_one, whole_one = (
        split.score([(SUMMARY, qa)])[0], whole.score([(SUMMARY, qa)])[0],
        split.score([(SUMMARY, statement)])[0], whole.score([(SUMMARY, statement)])[0])
    assert len(split_qa.details["sentence_scores"]) == 2
    assert len(whole_qa.details["sentence_scores"]) == 1
    assert whole_qa.probability != pytest.approx(split_qa.probability, abs=1e-4)
    assert whole_one.probability == pytest.approx(split_one.probability, abs=1e-6)
    assert whole.fingerprint() != split.fingerprint()


def test_a_claim_longer_than_the_pair_is_cut_longest_first(lab):
    backend = lab["backend"]
    claim = "Babbage designed " + " and ".join(["the engine"] * 300) + "."
    features = backend.prepare([(words(40), claim), (SUMMARY, "Babbage designed it.")])
    assert len(features[0]["input_ids"]) == 512
    expected = backend.tokenizer(words(40), claim, truncation=True, max_length=512)
    assert features[0]["input_ids"] == expected["input_ids"]
    assert features[1]["input_ids"] == backend.tokenizer(
        SUMMARY, "Babbage designed it.")["input_ids"]


class RunsCode:
    """Pickles as a call of exec: loading it (weights_only=False) would write `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def _save(path, payload):
    import torch

    torch.save(payload, path)
    return path


def _bad_checkpoints(lab, root):
    """name -> (checkpoint path, base_model option, the error's words)."""
    state = lab["state"]
    no_head = {k: v for k, v in state.items() if not k.startswith("tri_layer")}
    half = {k: v for k, v in state.items() if "layer.1." not in k}
    (root / "notes.ckpt").write_text("not a checkpoint\n")
    return {
        "missing file": (root / "absent.ckpt", None, "does not exist"),
        "text file": (root / "notes.ckpt", None, "not a torch checkpoint"),
        "bare state dict": (_save(root / "bare.ckpt", state), None, "not a Lightning"),
        "no tri_layer": (_save(root / "nli.ckpt", {"state_dict": no_head}), None,
                         "not an AlignScore checkpoint"),
        "no base model named": (_save(root / "anon.ckpt", {"state_dict": state}), None,
                                "names no base model"),
        "weights missing": (_save(root / "half.ckpt", {"state_dict": half}),
                            str(lab["base"]), "lacks"),
        "another size": (_save(root / "wide.ckpt", {"state_dict": {
            **state, "tri_layer.weight": state["tri_layer.weight"].repeat(1, 2)}}),
            str(lab["base"]), re.escape("tri_layer.weight is [3, 64] in the checkpoint but "
                                        "[3, 32]")),
    }


@pytest.mark.parametrize("name", ["missing file", "text file", "bare state dict",
                                  "no tri_layer", "no base model named", "weights missing",
                                  "another size"])
def test_a_checkpoint_of_the_wrong_kind_is_one_line(lab, tmp_path, name):
    path, base, words_expected = _bad_checkpoints(lab, tmp_path)[name]
    with pytest.raises(PresenceBackendError, match=words_expected) as caught:
        AlignScoreBackend(str(path), base_model=base)
    assert "\n" not in str(caught.value)


def test_a_checkpoint_that_holds_code_is_refused_without_running_it(lab, tmp_path):
    marker = tmp_path / "ran.txt"
    path = _save(tmp_path / "evil.ckpt", {"state_dict": lab["state"],
                                          "hyper_parameters": {"model": str(lab["base"])},
                                          "callbacks": RunsCode(marker)})
    with pytest.raises(PresenceBackendError, match="refused.*exec") as caught:
        AlignScoreBackend(str(path))
    assert "\n" not in str(caught.value) and not marker.exists()
    pickle.loads(pickle.dumps(RunsCode(marker)))  # the payload is live: it runs when loaded
    assert marker.read_text() == "ran"


def test_a_base_model_that_is_not_roberta_is_refused(lab, tmp_path):
    from transformers import BertConfig

    BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64).save_pretrained(tmp_path / "tiny-bert")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "tiny-bert" / name).write_bytes((lab["base"] / name).read_bytes())
    with pytest.raises(PresenceBackendError, match="RoBERTa bases only"):
        AlignScoreBackend(str(lab["checkpoint"]), base_model=str(tmp_path / "tiny-bert"))


@pytest.mark.parametrize("unit", ["", "   ", "\n"], ids=["empty", "blank", "newline"])
@pytest.mark.parametrize("how", ["split", "whole"])
def test_an_empty_claim_is_one_line(lab, unit, how):
    backend = AlignScoreBackend(lab["backend"].model, lab["backend"].tokenizer,
                                claim_sentences=how)
    with pytest.raises(PresenceBackendError, match="no sentence to score") as caught:
        backend.score([(SUMMARY, UNITS[0]), (SUMMARY, unit)])
    assert "\n" not in str(caught.value).replace(repr(unit), "")


def test_bad_options(lab):
    with pytest.raises(UnknownNameError, match="claim_sentences"):
        AlignScoreBackend(str(lab["checkpoint"]), claim_sentences="sentences")
    with pytest.raises(PresenceBackendError, match="tokenizer"):
        AlignScoreBackend(lab["backend"].model)


class Limits:
    def __init__(self, model_max_length):
        self.model_max_length = model_max_length


@pytest.mark.parametrize(("given", "expected"), [(512, 512), (128, 128), (int(1e30), 512),
                                                 (1024, "exceeds the model's 512")])
def test_pair_length_is_the_tokenizers_within_the_model_positions(lab, given, expected):
    config = lab["backend"].model.config
    if isinstance(expected, int):
        assert pair_max_length(Limits(given), config) == expected
    else:
        with pytest.raises(PresenceBackendError, match=expected):
            pair_max_length(Limits(given), config)


def test_pyramid_runs_end_to_end_on_realsumm(lab, pyramid_data_dir, tmp_path):
    """The backend by name (presence.pyramid_factory, as `sumbench pyramid` builds it) over
    one REALSumm system's first 12 summaries and their SCUs; a summary's score is the mean of
    its units' probabilities."""
    from leaderboard.evaluators.pyramid.presence import pyramid_factory
    from leaderboard.evaluators.pyramid.scoring import evaluate_system
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    system = "abs_bart_out"
    dataset = load_pyramid_dataset(pyramid_data_dir / "realsumm", systems=[system],
                                   labels=False)
    presence = pyramid_factory("alignscore")(dataset, system, "scus",
                                             model=str(lab["checkpoint"]), batch_size="64",
                                             cache=str(tmp_path / "cache.sqlite"))
    summaries, units = dataset.summaries[system][:12], dataset.units["scus"][:12]
    scores = evaluate_system(system, summaries, units, presence).per_example
    assert len(scores) == 12 and all(0.0 <= s <= 1.0 for s in scores)
    first = lab["backend"].score([(dataset.summaries[system][0], unit)
                                  for unit in dataset.units["scus"][0]])
    assert scores[0] == pytest.approx(sum(r.probability for r in first) / len(first), abs=1e-6)
