"""Few-shot prediction: select shots, render prompts, generate, parse, write official records.

`fewshot_predict` runs one task on a list of test instances with demonstrations drawn from
training instances (trainers.fewshot.shots), prompts in one style (trainers.fewshot.prompts), a
backend
(trainers.fewshot.backends) and the robust parsers (trainers.fewshot.parsers).

Tokens (shot budgets and prompt length) are counted by `backend.count_tokens`: the model's
tokenizer without special tokens for HF backends; whitespace-separated words for chat backends
unless a counter is given (an under-estimate of BPE tokens, typically by a quarter to a third).

Prompt length: at most `max_prompt_tokens` (None = the style's own budget, if any: `llama`,
`vicuna` and `vicuna-chat` take Table 10's 6144 prompt and 512 new tokens, cut as
trainers.fewshot.planner describes; else no limit of its own) and, for backends that
know their model's context (`backend.prompt_room(max_new_tokens)`: HF models with absolute or
bounded positions), at most what fits the context beside the item's output room, so a prompt never
runs past the model's positions. As in the USB release, a test item whose prompt is too long keeps
the longest prefix of its input lines that fits; line-labelling items (EXT, EVEXT: tasks whose
`fewshot_parts` puts `line_labels` in `extra` and accepts `lines=(start, end)`) are cut into
consecutive windows of whole lines, each numbered from SENT0, and the window predictions are
stitched with `task.combine`. The same shots serve every window of an item.

Label answers (FAC, EXT, EVEXT) of the paper's Llama and Vicuna styles are read as
trainers.fewshot.label_reading describes (`label_reading`: "probabilities", their default, the
Yes/No token probabilities the backend records; or "phrases", the release's phrase rules); the
report gives the reading and `unreadable_answers`, the answers with no readable label. Other
styles' answers go through the general parsers (trainers.fewshot.parsers).

Files under `out_dir` (trainers.inference.prediction_io layout): `predictions/<task>.jsonl`
(official
records), `outputs/<task>.jsonl` (per prompt: prompt, raw output, parsed prediction, ok, shot
ids), `outputs/<task>.meta.json` (the report, the run's fingerprint and its provenance: config,
shot seed, versions, commit). Finished prompts are appended to a partial file as they come, so
an interrupted run resumes where it stopped; a finished run with the same fingerprint is reused
(its provenance is never compared).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict

from tasks.base import ModelInput
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.label_reading import needs_probabilities, read_labels, resolve_label_reading
from trainers.fewshot.parsers import parse_fewshot_output
from trainers.fewshot.planner import (
    PlannedPrompt,
    PromptPlanner,
    build_shot_pool,
    releases_pool,
    resolve_limits,
)
from trainers.fewshot.prompts import PromptStyle, get_style
from trainers.fewshot.shots import ShotBudget, ShotCandidate, shot_budget
from trainers.inference.prediction_io import OutputStore, digest, read_json_file


def instance_label(instance: dict) -> str:
    """A readable id: the instance's `id`, with `#summ_idx` where there is one."""
    label = str(instance.get("id", ""))
    return f"{label}#{instance['summ_idx']}" if "summ_idx" in instance else label


def _output_row(plan: PlannedPrompt, instance: dict, train: Sequence[dict], raw: str) -> dict:
    return {"instance": plan.instance, "window": plan.window, "id": instance_label(instance),
            "lines": list(plan.lines) if plan.lines else None, "kept_lines": plan.kept_lines,
            "shot_indices": list(plan.shots),
            "shot_ids": [instance_label(train[i]) for i in plan.shots],
            "max_new_tokens": plan.max_new_tokens, "overflow": plan.overflow,
            "prompt": plan.prompt.payload(), "raw_output": str(raw),
            **({"yes_probabilities": {str(k): v for k, v in raw.yes_probabilities.items()}}
               if getattr(raw, "yes_probabilities", None) else {})}


def backend_failure(task_name: str, chunk: Sequence[PlannedPrompt], instances: Sequence[dict],
                    error: Exception, total: int | None = None) -> SumbenchError:
    """A SumbenchError naming the task and the items whose prompts the backend failed on
    (`error.indices` when the backend says which, else the whole chunk): each item's label
    and its 1-based position among the test instances (labels may repeat)."""
    indices = [i for i in getattr(error, "indices", ()) if 0 <= i < len(chunk)] \
        or range(len(chunk))
    names = [f"{instance_label(instances[chunk[i].instance])} (instance "
             f"{chunk[i].instance + 1}" + (f", window {chunk[i].window})" if chunk[i].lines
                                           else ")") for i in indices]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    reason = str(error) if isinstance(error, SumbenchError) \
        else f"{type(error).__name__}: {error}"
    counted = f" ({len(names)} of {total} prompts failed; the answered ones are saved and a " \
        "rerun with --resume asks only for the failed ones)" if total else ""
    return SumbenchError(f"few-shot {task_name}: the backend failed on item "
                         f"{shown}: {reason}{counted}")


def _generate_missing(task_name: str, plans, done: dict, backend, store, instances, train,
                      chunk_size, label_probabilities: bool = False) -> int:
    """Run the prompts not yet in `done` (in chunks, appended to the partial file)."""
    from tqdm.auto import tqdm

    todo = [plan for plan in plans if (plan.instance, plan.window) not in done]
    failed: list[tuple[PlannedPrompt, Exception]] = []
    with tqdm(total=len(todo), desc="few-shot", unit="prompt", disable=None) as bar:
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start:start + chunk_size]
            raws = _generate_each(backend, chunk, failed, label_probabilities)
            rows = [_output_row(plan, instances[plan.instance], train, raw)
                    for plan, raw in zip(chunk, raws) if raw is not None]
            done.update(((row["instance"], row["window"]), row) for row in rows)
            if store is not None and rows:
                store.append(rows)
            bar.update(len(chunk))
    if failed:
        error = failed[0][1]
        plans_failed = [plan for plan, _ in failed]
        raise backend_failure(task_name, plans_failed, instances, error,
                              total=len(todo)) from error
    return len(todo)


def _generate_each(backend, chunk: Sequence[PlannedPrompt], failed: list,
                   label_probabilities: bool = False) -> list[str | None]:
    """The chunk's outputs; when the chunk fails, its prompts one by one: a failing prompt
    gives None and (prompt, error) in `failed`, the others their outputs."""
    try:
        return _generate(backend, chunk, label_probabilities)
    except Exception as error:
        if len(chunk) == 1:
            failed.append((chunk[0], error))
            return [None]
    return [output for plan in chunk
            for output in _generate_each(backend, [plan], failed, label_probabilities)]


def _generate(backend, chunk: Sequence[PlannedPrompt],
              label_probabilities: bool = False) -> list[str]:
    extra = {"label_probabilities": True} if label_probabilities else {}
    return backend.generate([plan.prompt for plan in chunk],
                            [plan.max_new_tokens for plan in chunk], **extra)


def _read(task, plan: PlannedPrompt, row: dict, label_reading: str | None) -> tuple:
    """(prediction, ok, readable) of one output: by the label reading when there is one,
    else by the general parsers (readable = ok)."""
    if label_reading is not None:
        labels = plan.item.extra.get("line_labels")
        read = read_labels(label_reading, row["raw_output"], row.get("yes_probabilities"),
                           None if labels is None else len(labels))
        return read.values, read.ok, read.readable
    prediction, ok = parse_fewshot_output(
        task, row["raw_output"], plan.item, cue=plan.prompt.cue, stops=plan.prompt.stops,
        line_output=plan.prompt.line_output, yes_probabilities=row.get("yes_probabilities"))
    return prediction, ok, ok


def _assemble(task, instances, plans, done, label_reading: str | None = None
              ) -> tuple[list[dict], list[dict], dict]:
    """Parse every output, stitch windows, build records; count what did not parse (and,
    with a label reading, the answers with no readable label)."""
    by_instance: dict[int, list[PlannedPrompt]] = {}
    for plan in plans:
        by_instance.setdefault(plan.instance, []).append(plan)
    records, outputs, unparseable, bad_items, unreadable = [], [], 0, 0, 0
    for index, instance in enumerate(instances):
        windows, predictions, inputs = by_instance[index], [], []
        for plan in windows:
            row = dict(done[(plan.instance, plan.window)])
            prediction, ok, readable = _read(task, plan, row, label_reading)
            row.update(parsed=prediction, ok=bool(ok))
            if label_reading is not None:
                row["readable"] = bool(readable)
                unreadable += not readable
            outputs.append(row)
            unparseable += not ok
            predictions.append(prediction)
            inputs.append(ModelInput(plan.prompt.text, plan.item.output, window=plan.window,
                                     lines=plan.lines))
        bad_items += any(not row["ok"] for row in outputs[-len(windows):])
        combined = (task.combine(predictions, instance, inputs) if len(windows) > 1
                    else predictions[0])
        records.append(task.prediction_record(instance, combined))
    counts = {"unparseable": unparseable, "unparseable_items": bad_items}
    if label_reading is not None:
        counts.update(label_reading=label_reading, unreadable_answers=unreadable)
    return records, outputs, counts


def _report(task, style, backend, budget, seed, pool, instances, plans, counts) -> dict:
    first = {plan.instance: plan for plan in plans if plan.window == 0}
    shot_counts = [len(first[i].shots) for i in range(len(instances))]
    window_counts = Counter(plan.instance for plan in plans)
    return {
        "task": task.name, "style": style.name, "backend": backend.fingerprint(),
        "seed": seed, "budget": budget.as_dict(), "items": len(instances),
        "prompts": len(plans), **counts, "context_window": context_window(backend),
        "unparseable_rate": counts["unparseable"] / len(plans) if plans else 0.0,
        "pool_size": len(pool),
        "pool_within_shot_budget": sum(budget.max_shot_tokens is None
                                       or c.n_tokens <= budget.max_shot_tokens for c in pool),
        "shots_mean": sum(shot_counts) / len(shot_counts) if shot_counts else 0.0,
        "shots_min": min(shot_counts, default=0),
        "items_with_fewer_shots": sum(count < budget.n_shots for count in shot_counts),
        "zero_shot_items": shot_counts.count(0),
        "windowed_items": sum(count > 1 for count in window_counts.values()),
        "truncated_items": sum(plan.kept_lines is not None for plan in first.values()),
        "overflow_prompts": sum(plan.overflow for plan in plans)}


def _finished_run(store) -> tuple[list[dict], dict] | None:
    """(records, report) of an earlier finished run with the same fingerprint, if any."""
    if not (store.meta_path.is_file() and store.predictions_path.is_file()):
        return None
    meta = read_json_file(store.meta_path)
    if not isinstance(meta, dict) or meta.get("fingerprint") != store.fingerprint \
            or "report" not in meta:
        return None
    return read_jsonl(store.predictions_path), {**meta["report"], "generated_this_run": 0}


def context_window(backend) -> int | None:
    """The backend model's number of positions, when it knows one."""
    window = getattr(backend, "context_window", None)
    return window() if callable(window) else None


def run_fingerprint(task, style, backend, budget, seed, test_instances, train_instances,
                    max_prompt_tokens, max_new_tokens, label_reading: str | None = None) -> dict:
    """What identifies a few-shot run (a partial file of another run is never resumed); the
    label reading only where there is one, and the pool's rule only where it leaves training
    instances out (runs without either keep their fingerprints)."""
    reading = {"label_reading": label_reading} if label_reading is not None else {}
    if releases_pool(style) and not all(map(task.first_of_its_record, train_instances)):
        reading["shot_pool"] = "the first instance of each training record"
    return {**reading, "runner": "fewshot", "task": task.name, "task_version": task.version,
            "style": style.name, "style_spec": digest(asdict(style)),
            "backend": backend.fingerprint(), "budget": budget.as_dict(), "seed": seed,
            "max_prompt_tokens": max_prompt_tokens, "max_new_tokens": max_new_tokens,
            "context_window": context_window(backend),
            "test": digest(list(test_instances)), "train": digest(list(train_instances))}


def plan_prompts(task, test_instances: Sequence[dict], train_instances: Sequence[dict],
                 backend, style: PromptStyle, budget: ShotBudget, *, seed: int,
                 max_prompt_tokens: int | None = None, max_new_tokens: int | None = None
                 ) -> tuple[list[PlannedPrompt], list[ShotCandidate]]:
    """(every prompt of the test items in order, the shot pool): shots, windows and
    truncation as `fewshot_predict` runs them; the backend only counts tokens here."""
    max_prompt_tokens, max_new_tokens = resolve_limits(style, max_prompt_tokens, max_new_tokens)
    shot_parts, pool = build_shot_pool(task, train_instances, style, backend)
    planner = PromptPlanner(task, style, backend, shot_parts, pool, budget, seed,
                            max_prompt_tokens, max_new_tokens,
                            prompt_room=getattr(backend, "prompt_room", None))
    return [plan for index, instance in enumerate(test_instances)
            for plan in planner.plan(index, instance)], pool


def fewshot_predict(task, test_instances: Sequence[dict], train_instances: Sequence[dict],
                    backend, style: str | PromptStyle, *, seed: int, n_shots: int | None = None,
                    out_dir: str | None = None, max_prompt_tokens: int | None = None,
                    max_new_tokens: int | None = None, resume: bool = True,
                    chunk_size: int = 32, label_reading: str | None = None
                    ) -> tuple[list[dict], dict]:
    """Few-shot predictions for `test_instances`: (official prediction records, report).

    `report["unparseable"]` counts prompts whose output could not be parsed (their
    prediction is the parser's neutral fallback); `report["generated_this_run"]` counts the
    prompts handed to the backend in this call (its response cache may answer them).
    Prompts are kept within `max_prompt_tokens` and the model's context (module docstring);
    a backend failure is a SumbenchError naming the task and the items. `label_reading`
    ("probabilities" or "phrases"; None: the style's default) reads FAC, EXT and EVEXT answers
    of the Llama and Vicuna styles (module docstring); `report["label_reading"]` and
    `report["unreadable_answers"]` then say how. With `out_dir`,
    files are written as in the module docstring; with `resume`, a finished run with the same
    fingerprint is returned as is and an interrupted one is continued.
    """
    style = get_style(style)
    max_prompt_tokens, max_new_tokens = resolve_limits(style, max_prompt_tokens, max_new_tokens)
    test_instances, train_instances = list(test_instances), list(train_instances)
    budget = shot_budget(task.name, n_shots)
    reading = resolve_label_reading(style, task, label_reading)
    probabilities = needs_probabilities(reading, backend)
    store = None
    if out_dir is not None:
        store = OutputStore(out_dir, task.name, run_fingerprint(
            task, style, backend, budget, seed, test_instances, train_instances,
            max_prompt_tokens, max_new_tokens, reading))
        finished = _finished_run(store) if resume else None
        if finished is not None:
            return finished
    plans, pool = plan_prompts(task, test_instances, train_instances, backend, style, budget,
                               seed=seed, max_prompt_tokens=max_prompt_tokens,
                               max_new_tokens=max_new_tokens)
    done = store.load_partial(resume) if store is not None else {}
    generated = _generate_missing(task.name, plans, done, backend, store, test_instances,
                                  train_instances, max(1, chunk_size), probabilities)
    records, outputs, counts = _assemble(task, test_instances, plans, done, reading)
    report = _report(task, style, backend, budget, seed, pool, test_instances, plans, counts)
    report["generated_this_run"] = generated
    if store is not None:
        config = {**store.fingerprint, "backend_info": getattr(backend, "info", None)}
        store.finish(outputs, records, {"report": report}, config=config, seeds={"shots": seed})
    return records, report
