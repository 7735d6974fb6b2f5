"""The few-shot runner end to end: shots, windows, parsing, official records, resuming."""
from __future__ import annotations

import re

import pytest

from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.chat_client import ScoredText
from trainers.fewshot.prompts import get_style, render_output
from trainers.fewshot.runner import PromptPlanner, build_shot_pool, fewshot_predict, instance_label
from trainers.fewshot.shots import select_for_item, shot_budget

#: task: (headline metric, style, prompt limit in whitespace tokens, what the limit causes)
PERFECT = {"ABS": ("rouge_gmean", "llama", 600, "truncated_items"),
           "COMP": ("rouge_gmean", "vicuna", None, None),
           "TOPIC": ("rouge_gmean", "flan-t5", 600, "truncated_items"),
           "FIX": ("exactmatch", "gpt-3.5", 400, "zero_shot_items"),
           "UNSUP": ("f1", "llama", None, None), "FAC": ("auc", "gpt-3.5", 700, None),
           "EXT": ("auc", "llama", 500, "windowed_items"),
           "EVEXT": ("f1", "gpt-3.5", 700, "windowed_items")}


def split(usb_fixture_dir, task, name):
    path = usb_fixture_dir / "task_datasets" / "all" / task.name / f"{name}.jsonl"
    return task.instances(read_jsonl(path))


def prompt_text(row: dict) -> str:
    prompt = row["prompt"]
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


class OracleBackend:
    """Answers each planned prompt with its gold output, followed by a next-shot cue (which
    the parsers must cut off); raises after `fail_after` prompts when asked to. Asked for label
    probabilities, it gives p(Yes) 1.0 at each "Yes" and 0.0 at each "No" of its answers."""

    kind = "text"
    reads_label_probabilities = True

    def __init__(self, answers: dict[str, str], fail_after: int | None = None):
        self.answers, self.fail_after, self.prompts = answers, fail_after, []

    def fingerprint(self) -> dict:
        return {"type": "oracle"}

    def count_tokens(self, texts):
        return [len(text.split()) for text in texts]

    def generate(self, prompts, caps, label_probabilities=False):
        if self.fail_after is not None and len(self.prompts) + len(prompts) > self.fail_after:
            raise KeyboardInterrupt("interrupted")
        self.prompts.extend(prompts)
        answers = [self.answers[prompt.text] for prompt in prompts]
        return [sure_labels(answer) for answer in answers] if label_probabilities else answers


def sure_labels(answer: str) -> ScoredText:
    """`answer` with p(Yes) 1.0 at its "Yes" words and 0.0 at its "No" words."""
    return ScoredText(answer, {match.start(): 1.0 if match.group() == "Yes" else 0.0
                               for match in re.finditer(r"\b(Yes|No)\b", answer)})


def oracle(task, test, train, style, seed, max_prompt_tokens=None, **options):
    """A backend that knows the gold output of every prompt the runner will plan."""
    style = get_style(style)
    probe = OracleBackend({})
    parts, pool = build_shot_pool(task, train, style, probe)
    planner = PromptPlanner(task, style, probe, parts, pool, shot_budget(task.name), seed,
                            max_prompt_tokens)
    answers = {plan.prompt.text: f" {render_output(plan.item, style)}\nCONTENT: next shot"
               for index, instance in enumerate(test) for plan in planner.plan(index, instance)}
    return OracleBackend(answers, **options)


@pytest.mark.parametrize("alias", sorted(PERFECT))
def test_gold_answers_give_perfect_official_scores(usb_fixture_dir, tmp_path, alias):
    metric, style, limit, effect = PERFECT[alias]
    task = get_task(alias)
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    backend = oracle(task, test, train, style, seed=5, max_prompt_tokens=limit)
    records, report = fewshot_predict(task, test, train, backend, style, seed=5,
                                      out_dir=tmp_path, max_prompt_tokens=limit)
    assert report["task"] == task.name and report["items"] == len(test) == len(records)
    assert report["unparseable"] == 0 and report["unparseable_items"] == 0
    assert report["prompts"] == len(backend.prompts)
    assert task.score(records)[metric] == pytest.approx(1.0)
    for record, instance in zip(records, test):
        task.validate_record(record)
        assert record == task.prediction_record(instance, record["prediction"])
    assert read_jsonl(tmp_path / "predictions" / f"{task.name}.jsonl") == records
    rows = read_jsonl(tmp_path / "outputs" / f"{task.name}.jsonl")
    assert len(rows) == report["prompts"] and all(row["ok"] for row in rows)
    assert all(row["raw_output"].endswith("\nCONTENT: next shot") for row in rows)
    if effect is not None:
        assert report[effect] > 0
    if limit is not None:
        assert all(len(prompt_text(row).split()) <= limit for row in rows)


def test_windows_cover_every_line_once(usb_fixture_dir, tmp_path):
    task = get_task("EVEXT")
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    backend = oracle(task, test, train, "llama", seed=0, max_prompt_tokens=650)
    fewshot_predict(task, test, train, backend, "llama", seed=0, out_dir=tmp_path,
                    max_prompt_tokens=650)
    rows = read_jsonl(tmp_path / "outputs" / f"{task.name}.jsonl")
    for index, instance in enumerate(test):
        windows = [row["lines"] for row in rows if row["instance"] == index]
        assert windows[0][0] == 0 and windows[-1][1] == len(instance["input_lines"])
        assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
        shots = {tuple(row["shot_indices"]) for row in rows if row["instance"] == index}
        assert len(shots) == 1  # one draw of shots per item, shared by its windows
    assert all(len(row["prompt"].split()) <= 650 for row in rows)


def test_shots_are_recorded_seeded_and_never_from_the_same_article(usb_fixture_dir, tmp_path):
    task = get_task("FAC")
    test = split(usb_fixture_dir, task, "test")
    pool_instances = split(usb_fixture_dir, task, "train") + test  # the item's own article too
    style = get_style("flan-t5")
    backend = oracle(task, test, pool_instances, style, seed=9)
    fewshot_predict(task, test, pool_instances, backend, style, seed=9, out_dir=tmp_path)
    rows = read_jsonl(tmp_path / "outputs" / f"{task.name}.jsonl")
    _, pool = build_shot_pool(task, pool_instances, style, backend)
    budget = shot_budget(task.name)
    for row, instance in zip(rows, test):
        expected = select_for_item(pool, budget, 9, row["instance"], instance["id"])
        assert row["shot_indices"] == expected and len(expected) > 0
        assert row["shot_ids"] == [instance_label(pool_instances[i]) for i in expected]
        assert all(pool_instances[i]["id"] != instance["id"] for i in expected)
        assert sum(pool[i].n_tokens for i in expected) <= budget.max_total_tokens


def test_outputs_do_not_depend_on_chunking(usb_fixture_dir, tmp_path):
    task = get_task("COMP")
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    results = []
    for chunk_size in (1, 5, 100):
        backend = oracle(task, test, train, "vicuna", seed=2)
        out = tmp_path / str(chunk_size)
        records, _ = fewshot_predict(task, test, train, backend, "vicuna", seed=2, out_dir=out,
                                     chunk_size=chunk_size)
        results.append((records, read_jsonl(out / "outputs" / f"{task.name}.jsonl")))
    assert results[0] == results[1] == results[2]


def test_interrupted_runs_resume_where_they_stopped(usb_fixture_dir, tmp_path):
    task = get_task("UNSUP")
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")
    reference, _ = fewshot_predict(task, test, train, oracle(task, test, train, "llama", 4),
                                   "llama", seed=4, out_dir=tmp_path / "whole")
    failing = oracle(task, test, train, "llama", 4, fail_after=5)
    with pytest.raises(KeyboardInterrupt):
        fewshot_predict(task, test, train, failing, "llama", seed=4, out_dir=tmp_path / "run",
                        chunk_size=2)
    partial = read_jsonl(tmp_path / "run" / "outputs" / f"{task.name}.partial.jsonl")
    assert len(partial) == 4 and not (tmp_path / "run" / "predictions").exists()
    second = oracle(task, test, train, "llama", 4)
    records, report = fewshot_predict(task, test, train, second, "llama", seed=4,
                                      out_dir=tmp_path / "run", chunk_size=2)
    assert len(second.prompts) == len(test) - 4 == report["generated_this_run"]
    assert records == reference
    assert (read_jsonl(tmp_path / "run" / "outputs" / f"{task.name}.jsonl")
            == read_jsonl(tmp_path / "whole" / "outputs" / f"{task.name}.jsonl"))
    third = oracle(task, test, train, "llama", 4)
    again, report = fewshot_predict(task, test, train, third, "llama", seed=4,
                                    out_dir=tmp_path / "run")
    assert again == reference and third.prompts == [] and report["generated_this_run"] == 0


def test_a_damaged_finished_run_file_is_a_data_error_naming_it(usb_fixture_dir, tmp_path):
    """Malformed meta.json: a DataError naming file and line; valid JSON that is no run's
    meta (a list): the run is not reused but generated again."""
    from tasks.plumbing.errors import DataError

    task = get_task("FAC")
    test, train = split(usb_fixture_dir, task, "test")[:3], split(usb_fixture_dir, task, "train")
    reference, _ = fewshot_predict(task, test, train, oracle(task, test, train, "llama", 1),
                                   "llama", seed=1, out_dir=tmp_path)
    meta = tmp_path / "outputs" / f"{task.name}.meta.json"
    meta.write_text("{not json")
    with pytest.raises(DataError, match=r"meta\.json:1: malformed JSON \(Expecting property "
                                        r"name enclosed in double quotes at column 2\); delete "
                                        r"the file or run without resuming"):
        fewshot_predict(task, test, train, oracle(task, test, train, "llama", 1), "llama",
                        seed=1, out_dir=tmp_path)
    meta.write_text("[]")
    backend = oracle(task, test, train, "llama", 1)
    records, report = fewshot_predict(task, test, train, backend, "llama", seed=1,
                                      out_dir=tmp_path)
    assert records == reference and report["generated_this_run"] == len(backend.prompts) > 0


def test_meta_json_records_provenance_that_never_decides_reuse(usb_fixture_dir, tmp_path):
    """meta.json holds the run's config, its shot seed, versions and commit; a finished run
    whose provenance differs (another time or commit) is still reused."""
    import json

    task = get_task("FAC")
    test, train = split(usb_fixture_dir, task, "test")[:3], split(usb_fixture_dir, task, "train")
    reference, _ = fewshot_predict(task, test, train, oracle(task, test, train, "llama", 2),
                                   "llama", seed=2, out_dir=tmp_path)
    meta_path = tmp_path / "outputs" / f"{task.name}.meta.json"
    meta = json.loads(meta_path.read_text())
    provenance = meta["provenance"]
    assert provenance["seeds"] == {"shots": 2}
    assert provenance["config"] == {**meta["fingerprint"], "backend_info": None}
    assert provenance["config"]["style"] == "llama" and provenance["config"]["seed"] == 2
    assert set(provenance["git"]) == {"commit", "dirty"} and provenance["packages"]
    provenance.update(created="2000-01-01T00:00:00+00:00",
                      git={"commit": "0" * 40, "dirty": True})
    meta_path.write_text(json.dumps(meta))
    backend = oracle(task, test, train, "llama", 2)
    records, report = fewshot_predict(task, test, train, backend, "llama", seed=2,
                                      out_dir=tmp_path)
    assert records == reference and backend.prompts == [] and report["generated_this_run"] == 0


def test_tiny_causal_model_gibberish_is_counted_not_fatal(usb_fixture_dir, tmp_path):
    from trainers.fewshot.backends import CausalLMBackend
    from trainers.models.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    task = get_task("FAC")
    test, train = split(usb_fixture_dir, task, "test")[:6], split(usb_fixture_dir, task, "train")
    tokenizer = build_tiny_tokenizer([line for r in train for line in r["input_lines"]],
                                     vocab_size=500)
    model = build_tiny_causal_lm(tokenizer, seed=0)
    backend = CausalLMBackend(model, tokenizer, batch_size=4, cache=tmp_path / "cache.sqlite")
    records, report = fewshot_predict(task, test, train, backend, "llama", seed=1, n_shots=1,
                                      out_dir=tmp_path / "a", max_new_tokens=4)
    rows = read_jsonl(tmp_path / "a" / "outputs" / f"{task.name}.jsonl")
    assert report["unparseable"] == sum(not row["ok"] for row in rows) > 0
    assert report["shots_mean"] == 1 and backend.generated == len(test)
    # llama's default reading: p(Yes) at the generated Yes/No tokens, FAC needing exactly one
    assert report["label_reading"] == "probabilities"
    assert report["unreadable_answers"] == report["unparseable"]
    for record, row in zip(records, rows):
        assert record["prediction"] == row["parsed"]
        assert row["ok"] == row["readable"] == (len(record["prediction"]) == 1)
        assert row["prompt"].endswith("\nLABEL:") and "[INST]" not in row["prompt"]
        assert not row["raw_output"].startswith(row["prompt"][:20])
    same, report_again = fewshot_predict(task, test, train, backend, "llama", seed=1,
                                         n_shots=1, out_dir=tmp_path / "b", max_new_tokens=4)
    assert same == records and backend.generated == len(test)  # all from the cache
    assert report_again["unparseable"] == report["unparseable"]


class RaisingBackend(OracleBackend):
    """Fails like a broken model on its second call."""

    def generate(self, prompts, caps):
        if self.prompts:
            raise RuntimeError("device-side assert triggered")
        return super().generate(prompts, caps)


def test_backend_failures_name_the_task_and_the_items(usb_fixture_dir, tmp_path):
    task = get_task("COMP")
    test, train = split(usb_fixture_dir, task, "test")[:4], split(usb_fixture_dir, task, "train")
    answers = oracle(task, test, train, "vicuna", seed=2).answers
    with pytest.raises(SumbenchError) as caught:
        fewshot_predict(task, test, train, RaisingBackend(answers), "vicuna", seed=2,
                        out_dir=tmp_path, chunk_size=2)
    assert str(caught.value) == (
        f"few-shot multisentence_compression: the backend failed on item "
        f"{instance_label(test[2])} (instance 3), {instance_label(test[3])} (instance 4): "
        f"RuntimeError: device-side assert triggered (2 of 4 prompts failed; the answered "
        f"ones are saved and a rerun with --resume asks only for the failed ones)")
    partial = read_jsonl(tmp_path / "outputs" / f"{task.name}.partial.jsonl")
    assert [row["instance"] for row in partial] == [0, 1]  # the first chunk is kept


def test_windows_keep_room_for_their_output_in_the_models_context(usb_fixture_dir, tmp_path):
    """A backend that knows its context (`prompt_room`): each window's prompt plus its own
    output room (5 tokens a line + 8) stays within it; no explicit limit is needed (a style
    without budgets of its own: `llama` has Table 10's, trainers/test_paper_budgets.py)."""
    task, context = get_task("EXT"), 560
    test, train = split(usb_fixture_dir, task, "test"), split(usb_fixture_dir, task, "train")

    class ContextOracle(OracleBackend):
        def context_window(self):
            return context

        def prompt_room(self, max_new_tokens):
            return context - max_new_tokens

    style = get_style("flan-t5")
    probe = ContextOracle({})
    parts, pool = build_shot_pool(task, train, style, probe)
    planner = PromptPlanner(task, style, probe, parts, pool, shot_budget(task.name), 1,
                            prompt_room=probe.prompt_room)
    answers = {plan.prompt.text: f" {render_output(plan.item, style)}"
               for index, instance in enumerate(test) for plan in planner.plan(index, instance)}
    records, report = fewshot_predict(task, test, train, ContextOracle(answers), style, seed=1,
                                      out_dir=tmp_path)
    rows = read_jsonl(tmp_path / "outputs" / f"{task.name}.jsonl")
    assert report["windowed_items"] > 0 and report["context_window"] == context
    for row in rows:
        start, end = row["lines"]
        assert row["max_new_tokens"] == 5 * (end - start) + 8
        assert len(prompt_text(row).split()) + row["max_new_tokens"] <= context
    assert task.score(records)["auc"] == pytest.approx(1.0)
