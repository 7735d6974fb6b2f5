"""`sumbench units sgus`: the SCU-approximation study's LLM units of references.

    sumbench units sgus --references FILE --one-shot SGU_FILE --model NAME
                        [--fewshot-backend openai|hf-causal|hf-seq2seq] [--base-url URL]
                        [--openai-api chat|completions] [--max-concurrency N] [--cache FILE]
                        [--max-new-tokens N] [--device D] [--clean] --out FILE [--json-out FILE]

The paper's prompt exactly (tasks.units.sgu_prompt): its system instruction, the one-shot
pair stored under `samples_used` of a released SGU file (`--one-shot`), the preprocessed
reference; temperature 0 and no other setting on an OpenAI-compatible chat endpoint (the
default backend, `--base-url` for vLLM or another server). The reply is read as the official
code reads it; `--clean` (an extension) strips units, splits bullet lists and drops empty
ones. `--out` writes one line per reference, units TAB-separated (a line break or TAB inside
a unit becomes a space, an empty unit is left out: the TAB form cannot hold them); `--json-out`
the paper's SGU file, units as made, with each reference's reply and status (ok, empty, not a
split, failed). Requests are tried a bounded number of times; a reference whose request
fails is recorded as failed and gets no units.
"""
from __future__ import annotations

import datetime
import sys

from benchmark.commands.options import add_option
from leaderboard.evaluators.units.sgus import chat_sgus, model_sgus
from tasks.plumbing.io import read_lines, write_json
from tasks.plumbing.provenance import provenance
from tasks.units.sgu_prompt import read_one_shot
from tasks.units.unit_files import write_unit_rows
from trainers.fewshot.backends import load_hf_backend
from trainers.fewshot.chat_client import ChatClient


def add_sgus_parser(commands) -> None:
    parser = commands.add_parser("sgus", help="LLM units of references with the paper's "
                                 "one-shot prompt", description=__doc__.split("\n\n")[2])
    add_option(parser, "references", required=True)
    parser.add_argument("--one-shot", required=True, metavar="FILE",
                        help="a released SGU file (its samples_used) or {prompt, completion}")
    add_option(parser, "model", required=True)
    add_option(parser, "fewshot_backend")
    add_option(parser, "base_url")
    add_option(parser, "openai_api")
    add_option(parser, "max_concurrency")
    add_option(parser, "cache")
    add_option(parser, "max_new_tokens")
    add_option(parser, "device")
    parser.add_argument("--clean", action="store_true",
                        help="an extension: strip units, split bullet lists, drop empty ones")
    add_option(parser, "out_file", required=True)
    add_option(parser, "json_out")
    parser.set_defaults(handler=run_sgus, out_inputs={"references": "--references file",
                                                      "one_shot": "--one-shot file"})


def run_sgus(args) -> int:
    references = [line.strip() for line in read_lines(args.references, what="references")]
    shot = read_one_shot(args.one_shot)
    backend = args.fewshot_backend or "openai"
    if backend == "openai":
        from tqdm import tqdm

        client = ChatClient(model=args.model, base_url=args.base_url, cache=args.cache,
                            endpoint=args.openai_api)
        with tqdm(total=len(references), desc="SGUs", unit="reference", file=sys.stderr,
                  disable=None) as bar:
            records = chat_sgus(client, references, shot, workers=args.max_concurrency,
                                clean=args.clean, progress=bar)
        where = {"base_url": client.base_url, "endpoint": args.openai_api}
    else:
        model = load_hf_backend(args.model, model_type=backend.removeprefix("hf-"),
                                cache=args.cache, device=args.device or "auto")
        records = model_sgus(model, references, shot, max_new_tokens=args.max_new_tokens or 512,
                             clean=args.clean)
        where = {"backend": model.fingerprint()}
    write_unit_rows(args.out, [record.units for record in records])
    statuses = [record.status for record in records]
    if args.json_out:
        write_json(args.json_out, {
            "generation_date": datetime.date.today().strftime("%d-%m-%Y"), "temperature": 0,
            "nr_samples": 1, "model": args.model, "samples_used": [
                {"prompt": shot.prompt, "completion": shot.completion}],
            "data": [{"summary": reference, "instance_id": str(index), "sgus": list(r.units),
                      "sample_nr": index, **{k: v for k, v in r.to_dict().items()
                                             if k != "sgus"}}
                     for index, (reference, r) in enumerate(zip(references, records))],
            "config": {"model": args.model, "fewshot_backend": backend, "clean": args.clean,
                       **where}, "provenance": provenance()})
    counts = {status: statuses.count(status) for status in dict.fromkeys(statuses)}
    print(f"sgus: {sum(len(r.units) for r in records)} units for {len(records)} references "
          f"({', '.join(f'{n} {s}' for s, n in counts.items())}) -> {args.out}")
    failed = [str(i + 1) for i, status in enumerate(statuses) if status == "failed"]
    if failed:
        print(f"sumbench units sgus: the requests of references {', '.join(failed[:10])} "
              f"failed (recorded in --json-out); rerun with --cache to retry only them",
              file=sys.stderr)
    return 1 if failed else 0
