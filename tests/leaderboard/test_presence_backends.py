"""Presence backends: lexical (pinned F1 on REALSumm/PyrXSum), NLI, seq2seq Yes/No, causal LM."""
from __future__ import annotations

import math

import pytest

from leaderboard.evaluators.pyramid.presence import (
    CausalLMBackend,
    FewShotPrompter,
    LexicalBackend,
    NLIBackend,
    PresenceBackendError,
    Seq2SeqYesNoBackend,
    build_backend,
    calibrate_threshold,
    content_tokens,
    entailment_index,
    nli_outputs,
    presence_values,
    pyramid_factory,
    unit_token_recall,
)
from tasks.metrics.classification import binary_scores
from tasks.qapyramid.presence_detection import PresenceDetection

TEXTS = [
    "Police said the thieves took jewels from a store in London on Sunday.",
    "The team won the championship after a long season of hard games.",
    "Juan Arango bit Jesus Zavala during the game and could face a ban.",
    "The company reported record profits and hired new engineers.",
]
PAIRS = [
    (TEXTS[0], "Thieves took jewels.", "ex0"),
    (TEXTS[1], "The team lost the final.", "ex1"),
    (TEXTS[2], "Arango could face a ban.", "ex2"),
    (TEXTS[3], "Profits fell sharply in the last quarter of the year.", "ex3"),
    (TEXTS[0] + " " + TEXTS[1], "Police said something.", "ex4"),
]


@pytest.fixture(scope="module")
def tokenizer():
    from trainers.models.tiny import build_tiny_tokenizer

    return build_tiny_tokenizer(TEXTS * 3, vocab_size=400)


@pytest.fixture(scope="module")
def classifier_dir(tokenizer, tmp_path_factory):
    from trainers.models.tiny import build_tiny_classifier

    path = tmp_path_factory.mktemp("nli")
    build_tiny_classifier(tokenizer, labels=("contradiction", "entailment", "neutral"),
                          save_dir=path, seed=3)
    return path


# ---- lexical ----------------------------------------------------------------------------
def test_unit_token_recall_counts_distinct_content_tokens():
    assert content_tokens("The cats, and the dog!") == ["cats", "dog"]
    # content tokens of the unit: {police, arrested, three, men}; found: police, men
    assert unit_token_recall("Police questioned two men.", "The police arrested three men") \
        == pytest.approx(2 / 4)
    assert unit_token_recall("anything", "the of and") == 0.0


def test_calibrate_threshold_maximises_f1_and_prefers_larger_on_ties():
    # t=0.9: f1 2/3; t=0.6: predicted {0.9, 0.6} = the positives, f1 1; t=0.4: 0.8; t=0.1: 2/3
    assert calibrate_threshold([0.9, 0.6, 0.4, 0.1], [1, 1, 0, 0]) == 0.6
    assert calibrate_threshold([0.9, 0.6, 0.4, 0.1], [1, 1, 0, 1]) == 0.1  # f1 6/7 beats 0.8
    assert calibrate_threshold([0.5, 0.5, 0.2], [1, 0, 0]) == 0.5
    with pytest.raises(ValueError):
        calibrate_threshold([], [])


@pytest.mark.parametrize("variant, threshold, f1, micro", [
    ("realsumm", 0.5714285714285714, 0.7203754399687133, 0.7646090534979424),
    ("pyrxsum", 0.6666666666666666, 0.5102880658436214, 0.85125),
])
@pytest.mark.slow
def test_lexical_f1_on_pyramid_scus(pyramid_data_dir, variant, threshold, f1, micro):
    """Threshold calibrated on the train split; positive-class F1 and micro F1 (the paper's
    headline, over both classes) on the test split (example-id split)."""
    task = PresenceDetection()
    train = task.load_instances("train", variant, str(pyramid_data_dir))
    test = task.load_instances("test", variant, str(pyramid_data_dir))
    backend = LexicalBackend.calibrated([(i["summary"], i["unit"]) for i in train],
                                        [i["label"] for i in train])
    assert backend.threshold == pytest.approx(threshold)
    labels = [float(r.label) for r in backend.score((i["summary"], i["unit"]) for i in test)]
    gold = [i["label"] for i in test]
    assert binary_scores(labels, gold)["f1"] == pytest.approx(f1)
    from sklearn.metrics import f1_score

    from tasks.metrics.classification import micro_f1
    assert micro_f1(labels, gold) == pytest.approx(f1_score(gold, [int(v) for v in labels],
                                                            average="micro"), abs=1e-12)
    assert micro_f1(labels, gold) == pytest.approx(micro)


def test_presence_callable_shape_and_factory():
    backend = build_backend("lexical", threshold=0.5)
    values = backend(["Police said thieves took jewels."], [["Thieves took jewels.",
                                                             "Profits fell."]])
    assert values == [[1.0, 0.0]]
    assert presence_values(backend, ["a b"], [[]]) == [[]]
    from tasks.plumbing.kept import MODELS_PER_KIND, forget_models

    forget_models("presence lexical")
    factory = pyramid_factory("lexical")
    first = factory(None, "sys1", "scus", threshold=0.5, model=None)
    assert factory(None, "sys2", "scus", threshold=0.5) is first
    other = factory(None, "sys1", "scus", threshold=0.6)
    assert other is not first and other.threshold == 0.6
    assert factory(None, "sys1", "scus", threshold=0.5) is first  # two columns keep both
    for step in range(MODELS_PER_KIND):
        factory(None, "sys1", "scus", threshold=0.1 + step / 100)
    assert factory(None, "sys1", "scus", threshold=0.5) is not first  # the oldest goes


# ---- NLI --------------------------------------------------------------------------------
def test_entailment_index_follows_id2label():
    id2label = {0: "CONTRADICTION", 1: "neutral", 2: "Entailment"}
    assert entailment_index(id2label) == 2  # case-insensitive
    assert entailment_index(id2label, {"contradiction": 0, "neutral": 1, "entailment": 2}) == 2
    assert entailment_index({"0": "entailment", "1": "not_entailment"}, None) == 0  # str keys
    assert entailment_index(id2label, {"LABEL_0": 0}) == 2  # label2id without the label
    assert entailment_index(None, {"Entailment": 1, "neutral": 0}) == 1  # only label2id
    assert entailment_index({}, {"entailment": 0}) == 0
    assert entailment_index(id2label, None, "NEUTRAL") == 1  # entailment_label, any case
    assert entailment_index({0: "refuted", 1: "supported"}, None, "supported") == 1
    with pytest.raises(PresenceBackendError, match="disagrees on the 'entailment' label: "
                       "id2label puts it at index 2, label2id at 0"):
        entailment_index(id2label, {"entailment": 0, "neutral": 1, "contradiction": 2})
    with pytest.raises(PresenceBackendError, match="no single 'entailment' label.*"
                       "--entailment-label"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"}, {"entailment": 1})
    with pytest.raises(PresenceBackendError, match="no single 'entailment'"):
        entailment_index({0: "entailment", 1: "ENTAILMENT"})
    with pytest.raises(PresenceBackendError, match="no id2label.*no single 'supported'"):
        entailment_index(None, {"entailment": 0}, "supported")


def test_nli_outputs_follow_lite2pyramid():
    """p2c / l2c as Lite²Pyramid computes them: the non-entailment LOGITS are added, then
    softmax / argmax over [entailment, that sum] (entailment first, as in the release)."""
    import torch

    logits = [1.0, 0.9, 0.8]  # entailment is the 3-class argmax
    out = nli_outputs(logits, 0)
    p_e = math.exp(1.0) / sum(math.exp(v) for v in logits)
    assert out["p3"] == pytest.approx(p_e)
    batch = torch.tensor([logits], dtype=torch.float64)
    official = torch.stack([batch[:, 0], batch[:, 1] + batch[:, 2]], dim=1)
    assert out["p2"] == pytest.approx(torch.softmax(official, dim=1)[0, 0].item(), abs=1e-12)
    assert out["p2"] == pytest.approx(1 / (1 + math.exp(0.7)))
    assert (out["label3"], out["label2"]) == (1, int(torch.argmax(official, dim=1) == 0))
    assert nli_outputs([2.0, 1.0, 1.0], 0)["label2"] == 1  # a tie goes to entailment
    two_class = nli_outputs([0.3, -0.2], 1)  # [not_entailment, entailment]
    assert two_class["p2"] == pytest.approx(1 / (1 + math.exp(0.5)))
    assert nli_outputs([-900.0, 0.0, 0.0], 0)["p2"] == pytest.approx(0.0)


def test_nli_reads_entailment_index_from_label2id(tokenizer, classifier_dir):
    import torch
    from transformers import AutoModelForSequenceClassification

    from leaderboard.evaluators.pyramid import presence_models

    backend = build_backend("nli", model=str(classifier_dir), mode="prob3")
    assert type(backend) is NLIBackend is presence_models.NLIBackend and backend.entail == 1
    model = AutoModelForSequenceClassification.from_pretrained(str(classifier_dir)).eval()
    with torch.no_grad():
        logits = model(**tokenizer(PAIRS[0][0], PAIRS[0][1], return_tensors="pt")).logits[0]
    expected = torch.softmax(logits, -1)[1].item()
    assert expected != pytest.approx(torch.softmax(logits, -1)[0].item())
    assert backend.score([PAIRS[0]])[0].probability == pytest.approx(expected, abs=1e-6)


def _edited_copy(folder, destination, edit):
    """A copy of a saved model folder with its config.json changed by `edit(dict)`."""
    import json
    import shutil

    shutil.copytree(folder, destination)
    config = json.loads((destination / "config.json").read_text())
    edit(config)
    (destination / "config.json").write_text(json.dumps(config))
    return destination


def _softmax_at(folder, tokenizer, pair, index) -> float:
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        logits = model(**tokenizer(pair[0], pair[1], return_tensors="pt")).logits[0]
    return torch.softmax(logits, -1)[index].item()


def test_nli_config_with_only_id2label(tokenizer, classifier_dir, tmp_path):
    """A config.json without label2id (transformers then leaves label2id None): the index
    comes from id2label, here moved to the last class."""
    def only_id2label(config):
        del config["label2id"]
        config["id2label"] = {"0": "contradiction", "1": "neutral", "2": "ENTAILMENT"}

    folder = _edited_copy(classifier_dir, tmp_path / "nli", only_id2label)
    backend = NLIBackend(str(folder), mode="prob3")
    assert backend.entail == 2
    expected = _softmax_at(folder, tokenizer, PAIRS[0], 2)
    assert expected != pytest.approx(_softmax_at(folder, tokenizer, PAIRS[0], 1))
    assert backend.score([PAIRS[0]])[0].probability == pytest.approx(expected, abs=1e-6)


def test_nli_stale_label2id_is_an_error(classifier_dir, tmp_path):
    def stale(config):  # id2label: entailment = 1; label2id says 2
        config["label2id"] = {"contradiction": 0, "neutral": 1, "entailment": 2}

    folder = _edited_copy(classifier_dir, tmp_path / "nli", stale)
    with pytest.raises(PresenceBackendError, match="disagrees on the 'entailment' label"):
        build_backend("nli", model=str(folder))


def test_nli_entailment_label_option(tokenizer, tmp_path):
    from trainers.models.tiny import build_tiny_classifier

    build_tiny_classifier(tokenizer, labels=("refuted", "supported"), save_dir=tmp_path / "m",
                          seed=4)
    with pytest.raises(PresenceBackendError, match="no single 'entailment' label"):
        NLIBackend(str(tmp_path / "m"))
    supported = NLIBackend(str(tmp_path / "m"), entailment_label="Supported", mode="prob2")
    refuted = build_backend("nli", model=str(tmp_path / "m"), entailment_label="REFUTED")
    assert (supported.entail, refuted.entail) == (1, 0)
    p_supported = supported.score([PAIRS[2]])[0].probability
    assert p_supported == pytest.approx(_softmax_at(tmp_path / "m", tokenizer, PAIRS[2], 1),
                                        abs=1e-6)
    assert p_supported + refuted.score([PAIRS[2]])[0].probability == pytest.approx(1.0)


def test_nli_is_batch_size_independent_and_cached(classifier_dir, tmp_path):
    one = NLIBackend(str(classifier_dir), batch_size=1).score(PAIRS)
    cache = tmp_path / "nli.sqlite"
    batched = NLIBackend(str(classifier_dir), batch_size=4, chunk_size=3, cache=cache)
    first = batched.score(PAIRS)
    for a, b in zip(one, first):
        assert a.details["p3"] == pytest.approx(b.details["p3"], abs=1e-5)
    assert batched.forward_calls == 2  # chunks of 3 and 2 pairs
    again = NLIBackend(str(classifier_dir), batch_size=4, cache=cache)
    assert again.score(PAIRS) == first and again.forward_calls == 0
    assert again.revision.startswith("files:")


def test_nli_batches_run_longest_first_with_one_pair_at_a_time_numbers(classifier_dir):
    """Batches of at most `batch_size` pairs, longest first, each padded to its longest
    pair, the long outlier alone (padding the rest to it would fill most of the batch): the
    numbers of one pair per forward (up to float rounding: other padded shapes); a repeated
    pair runs once and gets an equal result object of its own."""
    pairs = outlier_pairs()
    backend = NLIBackend(str(classifier_dir), batch_size=8, max_length=400)
    single = NLIBackend(str(classifier_dir), batch_size=1, max_length=400)
    batches, forward = [], backend.forward
    backend.forward = lambda features: batches.append(
        [len(feature["input_ids"]) for feature in features]) or forward(features)
    got = backend.score(pairs + pairs[:2])
    lengths = sorted((len(f["input_ids"]) for f in backend.prepare(pairs)), reverse=True)
    assert batches == [lengths[:1], lengths[1:9], lengths[9:]]
    assert lengths[0] > 3 * lengths[1] and backend.forward_calls == 3
    expected = single.score(pairs)
    assert [r.details["p3"] for r in got[:len(pairs)]] == \
        pytest.approx([r.details["p3"] for r in expected], abs=1e-6)
    assert [r.details["label3"] for r in got[:len(pairs)]] == \
        [r.details["label3"] for r in expected]
    assert [r.details for r in got[len(pairs):]] == [r.details for r in got[:2]]
    assert got[len(pairs)] is not got[0] and got[len(pairs)].details is not got[0].details


def outlier_pairs() -> list[tuple[str, str, str]]:
    """One long pair (four summaries in one) and twelve short ones."""
    return [(" ".join(TEXTS * 4), "Thieves took jewels.", "ex0")] + \
        [(TEXTS[1], f"The team lost game {i}.", "ex1") for i in range(12)]


def test_nli_cache_key_changes_with_weights(tokenizer, tmp_path):
    from trainers.models.tiny import build_tiny_classifier

    labels = ("entailment", "neutral", "contradiction")
    build_tiny_classifier(tokenizer, labels=labels, save_dir=tmp_path / "m", seed=1)
    before = NLIBackend(str(tmp_path / "m")).fingerprint()
    build_tiny_classifier(tokenizer, labels=labels, save_dir=tmp_path / "m", seed=2)
    assert NLIBackend(str(tmp_path / "m")).fingerprint() != before


def test_model_revision_covers_tokenizer_and_config_files(classifier_dir, tmp_path):
    import json
    import shutil

    from trainers.models.disk_cache import model_folder_files, model_revision

    folder = tmp_path / "m"
    shutil.copytree(classifier_dir, folder)
    names = [path.name for path in model_folder_files(folder)]
    assert names == ["config.json", "model.safetensors", "tokenizer.json",
                     "tokenizer_config.json"]
    seen = {model_revision(str(folder), None)}
    (folder / "README.md").write_text("not part of the model")
    assert model_revision(str(folder), None) in seen
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "do_lower_case": 1}))
    seen.add(model_revision(str(folder), None))
    (folder / "special_tokens_map.json").write_text('{"pad_token": "<pad>"}')
    seen.add(model_revision(str(folder), None))
    (folder / "spiece.model").write_bytes(b"sentencepiece")
    seen.add(model_revision(str(folder), None))
    (folder / "vocab.txt").write_text("a\nb\n")
    seen.add(model_revision(str(folder), None))
    assert len(seen) == 5 and all(rev.startswith("files:") for rev in seen)
    assert model_revision(str(folder), None, "v1") == "v1"


def test_nli_cache_misses_after_a_tokenizer_change(classifier_dir, tmp_path):
    import json
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(classifier_dir, folder)
    cache = tmp_path / "cache.sqlite"
    first = NLIBackend(str(folder), cache=cache, mode="prob3")
    before = first.score(PAIRS[:2])
    definition = json.loads((folder / "tokenizer.json").read_text())
    definition["normalizer"] = {"type": "Lowercase"}  # same weights, other token ids
    (folder / "tokenizer.json").write_text(json.dumps(definition))
    second = NLIBackend(str(folder), cache=cache, mode="prob3")
    assert second.fingerprint() != first.fingerprint()
    after = second.score(PAIRS[:2])
    assert second.forward_calls == 1  # not the first tokenizer's cached outputs
    assert after[0].probability != pytest.approx(before[0].probability, abs=1e-9)


# ---- seq2seq and causal LM ---------------------------------------------------------------
def test_seq2seq_yes_no_probability(tokenizer):
    import torch

    from trainers.models.tiny import build_tiny_t5

    model = build_tiny_t5(tokenizer, seed=0)
    backend = Seq2SeqYesNoBackend(model, tokenizer, batch_size=2)
    results = backend.score(PAIRS[:3])
    source = PresenceDetection.source_text(PAIRS[1][0], PAIRS[1][1])
    with torch.no_grad():
        logits = model(**tokenizer(source, return_tensors="pt"),
                       decoder_input_ids=torch.tensor([[tokenizer.pad_token_id]])).logits[0, 0]
    probs = torch.softmax(logits, -1)
    yes, no = (tokenizer.convert_tokens_to_ids(t) for t in ("ĠYes", "ĠNo"))
    expected = (probs[yes] / (probs[yes] + probs[no])).item()
    assert results[1].probability == pytest.approx(expected, abs=1e-5)
    assert results[1].label == int(expected > 0.5)


def test_seq2seq_cache_key_is_the_model_input(tokenizer, tmp_path, monkeypatch):
    """Another instruction text means another model input: not the cached output."""
    from tasks.qapyramid import presence_detection
    from trainers.models.tiny import build_tiny_t5

    model = build_tiny_t5(tokenizer, seed=0)
    cache = tmp_path / "s2s.sqlite"
    original = Seq2SeqYesNoBackend(model, tokenizer, cache=cache).score(PAIRS[:2])
    cached = Seq2SeqYesNoBackend(model, tokenizer, cache=cache)
    assert cached.score(PAIRS[:2]) == original and cached.forward_calls == 0
    key = cached.key_parts(PAIRS[0])
    assert key == (PresenceDetection.source_text(PAIRS[0][0], PAIRS[0][1]),)
    monkeypatch.setattr(presence_detection, "PRESENCE_INSTRUCTION", "Does the summary say it?")
    reworded = Seq2SeqYesNoBackend(model, tokenizer, cache=cache)
    assert reworded.key_parts(PAIRS[0]) != key
    results = reworded.score(PAIRS[:2])
    assert reworded.forward_calls == 1
    fresh = Seq2SeqYesNoBackend(model, tokenizer).score(PAIRS[:2])
    assert [r.probability for r in results] == pytest.approx([r.probability for r in fresh])
    assert results[0].probability != pytest.approx(original[0].probability, abs=1e-9)
    longer = Seq2SeqYesNoBackend(model, tokenizer, cache=cache, max_length=8)
    assert longer.fingerprint() != reworded.fingerprint()


def _pool():
    return [{"example_id": f"ex{i}", "summary": s, "unit": u, "label": i % 2}
            for i, (s, u, _) in enumerate(PAIRS)]


def test_fewshot_shots_never_from_the_same_example():
    prompter = FewShotPrompter(_pool(), shots=3, seed=7)
    for summary, unit, group in PAIRS:
        shots = prompter.shots_for(summary, unit, group)
        assert len(shots) == 3 and all(shot["example_id"] != group for shot in shots)
        assert shots == prompter.shots_for(summary, unit, group)  # seeded per query
        prompt = prompter.prompt((summary, unit, group))
        assert prompt.count("ANSWER:") == 4 and prompt.endswith(f"UNIT: {unit}\nANSWER:")
    with pytest.raises(PresenceBackendError):
        FewShotPrompter(_pool(), shots=6)


def test_causal_lm_scorer_matches_unpadded_forward(tokenizer):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=1024,
                                           n_embd=32, n_layer=2, n_head=2)).eval()
    backend = CausalLMBackend(model, tokenizer, pool=_pool(), shots=2, seed=1, batch_size=3)
    results = backend.score(PAIRS)
    prompt = backend.prompter.prompt(PAIRS[2])
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        last = model(ids).logits[0, -1]
    yes, no = last[backend.yes_id].item(), last[backend.no_id].item()
    assert results[2].probability == pytest.approx(1 / (1 + math.exp(no - yes)), abs=1e-5)
    one_by_one = CausalLMBackend(model, tokenizer, pool=_pool(), shots=2, seed=1,
                                 batch_size=1).score(PAIRS)
    for a, b in zip(results, one_by_one):
        assert a.probability == pytest.approx(b.probability, abs=1e-5)


def test_backend_fits_the_pyramid_evaluator(pyramid_data_dir):
    """The backend is a presence callable for leaderboard.evaluators.pyramid.scoring; the lexical
    default `use="label"` counts thresholded units, `use="probability"` the token recall."""
    from leaderboard.evaluators.pyramid.scoring import evaluate_system
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    dataset = load_pyramid_dataset(pyramid_data_dir / "realsumm", systems=["abs_bart_out"])
    summaries, units = dataset.summaries["abs_bart_out"], dataset.units["scus"]
    threshold = 0.5714285714285714
    labels = evaluate_system("abs_bart_out", summaries, units, LexicalBackend(threshold))
    assert labels.score == pytest.approx(0.514703157953158)
    soft = evaluate_system("abs_bart_out", summaries, units,
                           LexicalBackend(threshold, use="probability"))
    assert soft.score == pytest.approx(0.5654078221932388)


def test_nli_truncates_pairs_at_400_tokens_by_default(tokenizer, classifier_dir):
    import torch
    from transformers import AutoModelForSequenceClassification

    from leaderboard.evaluators.pyramid.scoring import check_presence_options

    backend = build_backend("nli", model=str(classifier_dir), mode="prob3")
    assert backend.max_length == 400
    assert check_presence_options("nli", "scus", {"model": "m", "max_length": 16}) == "nli"
    summary, unit = " ".join(TEXTS * 60), PAIRS[0][1]
    assert len(tokenizer(summary, unit)["input_ids"]) > 400
    model = AutoModelForSequenceClassification.from_pretrained(str(classifier_dir)).eval()

    def p3(max_length):
        with torch.no_grad():
            logits = model(**tokenizer(summary, unit, truncation=True, max_length=max_length,
                                       return_tensors="pt")).logits[0]
        return torch.softmax(logits, -1)[backend.entail].item()
    assert backend.score([(summary, unit)])[0].probability == pytest.approx(p3(400), abs=1e-6)
    short = build_backend("nli", model=str(classifier_dir), mode="prob3", max_length=16)
    assert short.score([(summary, unit)])[0].probability == pytest.approx(p3(16), abs=1e-6)


def test_pad_batch_pads_ids_segments_and_mask():
    from leaderboard.evaluators.pyramid.presence_models import pad_batch

    batch = pad_batch([{"input_ids": [5, 6, 7], "token_type_ids": [0, 1, 1]},
                       {"input_ids": [8], "token_type_ids": [0]}], pad_id=2)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 2, 2]]
    assert batch["token_type_ids"].tolist() == [[0, 1, 1], [0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["input_ids"].dtype == batch["attention_mask"].dtype
    assert sorted(pad_batch([{"input_ids": [3]}], pad_id=0)) == ["attention_mask", "input_ids"]


def test_a_deberta_v2_classifier_of_tasksource_s_layout_reads_its_own_label_order(
        tokenizer, tmp_path):
    """DeBERTa-v3 tasksource NLI (`sileod/deberta-v3-base-tasksource-nli`, a
    DebertaV2ForSequenceClassification): the entailment class is where its config's id2label
    puts it, whatever order third-party code assumes; `label3` is present iff entailment is
    the argmax; a config whose labels are transformers' LABEL_n is refused naming them."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    labels = ("neutral", "contradiction", "entailment")  # not the usual 0 = entailment
    config = DebertaV2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=64,
                             pad_token_id=tokenizer.pad_token_id, num_labels=3,
                             id2label=dict(enumerate(labels)),
                             label2id={name: i for i, name in enumerate(labels)})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = DebertaV2ForSequenceClassification(config)
    model.save_pretrained(str(tmp_path / "tasksource"))
    tokenizer.save_pretrained(str(tmp_path / "tasksource"))
    backend = build_backend("nli", model=str(tmp_path / "tasksource"), mode="label3")
    assert backend.entail == 2
    with torch.no_grad():
        logits = model.eval()(**tokenizer(PAIRS[0][0], PAIRS[0][1], return_tensors="pt"))
    expected = int(logits.logits[0].argmax().item() == 2)
    assert backend.score([PAIRS[0]])[0].label == expected
    unnamed = _edited_copy(tmp_path / "tasksource", tmp_path / "unnamed", lambda c: c.update(
        id2label={"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
        label2id={"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}))
    with pytest.raises(PresenceBackendError, match=r"id2label \{0: 'LABEL_0', 1: 'LABEL_1', "
                                                   r"2: 'LABEL_2'\} has no single 'entailment'"):
        build_backend("nli", model=str(unnamed))
