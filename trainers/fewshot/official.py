"""The USB release's GPT-3.5 few-shot protocol, run as the release ran it (`--style
gpt-3.5-official`), beside the paper-described protocol of trainers.fewshot.runner.

What the release does, and what this module does the same way:
- shot pool per task: each training record converted without a token limit; its FIRST
  converted prompt (first window for EXT / EVEXT) is a candidate when prompt + answer take at
  most 512 cl100k_base tokens; candidates keep the training file's order;
- shot order: one global NumPy generator seeded 1337 draws `permutation(pool size)[:4]` for
  every record of every task, tasks in sorted name order, the validation split before the
  test split. Here an explicit `np.random.RandomState(1337)` replays that whole sequence
  (the same draws, no global state), so a task's shots do not depend on which tasks a run
  scores; the replay reads every task's train / validation / test files of the variant;
- prompt = instruction + "\\n" + for each shot (prompt + answer + "\\n") + the test prompt, the
  test content cut to 4,096 - (instruction + shots) - 8 - the task's answer room tokens; a
  prompt whose total (with the reference answer, as the release measures) still exceeds
  4,096 falls back to zero-shot (instruction + "\\n" + test prompt);
- each prompt asks for at most 4,096 - prompt tokens - 8 new tokens; no other sampling
  parameter is sent (the API's defaults, as the release);
- answers parsed by the release's post-processing (trainers.fewshot.official_prompts); EXT / EVEXT
  windows are stitched per item. An answer the FAC rules cannot read gets the release's
  default ([1.0], "supported") and is counted as unparseable in the report.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks import get_task, task_names
from tasks.base import SPLITS
from tasks.plumbing.errors import SumbenchError
from trainers.fewshot.official_prompts import (
    INSTRUCTIONS,
    MAX_OUTPUT_TOKENS,
    convert,
    count,
    parse_official,
)
from trainers.fewshot.prompts import OFFICIAL_GPT35_STYLE as STYLE

CONTEXT, SHOT_TOKENS, N_SHOTS, TOKEN_MARGIN, SEED = 4096, 512, 4, 8, 1337
UNLIMITED = 999_999


def shot_pool(task_name: str, train_records: Sequence[dict]) -> list[dict]:
    """The release's shot candidates: first converted prompt of each training record whose
    prompt + answer fit SHOT_TOKENS, in file order."""
    pool = []
    for index, record in enumerate(train_records):
        first = convert(task_name, record, UNLIMITED)[:1]
        for item in first:
            total = count(item["input_string"]) + count(item["output_string"])
            if total <= SHOT_TOKENS:
                pool.append({**item, "record": index, "tokens": total})
    return pool


def replay_shot_choices(pool_sizes: dict[str, int], split_sizes: dict[str, dict[str, int]],
                        task_name: str, split: str = "test") -> list[list[int]]:
    """The shots the release's seeded global generator gave each record of `task_name`'s
    `split`: replayed over every task (sorted) and split (validation, then test)."""
    rng = np.random.RandomState(SEED)
    chosen: list[list[int]] = []
    for task in sorted(pool_sizes):
        for part in ("validation", "test"):
            for _ in range(split_sizes.get(task, {}).get(part, 0)):
                draw = rng.permutation(pool_sizes[task])[:N_SHOTS].tolist()
                if task == task_name and part == split:
                    chosen.append(draw)
    return chosen


def build_prompts(task_name: str, record: dict, pool: Sequence[dict],
                  shots: Sequence[int]) -> list[dict]:
    """The prompts of one test record (one per window) with their shots."""
    head = INSTRUCTIONS[task_name] + "\n"
    for index in shots:
        head += pool[index]["input_string"] + pool[index]["output_string"] + "\n"
    room = CONTEXT - count(head) - TOKEN_MARGIN - MAX_OUTPUT_TOKENS.get(task_name, 0)
    prompts = []
    for item in convert(task_name, record, room):
        prompt, zero_shot = head + item["input_string"], False
        if count(prompt + item["output_string"]) > CONTEXT:
            prompt, zero_shot = INSTRUCTIONS[task_name] + "\n" + item["input_string"], True
        prompts.append({**item, "prompt": prompt, "zero_shot": zero_shot,
                        "shots": [pool[i]["record"] for i in shots] if not zero_shot else [],
                        "max_new_tokens": CONTEXT - count(prompt) - TOKEN_MARGIN})
    return prompts


def load_split_records(data_dir: str | None, variant: str) -> tuple[dict, dict]:
    """(task -> split -> records, task -> split -> size) of every USB task of the variant."""
    records: dict[str, dict[str, list[dict]]] = {}
    for name in task_names("usb"):
        task = get_task(name)
        for split in SPLITS:
            try:
                records.setdefault(name, {})[split] = [dict(r) for r in
                                                        task.load(split, variant, data_dir)]
            except SumbenchError:
                records.setdefault(name, {})[split] = []
    sizes = {name: {split: len(rows) for split, rows in splits.items()}
             for name, splits in records.items()}
    return records, sizes


def plan_task(task_name: str, data_dir: str | None, variant: str,
              split: str = "test") -> tuple[list[dict], list[dict]]:
    """(test records, prompts) of one task under the official protocol."""
    records, sizes = load_split_records(data_dir, variant)
    pools = {name: shot_pool(name, splits["train"]) for name, splits in records.items()
             if sizes[name]["train"]}
    if task_name not in pools:
        raise SumbenchError(f"{task_name} has no train split in variant {variant!r}: the "
                            f"official protocol draws its shots from it")
    choices = replay_shot_choices({n: len(p) for n, p in pools.items()},
                                  {n: sizes[n] for n in pools}, task_name, split)
    test = records[task_name][split]
    prompts = []
    for index, (record, shots) in enumerate(zip(test, choices)):
        for prompt in build_prompts(task_name, record, pools[task_name], shots):
            prompts.append({**prompt, "record": index})
    return test, prompts


def stitch(task, test_records: Sequence[dict], prompts: Sequence[dict],
           answers: Sequence[str]) -> tuple[list[dict], dict]:
    """Official prediction records (one per task instance, windows stitched in order) and
    the parse counts."""
    parsed: dict[tuple, list] = {}
    unparseable = 0
    for prompt, answer in zip(prompts, answers):
        value, ok = parse_official(task.name, prompt["prompt"], answer)
        unparseable += not ok
        parsed.setdefault((prompt["record"], prompt.get("summ_idx")), []).append(value)
    line_task = task.name in ("extractive_summarization", "evidence_extraction")
    records = []
    for index, record in enumerate(test_records):
        for instance in task.instances([record]):
            pieces = parsed[(index, instance["summ_idx"] if task.name == "evidence_extraction"
                             else None)]
            prediction = [v for piece in pieces for v in piece] if line_task else pieces[0]
            records.append(task.prediction_record(instance, prediction))
    return records, {"prompts": len(prompts), "unparseable": unparseable,
                     "zero_shot_prompts": sum(p["zero_shot"] for p in prompts)}


def official_predict(task, backend, data_dir: str | None, variant: str = "all", *,
                     split: str = "test") -> tuple[list[dict], dict, list[dict]]:
    """(official prediction records, report, per-prompt outputs) of one task."""
    from tqdm.auto import tqdm

    test, prompts = plan_task(task.name, data_dir, variant, split)
    answers = []
    for prompt in tqdm(prompts, desc=f"{STYLE} {task.name}", unit="prompt", disable=None):
        answers.append(backend.complete_text(prompt["prompt"], prompt["max_new_tokens"],
                                             params={}))
    records, counts = stitch(task, test, prompts, answers)
    outputs = [{**{k: v for k, v in prompt.items() if k != "lines"}, "raw_output": answer}
               for prompt, answer in zip(prompts, answers)]
    report = {"task": task.name, "style": STYLE, "items": len(records), **counts,
              "unparseable_rate": counts["unparseable"] / len(prompts) if prompts else 0.0,
              "backend": backend.fingerprint(), "seed": SEED, "shots": N_SHOTS,
              "shot_tokens": SHOT_TOKENS, "context": CONTEXT}
    return records, report, outputs


