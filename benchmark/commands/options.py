"""Every option that more than one command takes, defined once: its flag, type, default,
choices and help (`add_option(parser, KIND)`). A flag has one meaning everywhere; where one
flag takes two forms (`--out DIR` or `--out FILE`, one `--pyramid` or several), each form is
a kind of its own. A spelling that was renamed stays one release as an alias that warns.
tests/benchmark/test_options.py walks every command's parser and fails when an option that
more than one command takes is not declared from here.

Defaults that depend on the command (the tasks `experiment labels` compares, the demo's
batch size) are None here, "not given": the command fills them in and its help says so.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

from benchmark.commands import (
    device_name,
    key_value,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
    resample_count,
    tokens_or_auto,
)
from benchmark.results import EARLY_STOPPING, FEWSHOT_BACKENDS, OPENAI_APIS
from leaderboard.evaluators.pyramid.presence import NLI_MODES
from leaderboard.evaluators.pyramid.scoring import backend_names
from tasks.plumbing.errors import SumbenchError
from tasks.qapyramid.units import QA_UNIT_KINDS
from trainers.fewshot.prompts import OFFICIAL_GPT35_STYLE, style_names
from trainers.finetuning.distributed import check_training_device_name

ROUGE_AGGREGATES = ("mean", "bootstrap-mid")
LABEL_RULES = ("official", "positional")
EXECUTORS = ("local", "slurm")
HEURISTIC_EVIDENCE = ("rougeL", "entity", "superpal")
CORRUPTIONS = ("factcc", "infill")
#: the tasks whose training labels are made heuristically (`data heuristic`, `experiment
#: labels`: their --tasks when not given)
HEURISTIC_TASKS = ("evidence_extraction", "factuality_classification", "fixing_factuality")
DEFAULT_PROFILE = "flan-t5-large"
PRESENCE_BACKENDS = tuple(backend_names())


def prompt_style(text: str) -> str:
    """An argparse type: a prompt style of trainers.fewshot.prompts (or the official GPT-3.5
    one)."""
    known = [*style_names(), OFFICIAL_GPT35_STYLE]
    if text not in known:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(known)}, got {text!r}")
    return text


def split_name(text: str) -> str:
    """An argparse type: a split name, one plain file-name word (each task checks it has it)."""
    if not text or text.startswith(".") or any(mark in text for mark in ("/", "\\", "\0")):
        raise argparse.ArgumentTypeError(f"expected a split name such as test, got {text!r}")
    return text


@dataclass(frozen=True)
class Option:
    """One option as every command that takes it declares it."""
    flags: tuple[str, ...]
    help: str
    dest: str | None = None
    type: Any = None
    default: Any = None
    choices: tuple | None = None
    nargs: str | None = None
    action: Any = None
    metavar: str | None = None
    #: old spellings: accepted one more release, with a warning
    renamed_from: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)

    def keywords(self) -> dict[str, Any]:
        """What `add_argument` takes (None left out)."""
        given = {"dest": self.dest, "type": self.type, "default": self.default,
                 "choices": self.choices, "nargs": self.nargs, "action": self.action,
                 "metavar": self.metavar, "help": self.help, **self.extra}
        if self.action in ("store_true", argparse.BooleanOptionalAction):
            given.pop("type"), given.pop("choices"), given.pop("nargs"), given.pop("metavar")
        return {key: value for key, value in given.items() if value is not None}


def _option(*flags: str, help: str, **keywords) -> Option:  # noqa: A002 - argparse's name
    return Option(flags=flags, help=help, **keywords)


#: kind -> the option; a kind is the option's name unless one flag takes two forms
SHARED: dict[str, Option] = {
    # ---- what to run on -----------------------------------------------------------------
    "tasks": _option("--tasks", nargs="+", metavar="TASK",
                     help="task names or aliases, space- or comma-separated (FAC EXT or "
                          "FAC,EXT), or 'all'"),
    "data": _option("--data", metavar="DIR", renamed_from=("--data-dir",),
                    help="task datasets: a folder of <variant>/<task>/<split>.jsonl "
                         "(`sumbench data build` or `data fetch` output)"),
    "raw": _option("--raw", metavar="DIR",
                   help="raw USB folder (annotations/ and splits/)"),
    "pyramid": _option("--pyramid", metavar="DIR",
                       help="a Pyramid data folder (REALSumm layout: ids.txt, "
                            "references.txt, summaries, units, labels)"),
    "pyramids": _option("--pyramid", metavar="DIR", action="append", dest="pyramids",
                        help="a Pyramid data folder (REALSumm layout); repeatable"),
    "variant": _option("--variant", metavar="V",
                       help="data variant: a USB domain or 'all' (default all)"),
    "variants": _option("--variants", metavar="V", nargs="+", action="extend",
                        renamed_from=("--variant",),
                        help="data variants, several (default: all there are)"),
    "split": _option("--split", type=split_name, metavar="SPLIT",
                     help="data split: train, validation or test (a plug-in task may name "
                          "others; default test)"),
    "seed": _option("--seed", type=non_negative_int, metavar="S",
                    help="seed of every random choice (default 0)"),
    "out_dir": _option("--out", metavar="DIR", help="output folder"),
    "out_file": _option("--out", metavar="FILE", help="output file"),
    "plugins": _option("--plugins", action="append", metavar="MODULE_OR_PATH",
                       help="load tasks from a .py file, a package folder or a module "
                            "(repeatable; also $SUMBENCH_PLUGINS)"),
    "resume": _option("--resume", action="store_true",
                      help="continue the work in --out where it stopped"),
    # ---- models --------------------------------------------------------------------------
    "model": _option("--model", help="the model: a hub id or a local folder (an adapter "
                                     "folder too; chat backends: the served model's name; "
                                     "nli presence: shiyue/roberta-large-tac08 by default, as "
                                     "Lite²Pyramid)"),
    "revision": _option("--revision", help="hub revision to download (branch, tag or commit; "
                                           "default main)"),
    "profile": _option("--profile", help=f"hyperparameter profile: {DEFAULT_PROFILE} "
                                         f"(default), flan-t5-xl, t5-large or tiny, or the "
                                         f"encoder profile roberta-large (one fine-tuned "
                                         f"RoBERTa per task; predict: from such models)"),
    "device": _option("--device", type=device_name,
                      help="where models run: auto (default: the GPU when torch sees one), "
                           "cpu, cuda, cuda:N, mps or xpu"),
    "lora": _option("--lora", action=argparse.BooleanOptionalAction,
                    help="train a LoRA adapter (--no-lora: all weights; default: the "
                         "profile's)"),
    "spec": _option("--spec", metavar="FILE", help="a JSON file of spec fields to apply"),
    "print_spec": _option("--print-spec", action="store_true",
                          help="print the resolved spec as JSON and exit"),
    "set_spec": _option("--set", dest="overrides", action="append", default=[],
                        type=key_value, metavar="FIELD=VALUE",
                        help="any fine-tuning spec field, e.g. --set lora_r=8"),
    "set_setting": _option("--set", dest="settings", action="append", default=[],
                           type=key_value, metavar="KEY=VALUE",
                           help="an instance setting (see docs/leaderboard.md)"),
    "early_stopping": _option("--early-stopping", choices=EARLY_STOPPING, default="metric",
                              help="validation signal for early stopping and best-model "
                                   "selection: the tasks' headline metric (default), minus "
                                   "the loss, or none"),
    "tokens_per_microbatch": _option(
        "--tokens-per-microbatch", type=tokens_or_auto, metavar="N|auto",
        help="cut each optimizer step into micro-batches of at most N padded tokens, or auto: "
             "the largest that fits the GPU (a short probe; on a CPU, per_device_batch_size); "
             "the step's examples never change (default: the profile's)"),
    "compile": _option("--compile", action=argparse.BooleanOptionalAction,
                       help="torch.compile the model for training (default: the profile's, "
                            "off)"),
    "max_steps": _option("--max-steps", type=positive_int, metavar="N",
                         help="optimizer steps (default: the profile's)"),
    # ---- budgets and batches -------------------------------------------------------------
    "batch_size": _option("--batch-size", type=positive_int, metavar="N",
                          help="examples per model batch (never changes results; default: "
                               "the profile's or the backend's)"),
    "max_input_tokens": _option("--max-input-tokens", type=positive_int, metavar="N",
                                help="input budget in tokens (default: the profile's)"),
    "max_new_tokens": _option("--max-new-tokens", type=positive_int, metavar="N",
                              help="output budget in tokens (default: the profile's or the "
                                   "task's)"),
    "max_prompt_tokens": _option("--max-prompt-tokens", type=positive_int, metavar="N",
                                 help="prompt limit in tokens (default: none of its own; "
                                      "Hugging Face models always keep prompt + output "
                                      "within their context)"),
    "num_beams": _option("--num-beams", type=positive_int, metavar="N",
                         help="beams for text and span tasks (default 4, as the release; "
                              "labels are always greedy)"),
    "label_rule": _option("--label-rule", choices=LABEL_RULES,
                          help="which generated steps give Yes/No probabilities (default "
                               "official: the release's rule, every generated Yes/No token)"),
    "n_shots": _option("--n-shots", type=non_negative_int, metavar="N",
                       help="shots per item, 0 for zero-shot (default: the paper's)"),
    "style": _option("--style", type=prompt_style, metavar="STYLE",
                     help=f"prompt style: {', '.join([*style_names(), OFFICIAL_GPT35_STYLE])} "
                          "(default: the backend's; llama for hf-causal and lm-eval)"),
    "label_reading": _option("--label-reading", choices=("probabilities", "phrases"),
                             help="few-shot FAC, EXT and EVEXT answers of the llama and vicuna "
                                  "styles: probabilities (their default: P(Yes) / (P(Yes) + "
                                  "P(No)) at each generated Yes/No token of the answer's "
                                  "first line) or phrases (the release's GPT-3.5 phrase "
                                  "rules)"),
    "fewshot_backend": _option("--fewshot-backend", choices=FEWSHOT_BACKENDS,
                               help="the model behind --model: hf-causal, hf-seq2seq (a hub "
                                    "id or folder) or openai (an OpenAI-compatible server)"),
    "openai_api": _option("--openai-api", choices=OPENAI_APIS, default="chat",
                          help="openai backend: chat completions (default) or completions"),
    "max_concurrency": _option("--max-concurrency", type=positive_int, default=1,
                               metavar="N", help="openai backend: requests at once (default 1)"),
    "base_url": _option("--base-url", metavar="URL",
                        help="an OpenAI-compatible server, e.g. vLLM's http://host:8000/v1 "
                             "(default $OPENAI_BASE_URL)"),
    # ---- scores --------------------------------------------------------------------------
    "bootstrap": _option("--bootstrap", type=resample_count, default=0, metavar="N",
                         help="bootstrap resamples for 95%% intervals (default 0)"),
    "rouge_aggregate": _option("--rouge-aggregate", choices=ROUGE_AGGREGATES, default="mean",
                               help="ROUGE over examples: plain mean (default, deterministic) "
                                    "or the median of 1,000 bootstrap means that USB's "
                                    "evaluation script reports (unseeded there, seeded with "
                                    "--seed here)"),
    "workers": _option("--workers", type=positive_int, metavar="N",
                       help="processes working in parallel (default: as many as help, at "
                            "most 8; leaderboard serve: its scoring workers, 1 by default, a "
                            "thread of the server; evaluations have one of their own)"),
    "markdown": _option("--markdown", action="store_true",
                        help="print Markdown (for the docs) instead of text"),
    # ---- Pyramid-style evaluation --------------------------------------------------------
    "systems": _option("--systems", nargs="+", metavar="SYSTEM",
                       help="only these systems (default: all)"),
    "dataset": _option("--dataset", metavar="FILE",
                       help="QAPyramid dataset file (JSON or JSONL)"),
    "judgments": _option("--judgments", metavar="FILE",
                         help="QAPyramid's crowd judgments (QA_presence.json)"),
    "ties": _option("--ties", choices=("absent", "present"), default="absent",
                    help="a QA with as many 1 votes as 0 votes: not present (default) or "
                         "present (the release has no rule for ties)"),
    "references": _option("--references", metavar="FILE",
                          help="the reference summaries (the format the command's "
                               "description names)"),
    "coref": _option("--coref", metavar="FILE",
                     help="coreference outputs, one JSON object per reference ({text, "
                          "document, clusters})"),
    "json_out": _option("--json-out", metavar="FILE",
                        help="also the paper's JSON: [{instance_id, summary, <kind>: [...]}]"),
    "scus": _option("--scus", metavar="FILE",
                    help="SCUs, one line per reference, TAB-separated (stus: write the "
                         "Lite²·⁵ mix instead of STUs; units easiness: the units' target)"),
    "units_file": _option("--units-file", metavar="FILE",
                          help="units per example, TAB-separated, aligned with the examples "
                               "(units easiness: or the SCU-approximation paper's JSON)"),
    "summaries": _option("--summaries", metavar="FILE",
                         help="the summaries, JSON Lines (the fields the command's description "
                              "names)"),
    "spacy_pipeline": _option("--spacy-pipeline", metavar="NAME",
                              help="a spaCy pipeline by package or folder (default: "
                                   "en_core_web_sm; stus: its VERB and AUX words, questeval: "
                                   "its entities and noun chunks)"),
    "alpha": _option("--alpha", type=positive_float,
                     help="nQAPyramid's length-penalty alpha (default 6)"),
    "use": _option("--use", choices=("label", "probability"), default="label",
                   help="count the units labelled present (default) or sum their "
                        "probabilities"),
    "unit_kind": _option("--unit-kind", choices=QA_UNIT_KINDS, default="qa",  # qa, statement
                         help="QA units as question-answer pairs (default) or statements"),
    "prompt_style": _option("--prompt-style", choices=("task", "qapyramid-gpt4o"),
                            default="task",
                            help="chat: the presence task's prompt (default) or QAPyramid's "
                                 "released GPT-4o prompt and parser ([YES]/[NO])"),
    "normalize": _option("--normalize", action="store_true",
                         help="also nQAPyramid (length-normalised)"),
    "predicate_model": _option("--predicate-model", metavar="MODEL",
                               help="a predicate detector (folder or hub id)"),
    "threshold": _option("--threshold", type=probability, metavar="T",
                         help="present iff the backend's value >= T (lexical: content-token "
                              "recall, by default calibrated on the train split)"),
    "cache": _option("--cache", metavar="FILE",
                     help="model and chat backends: a cache of their outputs on disk"),
    "presence": _option("--presence", choices=PRESENCE_BACKENDS,
                        help="who decides unit presence (human: the SCU labels, Pyramid "
                             "sets only)"),
    "nli_mode": _option("--nli-mode", choices=NLI_MODES,
                        help="nli: entailment probability (prob2, default; prob3) or label"),
    "entailment_label": _option("--entailment-label", metavar="NAME",
                                help="nli: the class name (in the model's id2label, any case) "
                                     "that means entailment (default: entailment)"),
    "base_model": _option("--alignscore-base", metavar="MODEL", dest="base_model",
                          help="alignscore: the checkpoint's base model, a folder or hub id "
                               "(config and tokenizer; default: the one the checkpoint names, "
                               "e.g. roberta-large)"),
    "claim_sentences": _option("--claim-sentences", choices=("split", "whole"),
                               help="alignscore: score each sentence of a unit and average "
                                    "(split, default: the official code, which splits a "
                                    "'question? answer' QA in two) or the unit as one claim "
                                    "(whole)"),
    "nli_max_length": _option("--nli-max-length", type=positive_int, metavar="N",
                              help="nli: tokens of a (summary, unit) pair (default 400, as "
                                   "Lite²Pyramid); minicheck: the model maximum (default 512 "
                                   "RoBERTa, 2048 DeBERTa-v3 and Flan-T5)"),
    # ---- heuristic labels ----------------------------------------------------------------
    "evidence": _option("--evidence", metavar="METHODS",
                        help="heuristic evidence: rougeL, entity or superpal (comma-separated "
                             "where a command compares several)"),
    "corruption": _option("--corruption", metavar="METHODS",
                          help="heuristic corruption: factcc or infill (comma-separated where "
                               "a command compares several)"),
    "superpal_model": _option("--superpal-model", metavar="MODEL",
                              help="alignment classifier for --evidence superpal (hub id or "
                                   "folder)"),
    "infill_model": _option("--infill-model", metavar="MODEL",
                            help="seq2seq infilling model for --corruption infill (hub id or "
                                 "folder)"),
    # ---- the leaderboard -----------------------------------------------------------------
    "db": _option("--db", metavar="URL", default="leaderboard.sqlite",
                  help="the database: a SQLite file or a SQLAlchemy URL (default "
                       "leaderboard.sqlite)"),
    "model_root": _option("--model-root", metavar="DIR",
                          help="the folder models to evaluate are found in (none: no local "
                               "models)"),
    "server": _option("--server", metavar="URL", help="leaderboard URL"),
    "token": _option("--token", help="API token (default $SUMBENCH_LEADERBOARD_TOKEN)"),
    "track": _option("--track", help="usb (default), summaries or evaluators"),
    # ---- experiments -----------------------------------------------------------------------
    "plan": _option("--plan", action="store_true",
                    help="write OUT/plan.jsonl and the data, run nothing"),
    "executor": _option("--executor", choices=EXECUTORS, default="local",
                        help="run the jobs here, one after the other (local), or submit them "
                             "as Slurm arrays (slurm)"),
    "submit": _option("--submit", metavar="URL", help="submit every cell to a leaderboard"),
    "slurm_partition": _option("--slurm-partition", metavar="P", help="Slurm partition"),
    "slurm_gres": _option("--slurm-gres", metavar="G", help="generic resources, e.g. gpu:1"),
    "slurm_time": _option("--slurm-time", metavar="T",
                          help="time limit per job, e.g. 04:00:00"),
    "slurm_mem": _option("--slurm-mem", metavar="M", help="memory per job, e.g. 32G"),
    "slurm_extra": _option("--slurm-extra", metavar="ARGS", default="",
                           help="more sbatch options, e.g. '--account=nlp --qos=high'"),
    "wait": _option("--wait", action="store_true",
                    help="wait until the work is done (the submission scored, the jobs "
                         "finished)"),
}


#: what a shared option left out means (its help says so); `given_or_default` reads it
EFFECTIVE_DEFAULTS = {"variant": "all", "split": "test", "seed": 0, "profile": DEFAULT_PROFILE,
                      "device": "auto", "track": "usb"}


def given_or_default(args: argparse.Namespace, kind: str) -> Any:
    """The option's value, or what leaving it out means (`EFFECTIVE_DEFAULTS`)."""
    option = SHARED[kind]
    value = getattr(args, option.dest or option.flags[0].lstrip("-").replace("-", "_"))
    return EFFECTIVE_DEFAULTS[kind] if value is None else value


def training_device(args: argparse.Namespace) -> str:
    """--device of a command that trains: refused (naming the option) when training cannot
    use it (mps, xpu; cuda:N across processes), before anything loads."""
    device = given_or_default(args, "device")
    try:
        check_training_device_name(device)
    except SumbenchError as error:
        raise SumbenchError(f"--device: {error}") from None
    return device


class RenamedOption(argparse.Action):
    """An old spelling: warns on stderr, then acts as the new one."""

    def __init__(self, option_strings, dest, new: str, parse=None, extend: bool = False,
                 **keywords):
        self.new, self.parse, self.extend = new, parse, extend
        super().__init__(option_strings, dest, **keywords)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"sumbench: {option_string} is renamed {self.new}: the old spelling goes in "
              f"the next release", file=sys.stderr)
        if self.parse is not None:
            values = self.parse(values)
        if self.extend:
            values = [*(getattr(namespace, self.dest, None) or []), *values]
        setattr(namespace, self.dest, values)


def add_option(parser, kind: str, *, required: bool = False, renamed_from: tuple = (),
               **keywords) -> argparse.Action:
    """Add the shared option `kind` to a parser or group (`required` where the command needs
    it); its old spellings too (and the command's own `renamed_from`), hidden. `keywords` may
    only say what `SHARED` leaves open (none of type, default, choices, help, nargs, action:
    those are the option's)."""
    option = SHARED[kind]
    owned = {"type", "default", "choices", "help", "nargs", "action"} & set(keywords)
    if owned:
        raise ValueError(f"{kind}: {', '.join(sorted(owned))} are the shared option's own")
    old_flags = option.renamed_from + tuple(renamed_from)
    if required and old_flags:  # either spelling meets the requirement
        parser = parser.add_mutually_exclusive_group(required=True)
    elif required:
        keywords["required"] = True
    action = parser.add_argument(*option.flags, **option.keywords(), **keywords)
    for old in old_flags:
        parser.add_argument(old, dest=action.dest, action=RenamedOption, new=option.flags[0],
                            parse=option.type if option.nargs is None else None,
                            extend=option.action == "extend", nargs=option.nargs,
                            help=argparse.SUPPRESS)
    return action


def add_options(parser, *kinds: str) -> None:
    """`add_option` for each kind, in order (none required)."""
    for kind in kinds:
        add_option(parser, kind)


def shared_kinds(flag: str) -> list[str]:
    """The kinds of `SHARED` a flag belongs to."""
    return [kind for kind, option in SHARED.items() if flag in option.flags]
