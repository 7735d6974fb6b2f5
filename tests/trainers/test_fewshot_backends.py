"""Few-shot backends: tiny real HF models (causal, seq2seq) and a real local chat server."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.backends import (
    BackendError,
    CausalLMBackend,
    ChatBackend,
    Seq2SeqBackend,
    chat_backend,
    cut_at_stops,
    load_hf_backend,
    whitespace_token_count,
)
from trainers.fewshot.prompts import Prompt, get_style, render
from trainers.fewshot.runner import fewshot_predict, instance_label

from servers import ChatServer

TEXTS = ["Mara Voss founded a new branch in Lisbon in 1943.",
         "CONTENT: Port Alden opened a second branch in Ohio.\nSUMMARY: Port Alden grew.",
         "Ridgeview Academy expanded a small branch in Ohio in 1866 and 1920 and later."]


def text_prompt(text: str, stops=()) -> Prompt:
    return Prompt(text, None, "SUMMARY:", tuple(stops), "yes_no")


@pytest.fixture(scope="module")
def tiny(usb_fixture_dir):
    from trainers.models.tiny import build_tiny_causal_lm, build_tiny_t5, build_tiny_tokenizer

    records = read_jsonl(usb_fixture_dir / "task_datasets" / "all" /
                         "abstractive_summarization" / "train.jsonl")
    corpus = [line for record in records for line in record["input_lines"]] + TEXTS
    tokenizer = build_tiny_tokenizer(corpus, vocab_size=600)
    return {"tokenizer": tokenizer, "causal": build_tiny_causal_lm(tokenizer, seed=0),
            "t5": build_tiny_t5(tokenizer, seed=0)}


def reference_causal(model, tokenizer, text: str, cap: int) -> str:
    """Greedy continuation of one unpadded prompt, computed without the backend."""
    import torch

    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        output = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                max_new_tokens=cap, do_sample=False,
                                pad_token_id=tokenizer.pad_token_id)
    new = output[0, ids.shape[1]:].tolist()
    if tokenizer.eos_token_id in new:
        new = new[:new.index(tokenizer.eos_token_id)]
    return tokenizer.decode(new, skip_special_tokens=True)


def test_causal_continuations_match_unbatched_greedy_decoding(tiny):
    model, tokenizer = tiny["causal"], tiny["tokenizer"]
    prompts = [text_prompt(text) for text in TEXTS]
    caps = [6, 9, 4]
    expected = [reference_causal(model, tokenizer, text, cap) for text, cap in zip(TEXTS, caps)]
    assert any(expected) and len(set(expected)) == 3
    for batch_size in (1, 3):
        backend = CausalLMBackend(model, tokenizer, batch_size=batch_size)
        assert backend.generate(prompts, caps) == expected
        assert backend.generated == 3
    assert backend.encode(TEXTS[0])[-1] != tokenizer.eos_token_id  # no EOS closes the prompt


def test_causal_generation_stops_at_stop_strings(tiny):
    model, tokenizer = tiny["causal"], tiny["tokenizer"]
    backend = CausalLMBackend(model, tokenizer)
    full = backend.generate([text_prompt(TEXTS[1])], [12])[0]
    stop = full[len(full) // 2:len(full) // 2 + 3]
    assert len(stop) == 3 and full.find(stop) > 0
    stopped = backend.generate([text_prompt(TEXTS[1], [stop, "never there"])], [12])[0]
    assert stopped == full[:full.find(stop)] == cut_at_stops(full, [stop])


def test_responses_are_cached_on_disk(tiny, tmp_path):
    model, tokenizer = tiny["causal"], tiny["tokenizer"]
    prompts, caps = [text_prompt(text) for text in TEXTS], [5, 5, 5]
    first = CausalLMBackend(model, tokenizer, cache=tmp_path / "cache.sqlite")
    outputs = first.generate(prompts, caps)
    assert first.generated == 3 and len(first.cache) == 3
    second = CausalLMBackend(model, tokenizer, cache=str(tmp_path / "cache.sqlite"))
    assert second.generate(prompts, caps) == outputs and second.generated == 0
    second.generate(prompts[:1], [6])  # other parameters: another request
    assert second.generated == 1
    from trainers.models.tiny import build_tiny_causal_lm

    other = CausalLMBackend(build_tiny_causal_lm(tokenizer, seed=1), tokenizer,
                            cache=tmp_path / "cache.sqlite")
    assert other.fingerprint() != second.fingerprint()
    other.generate(prompts[:1], [5])
    assert other.generated == 1


def test_seq2seq_backend(tiny, tmp_path):
    import torch

    model, tokenizer = tiny["t5"], tiny["tokenizer"]
    prompts, caps = [text_prompt(text) for text in TEXTS], [5, 7, 3]
    expected = []
    for text, cap in zip(TEXTS, caps):
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            output = model.generate(input_ids=ids, max_new_tokens=cap, do_sample=False)
        new = output[0, 1:].tolist()
        new = new[:new.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in new else new
        expected.append(tokenizer.decode(new, skip_special_tokens=True))
    for batch_size in (1, 2):
        backend = Seq2SeqBackend(model, tokenizer, batch_size=batch_size,
                                 cache=tmp_path / f"s2s{batch_size}.sqlite")
        assert backend.generate(prompts, caps) == expected
    assert backend.fingerprint()["type"] == "hf-seq2seq"
    assert backend.count_tokens(["Mara Voss"]) == [len(tokenizer("Mara Voss",
                                                                 add_special_tokens=False)
                                                       ["input_ids"])]


# ---- the model's context ----------------------------------------------------------------
@pytest.fixture(scope="module")
def gpt2(tiny):
    """A tiny GPT-2 with absolute positions and a context of 256 tokens."""
    from trainers.models.tiny import build_tiny_gpt2

    return build_tiny_gpt2(tiny["tokenizer"], n_positions=256, seed=0)


def fac_split(usb_fixture_dir, name: str) -> list[dict]:
    task = get_task("FAC")
    return task.instances(read_jsonl(usb_fixture_dir / "task_datasets" / "all" / task.name
                                     / f"{name}.jsonl"))


def test_a_prompt_past_the_context_is_a_backend_error_not_an_index_error(tiny, gpt2):
    tokenizer = tiny["tokenizer"]
    backend = CausalLMBackend(gpt2, tokenizer)
    long_text = " ".join(["Yes"] * 801)
    assert backend.count_tokens([long_text]) == [801]
    assert backend.context_window() == 256 and backend.prompt_room(6) == 250
    with pytest.raises(BackendError, match=r"the prompt has 801 tokens \+ 6 new tokens, more "
                                           r"than the 256 positions of the model") as caught:
        backend.generate([text_prompt(TEXTS[0]), text_prompt(long_text)], [6, 6])
    assert caught.value.indices == (1,) and isinstance(caught.value, SumbenchError)
    assert backend.generated == 0
    at_limit = " ".join(["Yes"] * 250)
    assert len(backend.generate([text_prompt(at_limit)], [6])) == 1
    seq2seq = Seq2SeqBackend(tiny["t5"], tokenizer)  # relative positions: no limit
    assert seq2seq.context_window() is None and seq2seq.prompt_room(6) is None


def test_model_failures_are_backend_errors_naming_the_batch(tiny, gpt2):
    backend = CausalLMBackend(gpt2, tiny["tokenizer"], batch_size=2)

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: device-side assert triggered")

    backend._run_generate = broken
    prompts = [text_prompt(text) for text in TEXTS]
    with pytest.raises(BackendError, match="RuntimeError: CUDA error") as caught:
        backend.generate(prompts, [4, 4, 4])
    longest_two = sorted(range(3), key=lambda i: -len(backend.encode(TEXTS[i])))[:2]
    assert sorted(caught.value.indices) == sorted(longest_two)  # the first batch


def test_few_shot_prompts_default_to_the_models_context(tiny, gpt2, usb_fixture_dir, tmp_path):
    task, tokenizer = get_task("FAC"), tiny["tokenizer"]
    train = fac_split(usb_fixture_dir, "train")
    test = [dict(item, input_lines=item["input_lines"] * 12)
            for item in fac_split(usb_fixture_dir, "test")[:3]]
    backend = CausalLMBackend(gpt2, tokenizer)
    whole = render([], task.fewshot_parts(test[0]), get_style("flan-t5"), task.name)
    assert backend.count_tokens([whole.text])[0] > 256  # the whole input would not fit
    records, report = fewshot_predict(task, test, train, backend, "flan-t5", seed=0, n_shots=1,
                                      out_dir=tmp_path / "a")
    rows = read_jsonl(tmp_path / "a" / "outputs" / f"{task.name}.jsonl")
    assert [row["max_new_tokens"] for row in rows] == [8, 8, 8]
    for row in rows:
        assert len(backend.encode(row["prompt"])) + row["max_new_tokens"] <= 256
        assert row["kept_lines"] is not None and not row["overflow"]
    assert report["context_window"] == 256 and report["truncated_items"] == 3
    assert [record["id"] for record in records] == [item["id"] for item in test]
    capped, _ = fewshot_predict(task, test, train, backend, "flan-t5", seed=0, n_shots=1,
                                out_dir=tmp_path / "b", max_prompt_tokens=5000)
    assert capped == records  # a larger explicit limit is capped by the context
    assert read_jsonl(tmp_path / "b" / "outputs" / f"{task.name}.jsonl") == rows


def test_an_item_that_cannot_fit_names_the_task_and_the_item(tiny, gpt2, usb_fixture_dir,
                                                             tmp_path):
    task = get_task("FAC")
    train, test = fac_split(usb_fixture_dir, "train"), fac_split(usb_fixture_dir, "test")[:2]
    one_line = dict(test[1], input_lines=[" ".join(test[1]["input_lines"] * 15)])
    backend = CausalLMBackend(gpt2, tiny["tokenizer"])
    with pytest.raises(SumbenchError) as caught:
        fewshot_predict(task, [test[0], one_line], train, backend, "flan-t5", seed=0, n_shots=1,
                        out_dir=tmp_path)
    message = str(caught.value)
    assert message.startswith(f"few-shot factuality_classification: the backend failed on "
                              f"item {instance_label(one_line)} (instance 2): the prompt has ")
    assert "+ 8 new tokens, more than the 256 positions of the model" in message
    assert "instance 1" not in message


def hub_cached_model(folder_of, repo_id: str, commit: str):
    """Save a model as the offline hub cache holds a downloaded one (refs/main -> commit);
    returns the repo folder, to be removed afterwards."""
    from huggingface_hub import constants

    repo = Path(constants.HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--"))
    folder_of(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return repo


def test_loaded_hub_models_record_their_commit(tiny, tmp_path):
    import shutil

    from trainers.models.tiny import build_tiny_gpt2

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = hub_cached_model(lambda folder: build_tiny_gpt2(tiny["tokenizer"], save_dir=folder,
                                                           n_positions=64),
                            "sumbench-test/tiny-gpt2-backends", commit)
    try:
        backend = load_hf_backend("sumbench-test/tiny-gpt2-backends", device="cpu")
        assert backend.info["commit"] == commit and backend.context_window() == 64
        local = load_hf_backend(str(repo / "snapshots" / commit), device="cpu")
        assert local.info["commit"] is None  # a local folder has no hub commit
        # the same content loaded by name and by path: one fingerprint (the cache key)
        assert local.fingerprint() == backend.fingerprint()
        assert commit not in str(backend.fingerprint())
    finally:
        shutil.rmtree(repo)


# ---- a real OpenAI-compatible server on 127.0.0.1 (tests/servers.py) --------------------
@pytest.fixture
def chat_server():
    def answer(messages):
        text = messages[-1]["content"]
        return "LABELS: SENT1, SENT3" if text.endswith("LABELS:") else "Yes."

    server = ChatServer(answer)
    yield server
    server.close()


def test_chat_backend_sends_rendered_messages_and_caches(chat_server, usb_fixture_dir,
                                                         tmp_path):
    task = get_task("EXT")
    folder = usb_fixture_dir / "task_datasets" / "all" / task.name
    test = task.instances(read_jsonl(folder / "test.jsonl"))
    train = task.instances(read_jsonl(folder / "train.jsonl"))
    backend = chat_backend("gpt-3.5-turbo", base_url=chat_server.url,
                           cache=tmp_path / "chat.sqlite", workers=2)
    records, report = fewshot_predict(task, test, train, backend, "gpt-3.5", seed=3,
                                      out_dir=tmp_path / "run1")
    assert report["unparseable"] == 0 and report["prompts"] == len(test) == 3
    assert len(chat_server.requests) == 3
    rows = read_jsonl(tmp_path / "run1" / "outputs" / f"{task.name}.jsonl")
    sent = sorted((r["body"] for r in chat_server.requests),
                  key=lambda body: body["messages"][0]["content"])
    for row, body in zip(sorted(rows, key=lambda row: row["prompt"][0]["content"]), sent):
        assert chat_server.requests[0]["path"] == "/v1/chat/completions"
        assert body["messages"] == row["prompt"] and body["model"] == "gpt-3.5-turbo"
        assert body["temperature"] == 0.0 and body["max_tokens"] == row["max_new_tokens"]
        assert body["messages"][0]["role"] == "user"
        assert body["messages"][0]["content"].endswith("LABELS:")
    for record, instance in zip(records, test):
        expected = [0.0] * len(instance["input_lines"])
        expected[1] = expected[3] = 1.0
        assert record["prediction"] == expected and record["labels"] == instance["labels"]
    again = chat_backend("gpt-3.5-turbo", base_url=chat_server.url,
                         cache=tmp_path / "chat.sqlite")
    records_again, report_again = fewshot_predict(task, test, train, again, "gpt-3.5", seed=3,
                                                  out_dir=tmp_path / "run2")
    assert records_again == records and len(chat_server.requests) == 3
    assert again.client.requests_made == 0 and report_again["generated_this_run"] == 3


def test_chat_backend_wraps_text_prompts_and_counts_whitespace_tokens(chat_server):
    backend = ChatBackend(chat_backend("m", base_url=chat_server.url).client,
                          params={"temperature": 0.5}, max_tokens_param="max_completion_tokens")
    assert backend.generate([text_prompt("Is it? LABEL:")], [3]) == ["Yes."]
    body = chat_server.requests[-1]["body"]
    assert body["messages"] == [{"role": "user", "content": "Is it? LABEL:"}]
    assert body["max_completion_tokens"] == 3 and body["temperature"] == 0.5
    assert backend.count_tokens(["a  b\nc", ""]) == [3, 0] == [whitespace_token_count("a  b\nc"),
                                                                  0]
