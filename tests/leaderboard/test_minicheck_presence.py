"""`--presence minicheck` against MiniCheck's official `Inferencer` (recorded outputs).

tests/data/minicheck_official/ holds what the official code at b58b9fa computed on three tiny
models (RoBERTa and DeBERTa-v2 classifiers with 2 labels, a T5 whose vocabulary has ids 3 and
209), which its record.py builds from a seed and the tests rebuild (README.md there says
how): per pair the max support probability, the per-chunk probabilities and the label; per
document the chunks it scored; for an empty document the error it raised. Every variant is
recorded with the default chunk size, a small one (multi-sentence chunks and a sentence over
the size) and a small model maximum (inputs cut at 40 tokens).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from leaderboard.evaluators.pyramid.minicheck import (
    MiniCheckBackend,
    document_sentences,
    greedy_chunks,
)
from leaderboard.evaluators.pyramid.presence import (
    PresenceBackendError,
    build_backend,
    presence_values,
)

from helpers import recorded_models

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "minicheck_official"
RECORDED = json.loads((FIXTURE / "recorded.json").read_text(encoding="utf-8"))
#: the tiny models the recording ran on, rebuilt by record.py's builder (`_recorded_models`)
MODELS = Path()
FOLDERS = RECORDED["models"]
RUNS = RECORDED["runs"]
TOLERANCE = 1e-6


def run_id(run: dict) -> str:
    return f"{run['variant']}-chunk{run['chunk_size']}-max{run['max_model_len']}"


def backend_for(run: dict, **options) -> MiniCheckBackend:
    return MiniCheckBackend(str(MODELS / FOLDERS[run["variant"]]),
                            max_length=run["max_model_len"], doc_chunk_size=run["chunk_size"],
                            **options)


@pytest.fixture(scope="module", autouse=True)
def _recorded_models(tmp_path_factory):
    global MODELS
    MODELS = recorded_models(tmp_path_factory, "minicheck_official", "build_models")


@pytest.fixture(scope="module", params=RUNS, ids=run_id)
def scored(request, _recorded_models):
    """(run, backend, results of every recorded pair) per recorded run."""
    run = request.param
    backend = backend_for(run, batch_size=3)
    pairs = [(RECORDED["documents"][p["doc"]], RECORDED["claims"][p["claim"]])
             for p in run["pairs"]]
    return run, backend, backend.score(pairs)


# ---- identity with the official code ----------------------------------------------------
def test_chunk_boundaries_are_the_official_ones(scored):
    run, backend, _ = scored
    ours = [backend.document_chunks(document) for document in RECORDED["documents"]]
    assert ours == run["doc_chunks"]


def test_probabilities_match_the_official_within_1e_6(scored):
    run, _, results = scored
    for recorded, result in zip(run["pairs"], results, strict=True):
        assert result.probability == pytest.approx(recorded["max_support_prob"],
                                                   abs=TOLERANCE)
        assert result.details["chunk_probabilities"] == pytest.approx(
            recorded["support_prob_per_chunk"], abs=TOLERANCE)
        assert result.label == recorded["label"]


def test_the_recording_exercises_chunks_labels_and_truncation():
    """The fixture is not degenerate: several chunks per document, both labels, outputs
    that vary by pair, truncation that changes the outputs and an empty claim scored."""
    by_id = {run_id(run): run for run in RUNS}
    for run in RUNS:
        probabilities = [p["max_support_prob"] for p in run["pairs"]]
        assert max(probabilities) - min(probabilities) > 0.05, run_id(run)
        assert any(p["claim"] == RECORDED["claims"].index("") for p in run["pairs"])
    assert {p["label"] for run in RUNS for p in run["pairs"]} == {0, 1}
    assert max(len(chunks) for run in RUNS for chunks in run["doc_chunks"]) >= 3
    assert any(len(document_sentences(chunk)) > 1 for run in RUNS if run["chunk_size"]
               for chunks in run["doc_chunks"] for chunk in chunks)
    for variant in FOLDERS:
        full = by_id[f"{variant}-chunkNone-max{512 if variant == 'roberta-large' else 2048}"]
        cut = by_id[f"{variant}-chunkNone-max40"]
        assert any(abs(a["max_support_prob"] - b["max_support_prob"]) > 1e-4
                   for a, b in zip(full["pairs"], cut["pairs"]))


@pytest.mark.parametrize(("variant", "max_length", "doc_chunk_size"), [
    ("roberta-large", 512, 400), ("deberta-v3-large", 2048, 400), ("flan-t5-large", 2048, 500)])
def test_variant_and_defaults_come_from_the_checkpoint(variant, max_length, doc_chunk_size):
    backend = MiniCheckBackend(str(MODELS / FOLDERS[variant]))
    assert (backend.variant.name, backend.max_length, backend.doc_chunk_size) == \
        (variant, max_length, doc_chunk_size)
    recorded_default = [run for run in RUNS if run["variant"] == variant
                        and run["chunk_size"] is None][0]
    assert recorded_default["max_model_len"] == max_length
    assert f"variant={variant}" in backend.fingerprint()


# ---- sentences and chunks ---------------------------------------------------------------
@pytest.mark.parametrize(("text", "sentences"), [
    ("", [""]),
    ("\n", ["\n"]),
    ("One. Two.\nThree", ["One.", "Two.", "\n", "Three"]),
    ("Mr. Lee left.\n\nEnd.", ["Mr. Lee left.", "\n", "\n", "End."]),
])
def test_document_sentences(text, sentences):
    assert document_sentences(text) == sentences


@pytest.mark.parametrize(("sentences", "sizes", "limit", "chunks"), [
    (["a b", "c", "d e f"], [2, 1, 3], 3, ["a b c", "d e f"]),
    (["long one", "x"], [9, 1], 3, ["long one", "x"]),  # the empty run before it is dropped
    (["a", "\n", "b"], [1, 1, 1], 5, ["a\nb"]),
    ([""], [0], 400, []),
])
def test_greedy_chunks(sentences, sizes, limit, chunks):
    assert greedy_chunks(sentences, sizes, limit) == chunks


# ---- the backend's machinery ------------------------------------------------------------
def test_batching_cache_and_presence_callable(tmp_path):
    run = RUNS[1]  # roberta, small chunks: several inputs per pair
    documents, claims = RECORDED["documents"][:3], RECORDED["claims"]
    cache = tmp_path / "cache.sqlite"
    first = backend_for(run, batch_size=1, cache=cache)
    values = first(documents, [claims] * len(documents))
    assert first.forward_calls == sum(len(run["doc_chunks"][d]) for d in range(3)) * len(claims)
    second = backend_for(run, batch_size=64, cache=cache)
    assert second(documents, [claims] * len(documents)) == values
    assert second.forward_calls == 0
    recorded = {(p["doc"], p["claim"]): p["max_support_prob"] for p in run["pairs"]}
    for d, row in enumerate(values):
        assert row == pytest.approx([recorded[d, c] for c in range(len(claims))],
                                    abs=TOLERANCE)
    built = build_backend("minicheck", model=str(MODELS / "t5"))
    labels = presence_values(built, documents[:1], [claims[:2]], "label")
    assert all(value in (0.0, 1.0) for value in labels[0])


# ---- bad input --------------------------------------------------------------------------
def _bert_folder(tmp_path: Path) -> Path:
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(RECORDED["documents"], vocab_size=300)
    build_tiny_classifier(tokenizer, labels=("no", "yes"), save_dir=tmp_path / "bert",
                          hidden=16)
    return tmp_path / "bert"


def _three_label_roberta(tmp_path: Path) -> Path:
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(MODELS / "roberta", num_labels=3)
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(tmp_path / "roberta3")
    AutoTokenizer.from_pretrained(MODELS / "roberta").save_pretrained(tmp_path / "roberta3")
    return tmp_path / "roberta3"


def _no_eos(tmp_path: Path) -> dict:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MODELS / "roberta")
    tokenizer.eos_token = None
    return {"model": AutoModelForSequenceClassification.from_pretrained(MODELS / "roberta"),
            "tokenizer": tokenizer}


def _small_t5(tmp_path: Path) -> dict:
    from transformers import AutoTokenizer

    from trainers.models.tiny import build_tiny_t5

    tokenizer = AutoTokenizer.from_pretrained(MODELS / "t5")
    return {"model": build_tiny_t5(tokenizer, d_model=16, num_layers=1, num_heads=2,
                                   vocab_size=200), "tokenizer": tokenizer}


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: {"model": str(_bert_folder(tmp))}, "is a 'bert' model; MiniCheck's variants"),
    (lambda tmp: {"model": str(_three_label_roberta(tmp))}, "has 3 labels"),
    (_no_eos, "has no eos token"),
    (_small_t5, "200 vocabulary entries"),
    (lambda tmp: {"model": str(tmp / "missing" / "model")}, "does not exist"),
], ids=["wrong-kind", "three-labels", "no-eos", "t5-without-209", "missing-path"])
def test_bad_checkpoints_are_refused_in_one_line(tmp_path, make, message):
    with pytest.raises(PresenceBackendError) as raised:
        MiniCheckBackend(**make(tmp_path))
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_empty_summary_fails_as_officially_and_writes_nothing(tmp_path):
    """The official Inferencer fails on a document without chunks (recorded); ours says so in
    one line, before anything is cached."""
    assert all(run["empty_document_error"] for run in RUNS)
    cache = tmp_path / "cache.sqlite"
    backend = MiniCheckBackend(str(MODELS / "roberta"), cache=cache)
    with pytest.raises(PresenceBackendError) as raised:
        backend.score([(RECORDED["documents"][0], "A claim."), (" \n ", "A claim.")])
    assert "has no text to check" in str(raised.value)
    assert "\n" not in str(raised.value)
    assert len(backend.cache) == 0


# ---- Bespoke-MiniCheck-7B behind a chat endpoint ----------------------------------------
class FakeServer:
    """An OpenAI-compatible chat endpoint's answers: the first token's top-5 log-probabilities
    per claim sentence (the server's only input that matters here), every request kept."""
    base_url, model = "http://fake/v1", "bespokelabs/Bespoke-MiniCheck-7B"

    def __init__(self, tops: dict[str, dict[str, float]]):
        self.tops, self.requests = tops, []

    def chat(self, messages, **params):
        self.requests.append((messages, params))
        claim = messages[1]["content"].rsplit("\nClaim: ", 1)[1]
        top = self.tops[claim]
        if not top:  # a server that ignores the logprobs request
            return {"choices": [{"message": {"content": "Yes"}}]}
        chosen = max(top, key=top.get)
        return {"choices": [{"message": {"content": chosen}, "logprobs": {"content": [
            {"token": chosen, "logprob": top[chosen],
             "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()]}]}}]}


YES_TOP = {"Yes": -0.1, "yes": -3.0, " Yes": -4.0, "No": -2.5, "YES": -6.0}
NO_TOP = {"No": -0.2, "Yes": -1.8, "no": -4.0, "Maybe": -5.0, "yes.": -6.0}


def test_chat_messages_are_minicheck_prompts():
    from leaderboard.evaluators.pyramid.minicheck_chat import minicheck_messages

    system, user = minicheck_messages("A doc naming [CLAIM].", "It rained.")
    assert system == {"role": "system", "content": (
        "Determine whether the provided claim is consistent with the corresponding document. "
        "Consistency in this context implies that all information presented in the claim is "
        "substantiated by the document. If not, it should be considered inconsistent. Please "
        "assess the claim's consistency with the document by responding with either \"Yes\" "
        "or \"No\".")}
    # LLMCheck replaces [DOCUMENT] first, then every [CLAIM], the document's included
    assert user == {"role": "user",
                    "content": "Document: A doc naming It rained..\nClaim: It rained."}


def test_chat_support_is_min_over_sentences_of_yes_mass():
    from leaderboard.evaluators.pyramid.minicheck_chat import MiniCheckChatBackend

    server = FakeServer({"It rained.": YES_TOP, "Nobody came.": NO_TOP})
    backend = MiniCheckChatBackend(server)
    [result] = backend.score([("It  rained.   Nobody came.\nThe end.",
                               "It rained. Nobody came.")])
    yes = math.exp(-0.1) + math.exp(-3.0) + math.exp(-6.0)  # "Yes", "yes", "YES"
    no = math.exp(-1.8)  # "Yes" only: " Yes"-like and "yes." do not lower-case to "yes"
    assert result.details["sentence_probabilities"] == pytest.approx([yes, no], abs=1e-12)
    assert (result.probability, result.label) == (pytest.approx(no, abs=1e-12), 0)
    documents = {messages[1]["content"].split("\nClaim: ")[0] for messages, _ in server.requests}
    assert documents == {"Document: It  rained. Nobody came.\nThe end."}  # sentences joined
    assert {json.dumps(params, sort_keys=True) for _, params in server.requests} == {json.dumps(
        {"logprobs": True, "max_tokens": 1, "temperature": 0, "top_logprobs": 5},
        sort_keys=True)}
    [present] = backend.score([("", "It rained.")])  # an empty summary is one empty chunk
    assert present.label == 1 and server.requests[-1][0][1]["content"].startswith(
        "Document: \nClaim: ")


@pytest.mark.parametrize(("pair", "server_top", "message"), [
    (("A summary.", ""), YES_TOP, "has no sentence"),
    (("A summary.", "x"), {}, "no log-probabilities"),
    (("word " * 7000, "x"), YES_TOP, "may exceed 32468 tokens"),
], ids=["empty-claim", "no-logprobs", "too-long"])
def test_chat_bad_input_is_one_line(pair, server_top, message):
    from leaderboard.evaluators.pyramid.minicheck_chat import MiniCheckChatBackend

    backend = MiniCheckChatBackend(FakeServer({"x": server_top}))
    with pytest.raises(PresenceBackendError) as raised:
        backend.score([pair])
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_pyramid_with_minicheck_end_to_end(pyramid_data_dir, capsys):
    """`sumbench pyramid --units scus --presence minicheck`: each summary's score is the mean
    of its SCUs' MiniCheck probabilities, the system's the mean over examples."""
    from benchmark.cli import main
    from leaderboard.evaluators.pyramid.presence import build_backend
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    folder = pyramid_data_dir / "pyrxsum"
    model = str(MODELS / "roberta")
    assert main(["pyramid", "--pyramid", str(folder), "--units", "scus", "--presence",
                 "minicheck", "--model", model, "--systems", "t5-large", "--device",
                 "cpu"]) == 0
    printed = json.loads(capsys.readouterr().out)["t5-large"]
    data = load_pyramid_dataset(folder)
    backend = build_backend("minicheck", model=model, device="cpu")
    summaries = data.summaries["t5-large"]
    per_example = [sum(r.probability for r in backend.score([(summary, u) for u in units]))
                   / len(units) for summary, units in zip(summaries, data.units["scus"])]
    # batches of other sizes round otherwise: within 1e-6
    assert printed == pytest.approx(sum(per_example) / len(per_example), abs=1e-6)
