"""USB tasks inside EleutherAI's lm-evaluation-harness, and lm-eval's samples back as
sumbench predictions.

`export_tasks` writes an lm-eval task folder: per task a YAML config and a JSONL of documents,
one per prompt that `sumbench run --mode fewshot` would send (shots, truncation and output
room planned by sumbench with the model's tokenizer, trainers.fewshot.runner.plan_prompts), a group
`usb`, a `utils.py` whose hooks call this module (sumbench's own parsers and metrics) and a
README. lm-eval then only generates: zero-shot over the rendered prompt, greedy, until the
style's stop strings, at most the task's output room.

What lm-eval cannot express is refused at export, never scored differently:
- line tasks (EXT, EVEXT): each window has its own output room, and a generate_until task
  has one `max_gen_toks`;
- a prompt that does not fit the model's context even cut (sumbench fails it; lm-eval would
  cut its start).
Label tasks are scored from the generated Yes/No, as sumbench's few-shot runs score them
(label probabilities need log-probabilities that generate_until does not keep).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks import get_task
from tasks.base import FewShotParts
from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import iter_jsonl, write_jsonl
from tasks.scoring import score_records
from trainers.fewshot.backends import CausalLMBackend
from trainers.fewshot.label_reading import read_labels, resolve_label_reading
from trainers.fewshot.parsers import parse_fewshot_output
from trainers.fewshot.prompts import get_style
from trainers.fewshot.runner import plan_prompts
from trainers.fewshot.shots import shot_budget
from trainers.models.model_loading import check_model_source, load_errors, load_failure

GROUP = "usb"
#: what an exported document carries that import needs
DOC_FIELDS = ("task", "instance_index", "instance", "item", "cue", "stops", "line_output")


def lm_eval_name(task_name: str) -> str:
    return f"{GROUP}_{task_name}"


def metric_hook(metric: str) -> str:
    return "agg_" + re.sub(r"\W", "_", metric)


def task_metrics(task) -> list[str]:
    return ["headline", *task.metric_names]


def documents(task, plans: Sequence[Any], instances: Sequence[dict], style) -> list[dict]:
    """One lm-eval document per planned prompt (refusing what lm-eval cannot express)."""
    if not plans:
        raise SumbenchError(f"{task.name}: no test items to export")
    docs = []
    for number, plan in enumerate(plans):
        if plan.lines is not None:
            raise SumbenchError(f"{task.name}: line tasks are cut into windows with an output "
                                f"room each; lm-eval gives a task one max_gen_toks, so it is "
                                f"not exported")
        if plan.overflow:
            raise SumbenchError(f"{task.name}: the prompt of item {plan.instance + 1} does not "
                                f"fit the model's context even cut; lm-eval would cut its "
                                f"start, so the task is not exported")
        item = plan.item
        docs.append({"doc_id": number, "task": task.name, "instance_index": plan.instance,
                     "instance": instances[plan.instance], "prompt": plan.prompt.text,
                     "stops": list(plan.prompt.stops), "cue": plan.prompt.cue,
                     "line_output": plan.prompt.line_output, "kept_lines": plan.kept_lines,
                     "shots": list(plan.shots), "max_new_tokens": plan.max_new_tokens,
                     "item": {"content": item.content, "output": item.output, "cue": item.cue,
                              "extra": item.extra},
                     "label_reading": bridge_label_reading(style, task)})
    return docs


def bridge_label_reading(style, task) -> str | None:
    """How a label task's answers are read under lm-eval: the release's phrase rules where the
    style reads Yes/No labels (lm-eval's generate_until keeps no label probabilities), else
    None (sumbench's general parsers)."""
    return "phrases" if resolve_label_reading(style, task, None) else None


def task_config(task, data_file: Path, docs: Sequence[dict]) -> str:
    """The task's lm-eval YAML (one output room for all its documents)."""
    rooms = {doc["max_new_tokens"] for doc in docs}
    stops = {tuple(doc["stops"]) for doc in docs}
    if len(rooms) != 1 or len(stops) != 1:
        raise SumbenchError(f"{task.name}: its prompts differ in output room or stop strings; "
                            f"lm-eval gives a task one of each, so it is not exported")
    metrics = "\n".join(f"  - metric: {metric}\n    aggregation: !function utils."
                        f"{metric_hook(metric)}\n    higher_is_better: true"
                        for metric in task_metrics(task))
    return (f"task: {lm_eval_name(task.name)}\n"
            f"dataset_path: json\n"
            f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data_file))}\n"
            f"test_split: test\n"
            f"output_type: generate_until\n"
            f"doc_to_text: !function utils.doc_to_text\n"
            f"doc_to_target: !function utils.doc_to_target\n"
            f"process_results: !function utils.process_results\n"
            f"num_fewshot: 0\n"
            f"generation_kwargs:\n  until: {json.dumps(list(next(iter(stops))))}\n"
            f"  do_sample: false\n  max_gen_toks: {next(iter(rooms))}\n"
            f"metric_list:\n{metrics}\n"
            f"metadata:\n  version: {json.dumps(str(task.version))}\n")


def utils_module(metrics: Iterable[str]) -> str:
    hooks = "".join(f"\n\ndef {metric_hook(m)}(items):\n    return aggregate({m!r}, items)\n"
                    for m in sorted(set(metrics)))
    return ('"""lm-eval hooks written by `sumbench export lm-eval`: they call sumbench\'s own '
            'parsers and\nmetrics (sumbench must be installed where lm-eval runs)."""\n'
            "from trainers.bridges.lm_eval_harness import (  # noqa: F401\n    aggregate,\n"
            "    doc_to_target,\n    doc_to_text,\n    process_results,\n)\n" + hooks)


# ---- the hooks lm-eval calls -------------------------------------------------------------
def doc_to_text(doc: Mapping) -> str:
    return doc["prompt"]


def doc_to_target(doc: Mapping) -> str:
    return doc["item"]["output"]


def parsed_prediction(doc: Mapping, output: str) -> tuple[Any, bool]:
    """sumbench's few-shot parser on one generated output (its label reading, when the
    document names one)."""
    if doc.get("label_reading"):
        labels = doc["item"].get("extra", {}).get("line_labels")
        read = read_labels(doc["label_reading"], output, None,
                           None if labels is None else len(labels))
        return read.values, read.ok
    item = FewShotParts(**doc["item"])
    return parse_fewshot_output(get_task(doc["task"]), output, item, cue=doc["cue"],
                                stops=doc["stops"], line_output=doc["line_output"])


def process_results(doc: Mapping, results: Sequence[str]) -> dict:
    """{metric: the document's parsed prediction} for every metric of its task."""
    prediction, ok = parsed_prediction(doc, results[0])
    item = {"task": doc["task"], "instance_index": doc["instance_index"],
            "instance": doc["instance"], "prediction": prediction, "ok": ok}
    return {metric: item for metric in task_metrics(get_task(doc["task"]))}


#: task -> (the items last scored, their scores): lm-eval aggregates each metric of a task
#: over the same items, which are scored once (holding them keeps their identities unique)
_LAST_SCORED: dict[str, tuple[tuple, dict]] = {}


def aggregate(metric: str, items: Sequence[Mapping]) -> float:
    """A task metric over every document of the task, as `sumbench score` computes it."""
    names = {item["task"] for item in items}
    if len(names) != 1:
        raise SumbenchError(f"items of several tasks in one aggregation: {sorted(names)}")
    value = task_scores(names.pop(), items)[metric]
    return float("nan") if value is None else float(value)


def task_scores(name: str, items: Sequence[Mapping]) -> dict:
    """`sumbench score`'s result for the task's items, computed once for the same items."""
    last = _LAST_SCORED.get(name)
    if last is not None and len(last[0]) == len(items) and \
            all(a is b for a, b in zip(last[0], items)):
        return last[1]
    task = get_task(name)
    scores = score_records({task.name: records_of(task, items)})[task.name]
    _LAST_SCORED[name] = (tuple(items), scores)
    return scores


def records_of(task, items: Sequence[Mapping]) -> list[dict]:
    """The official prediction records, in item order."""
    ordered = sorted(items, key=lambda item: item["instance_index"])
    return [task.prediction_record(item["instance"], item["prediction"]) for item in ordered]


# ---- lm-eval's samples back ----------------------------------------------------------------
def records_from_samples(paths: Sequence[str | Path]) -> dict[str, list[dict]]:
    """{task: official records} from lm-eval `--log_samples` files of exported USB tasks."""
    items: dict[tuple[str, int], tuple[dict, str]] = {}
    for path in paths:
        for line, sample in iter_jsonl(Path(path)):
            doc, responses = sample.get("doc"), sample.get("filtered_resps") or \
                sample.get("resps")
            if not isinstance(doc, dict) or not all(key in doc for key in DOC_FIELDS):
                raise DataError("not a sample of a task exported by sumbench (its doc needs "
                                f"{', '.join(DOC_FIELDS)})", path=str(path), line=line,
                                field="doc")
            output = _first_text(responses)
            if output is None:
                raise DataError("no generated text", path=str(path), line=line,
                                field="filtered_resps")
            key = (doc["task"], doc["instance_index"])
            if key in items and items[key][1] != output:
                raise DataError(f"a second, different answer for item "
                                f"{doc['instance_index'] + 1} of {doc['task']} (samples of "
                                f"two lm-eval runs?)", path=str(path), line=line)
            items[key] = (doc, output)
    rows: dict[str, list[dict]] = {}
    for (name, index), (doc, output) in items.items():
        rows.setdefault(name, []).append({"instance_index": index, "instance": doc["instance"],
                                          "prediction": parsed_prediction(doc, output)[0]})
    return {name: records_of(get_task(name), found) for name, found in rows.items()}


def _first_text(responses: Any) -> str | None:
    while isinstance(responses, list) and responses:
        responses = responses[0]
    return responses if isinstance(responses, str) else None


# ---- export ----------------------------------------------------------------------------------
def planning_backend(model: str, revision: str | None = None):
    """sumbench's causal backend for `model` with its tokenizer and config only (no weights):
    it counts tokens and knows the context, which is all that planning prompts needs."""
    from types import SimpleNamespace

    import transformers

    check_model_source(model)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model, revision=revision)
        config = transformers.AutoConfig.from_pretrained(model, revision=revision)
    except load_errors() as error:
        raise load_failure(model, error) from None
    backend = CausalLMBackend.__new__(CausalLMBackend)
    backend.tokenizer, backend.model = tokenizer, SimpleNamespace(config=config)
    return backend


def bos_model_arg(backend, prompt: str) -> str:
    """The lm-eval `model_args` entry under which lm-eval's HF model encodes prompts as
    sumbench does (the tokenizer's special tokens, less a trailing EOS)."""
    wanted = backend.encode(prompt)
    context = backend.context_window()
    length = f",max_length={context}" if context else ""    # lm-eval's own guess may differ
    if list(backend.tokenizer(prompt)["input_ids"]) == wanted:
        return "add_bos_token=True" + length
    if list(backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]) == wanted:
        return "add_bos_token=False" + length
    raise SumbenchError("lm-eval's HF model cannot encode prompts as sumbench does with this "
                        "tokenizer (it adds tokens other than a BOS and a trailing EOS)")


def export_tasks(out: str | Path, task_names: Sequence[str], *, data_dir: str | None,
                 model: str, style: str, variant: str = "all", split: str = "test",
                 seed: int = 0, n_shots: int | None = None,
                 max_prompt_tokens: int | None = None, max_new_tokens: int | None = None,
                 revision: str | None = None) -> dict:
    """Write the lm-eval task folder; returns {"exported": [...], "refused": {task: why},
    "model_args": ...}."""
    backend, chosen = planning_backend(model, revision), get_style(style)
    out = Path(out).resolve()
    written, refused, metrics, bos = {}, {}, set(), None
    for name in task_names:
        task = get_task(name)
        test = task.instances(task.load(split, variant, data_dir))
        train = task.instances(task.load("train", variant, data_dir))
        plans, _ = plan_prompts(task, test, train, backend, chosen,
                                shot_budget(task.name, n_shots), seed=seed,
                                max_prompt_tokens=max_prompt_tokens,
                                max_new_tokens=max_new_tokens)
        try:
            docs = documents(task, plans, test, chosen)
            config = task_config(task, out / "data" / f"{task.name}.jsonl", docs)
        except SumbenchError as error:
            refused[task.name] = str(error)
            continue
        bos = bos or bos_model_arg(backend, docs[0]["prompt"])
        written[task.name] = (docs, config)
        metrics.update(task_metrics(task))
    if not written:
        raise SumbenchError("no task can be exported: " + "; ".join(refused.values()))
    with atomic_directory(out) as staging:
        for name, (docs, config) in written.items():
            write_jsonl(staging / "data" / f"{name}.jsonl", docs)
            (staging / f"{lm_eval_name(name)}.yaml").write_text(config, encoding="utf-8")
        (staging / f"{GROUP}.yaml").write_text(
            f"group: {GROUP}\ntask:\n" + "".join(f"  - {lm_eval_name(n)}\n" for n in written),
            encoding="utf-8")
        (staging / "utils.py").write_text(utils_module(metrics), encoding="utf-8")
        summary = {"exported": list(written), "refused": refused,
                   "model_args": f"pretrained={model},{bos}", "style": chosen.name,
                   "seed": seed, "n_shots": n_shots, "model": model}
        (staging / "README.md").write_text(readme(summary, out), encoding="utf-8")
        (staging / "export.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


def readme(summary: Mapping, out: Path) -> str:
    refused = "".join(f"- `{name}`: {why}\n" for name, why in summary["refused"].items())
    return (f"# USB for lm-evaluation-harness (written by `sumbench export lm-eval`)\n\n"
            f"Prompts planned by sumbench for `{summary['model']}` (style "
            f"`{summary['style']}`, shot seed {summary['seed']}): each document is one prompt "
            f"of `sumbench run --mode fewshot --fewshot-backend hf-causal`, shots included, "
            f"so lm-eval runs them zero-shot. Scores come from sumbench's own parsers and "
            f"metrics (`utils.py`), so sumbench must be installed.\n\n"
            f"```bash\nlm_eval --model hf --model_args {summary['model_args']} \\\n"
            f"    --include_path {out} --tasks {GROUP} --batch_size 1 --log_samples "
            f"--output_path OUT\nsumbench import lm-eval OUT/*/samples_*.jsonl --out preds\n"
            f"```\n\n`{summary['model_args'].split(',', 1)[1]}` makes lm-eval encode prompts "
            f"as sumbench does with this tokenizer and give them the model's context. Label "
            f"tasks are scored from the generated Yes/No (lm-eval's generate_until keeps no "
            f"label probabilities), by the release's phrase rules for the paper's Llama and "
            f"Vicuna styles (`sumbench run --label-reading phrases` reads them the same way)."
            f"\n\n"
            + (f"## Not exported\n\n{refused}" if refused else ""))
