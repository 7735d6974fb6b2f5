"""G-Eval as a registered evaluator (tasks.metrics.evaluators.Evaluator): `geval`, for
`sumbench meta-eval --metric geval [--metric-option KEY=VALUE ...]`, a board column
(`NAME=evaluator:geval[,KEY=VALUE]`) and Python.

The protocol is nlpyang/geval's (6f84404): the prompt file, its placeholders filled in
(prompts.py), is sent as ONE system message to an OpenAI-compatible chat endpoint with
`n=20, temperature=2, max_tokens=5, top_p=1, frequency_penalty=0, presence_penalty=0`
(`gpt4_eval.py:31-41`; its `stop=None` is the API's default and is not sent); each of the n
samples is parsed by the official pattern, unparsable ones counting 0, and the score is their
mean (scoring.py). `mode=logprobs` scores the probability-weighted sum instead, from the
servers' token log-probabilities (scoring.py says which tokens count); it defaults to n=1 at
temperature 0 and asks for `top_logprobs` alternatives.

Requests go through trainers.fewshot.chat_client.ChatClient (its retries: `max_attempts`
tries with exponential backoff on 429/5xx/connection errors; base URL from `base_url` or
OPENAI_BASE_URL; the API key from the environment variable `api_key_env`, never recorded).
With `cache=FILE` every response is kept in a DiskCache under the client's request key, so a
rerun sends nothing; the evaluator, not the client, stores them, since the client keeps no
response whose first sample is empty and G-Eval counts such a sample 0. `max_concurrency`
requests run at once. A prompt reading `{{Reference}}` is sent once per reference and the
scores are combined by `references` (mean or max).

The default prompt is G-Eval's SummEval relevance prompt (prompts/rel_detailed.txt), not
QAPyramid's: QAPyramid's adapted prompt is not public, so its GEval numbers cannot be
reproduced; the settings' `reported_as` names what was run ("GEval-style, prompt: ...").
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from leaderboard.evaluators.geval.prompts import DEFAULT_PROMPT, GEvalPrompt, load_prompt
from leaderboard.evaluators.geval.scoring import logprob_score, parse_scale, sample_score
from tasks.metrics.evaluator_base import one_of, option_values, positive_int
from tasks.metrics.evaluators import EVALUATORS, Evaluator, register_evaluator
from tasks.plumbing.errors import SumbenchError
from trainers.fewshot.chat_client import DEFAULT_BASE_URL, ChatClient, ChatError
from trainers.models.disk_cache import open_cache

NAME = "geval"
DEFAULT_MODEL = "gpt-4-0613"          # gpt4_eval.py:14
IMPLEMENTATION = ("nlpyang/geval 6f84404: gpt4_eval.py's request, meta_eval_summeval.py's "
                  "parsing and mean")
#: per mode: (n, temperature) when not given
MODE_DEFAULTS = {"sample": (20, 2.0), "logprobs": (1, 0.0)}


def _temperature(text: str) -> float:
    value = float(str(text).strip())
    if not 0 <= value <= 2:
        raise ValueError("expected a number from 0 to 2")
    return value


#: option -> (parser of its text, default); n and temperature default by mode (MODE_DEFAULTS)
OPTIONS: dict[str, tuple[Callable[[str], Any], Any]] = {
    "prompt": (str, str(DEFAULT_PROMPT)), "model": (str, DEFAULT_MODEL),
    "mode": (one_of("sample", "logprobs"), "sample"), "n": (positive_int, None),
    "temperature": (_temperature, None), "max_tokens": (positive_int, 5),
    "top_logprobs": (positive_int, 20), "scale": (parse_scale, (1, 2, 3, 4, 5)),
    "references": (one_of("mean", "max"), "mean"), "base_url": (str, None),
    "api_key_env": (str, "OPENAI_API_KEY"), "cache": (str, None),
    "max_concurrency": (positive_int, 1), "max_attempts": (positive_int, 5),
}


def parse_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option's value, `options` (text or already parsed) over the defaults; an
    unknown option or a bad value is a one-line SumbenchError."""
    values = option_values(options, OPTIONS, NAME)
    n, temperature = MODE_DEFAULTS[values["mode"]]
    values["n"] = n if values["n"] is None else values["n"]
    values["temperature"] = temperature if values["temperature"] is None \
        else values["temperature"]
    return values


def request_params(values: Mapping[str, Any]) -> dict:
    """The request's sampling parameters (gpt4_eval.py:33-41), log-probabilities asked for
    in mode=logprobs."""
    params = {"temperature": values["temperature"], "max_tokens": values["max_tokens"],
              "top_p": 1, "frequency_penalty": 0, "presence_penalty": 0, "n": values["n"]}
    if values["mode"] == "logprobs":
        params.update(logprobs=True, top_logprobs=values["top_logprobs"])
    return params


def base_url_of(values: Mapping[str, Any]) -> str:
    return (values["base_url"] or os.environ.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL).rstrip("/")


class GEvalEvaluator(Evaluator):
    """G-Eval's score of each summary (see the module); `sleep` replaces the retries' waits
    (tests)."""

    name = NAME
    option_names = tuple(OPTIONS)

    def __init__(self, options: Mapping[str, Any] | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.values = parse_options(options or {})
        self.prompt: GEvalPrompt = load_prompt(self.values["prompt"])
        self.reads_sources = self.prompt.reads_sources
        self.reads_references = self.prompt.reads_references
        self.sleep = sleep
        self.last: dict | None = None  # the latest call's requests, tokens and seconds

    def with_options(self, options: Mapping[str, Any]) -> GEvalEvaluator:
        return GEvalEvaluator({**self.values, **options}, sleep=self.sleep)

    @property
    def settings(self) -> dict:
        values, prompt = self.values, self.prompt
        scale = values["scale"]
        return {
            "evaluator": NAME, "implementation": IMPLEMENTATION,
            "reported_as": f"GEval-style, prompt: {Path(prompt.path).name} "
                           f"(sha256 {prompt.sha256[:12]})",
            "prompt": prompt.path, "prompt_sha256": prompt.sha256,
            "placeholders": sorted(prompt.placeholders), "model": values["model"],
            "mode": values["mode"], "n": values["n"], "temperature": values["temperature"],
            "top_p": 1, "max_tokens": values["max_tokens"],
            **({"top_logprobs": values["top_logprobs"], "scale": f"{scale[0]}-{scale[-1]}"}
               if values["mode"] == "logprobs" else {}),
            **({"references": values["references"]} if self.reads_references else {}),
            "base_url": base_url_of(values), "api_key_env": values["api_key_env"],
            "cache": values["cache"], "max_concurrency": values["max_concurrency"],
            "max_attempts": values["max_attempts"]}

    def problem(self) -> str | None:
        if base_url_of(self.values) == DEFAULT_BASE_URL and \
                not os.environ.get(self.values["api_key_env"]):
            return (f"{NAME} calls {DEFAULT_BASE_URL}, which needs an API key in "
                    f"${self.values['api_key_env']} (or set base_url= to another server)")
        return None

    def cost(self) -> dict | None:
        return None if self.last is None else dict(self.last)

    def score(self, summaries: Sequence[str], references: Sequence[Sequence[str]],
              sources: Sequence[str] | None) -> list[float]:
        jobs = self._jobs(summaries, references, sources)
        started = time.perf_counter()
        responses = self._responses([messages for _, messages in jobs], started)
        per_summary: list[list[float]] = [[] for _ in summaries]
        for (index, _), response in zip(jobs, responses):
            per_summary[index].append(self.response_score(response))
        combine = max if self.values["references"] == "max" else \
            (lambda values: sum(values) / len(values))
        return [combine(values) for values in per_summary]

    def response_score(self, response: Any) -> float:
        """One response's score: the mean of its samples, or of their expected scores."""
        if self.values["mode"] == "logprobs":
            return logprob_score(response, self.values["scale"])
        return sample_score(response)

    def _jobs(self, summaries: Sequence[str], references: Sequence[Sequence[str]],
              sources: Sequence[str] | None) -> list[tuple[int, list[dict]]]:
        """(summary index, messages) of each request: one per summary, or one per reference
        of it when the prompt reads `{{Reference}}`."""
        count = len(summaries)
        if self.reads_sources and (sources is None or len(sources) != count):
            raise SumbenchError(f"{NAME}: the prompt reads each summary's document "
                                f"({{{{Document}}}}); got {len(sources or ())} documents for "
                                f"{count} summaries")
        if self.reads_references and len(references) != count:
            raise SumbenchError(f"{NAME}: {len(references)} reference lists for {count} "
                                f"summaries")
        jobs = []
        for index, summary in enumerate(summaries):
            document = sources[index] if self.reads_sources else None
            for reference in self._references_of(references, index):
                content = self.prompt.render(summary, document, reference)
                jobs.append((index, [{"role": "system", "content": content}]))
        return jobs

    def _references_of(self, references: Sequence[Sequence[str]], index: int) -> list:
        """The references the index-th summary is sent with ([None]: the prompt reads none)."""
        if not self.reads_references:
            return [None]
        texts = [references[index]] if isinstance(references[index], str) \
            else list(references[index])
        if not texts:
            raise SumbenchError(f"{NAME}: summary {index + 1} has no reference")
        return texts

    def _client(self) -> ChatClient:
        key = os.environ.get(self.values["api_key_env"]) or ""  # "": no other variable's key
        return ChatClient(model=self.values["model"], base_url=base_url_of(self.values),
                          api_key=key, max_attempts=self.values["max_attempts"],
                          sleep=self.sleep)

    def _responses(self, requests: Sequence[list[dict]], started: float) -> list[dict]:
        """Each request's response, from the cache or the server; failed requests are one
        error after the others were answered (and cached)."""
        client, params = self._client(), request_params(self.values)
        keys = [client.request_key(messages, params) for messages in requests]
        cache = open_cache(self.values["cache"]) if self.values["cache"] else None
        try:
            found = cache.get_many(keys) if cache is not None else {}
            missing = [i for i, key in enumerate(keys) if key not in found]
            fetched, failures = self._fetch(client, params, requests, missing, keys, cache)
        finally:
            if cache is not None:
                cache.close()
        self.last = _cost(client, fetched, len(requests) - len(missing), started)
        if failures:
            raise SumbenchError(
                f"{NAME}: {len(failures)} of {len(missing)} requests failed (first: "
                f"{failures[0]})" + ("; the answered ones are cached, so running again asks "
                                     "only for these" if cache is not None else ""))
        return [found[key] if key in found else fetched[i] for i, key in enumerate(keys)]

    def _fetch(self, client: ChatClient, params: dict, requests: Sequence[list[dict]],
               missing: Sequence[int], keys: Sequence[str], cache) -> tuple[dict, list]:
        """{request index: response} of the `missing` requests, `max_concurrency` at once,
        each stored in `cache` as it arrives; and the failures' messages."""
        def ask(index: int) -> tuple[int, dict | None, str | None]:
            try:
                return index, client.chat(requests[index], **params), None
            except ChatError as error:
                return index, None, str(error)

        fetched, failures = {}, []
        with ThreadPoolExecutor(self.values["max_concurrency"]) as pool:
            for index, response, error in pool.map(ask, missing):
                if error is not None:
                    failures.append(f"request {index + 1}: {error}")
                    continue
                fetched[index] = response
                if cache is not None:
                    cache.set(keys[index], response)
        return fetched, failures


def _cost(client: ChatClient, fetched: Mapping[int, dict], cached: int,
          started: float) -> dict:
    """The latest call's HTTP requests (retries included), responses read from the cache, and
    the tokens the server reported for the responses fetched now."""
    usage = [response.get("usage") if isinstance(response.get("usage"), dict) else {}
             for response in fetched.values()]
    return {"seconds": round(time.perf_counter() - started, 3),
            "requests": client.requests_made, "responses": len(fetched), "cached": cached,
            "prompt_tokens": sum(int(item.get("prompt_tokens") or 0) for item in usage),
            "completion_tokens": sum(int(item.get("completion_tokens") or 0)
                                     for item in usage)}


def register() -> None:
    """Add "geval" (G-Eval's SummEval relevance prompt, sampled) to the evaluator registry,
    once per process."""
    if NAME not in EVALUATORS:
        register_evaluator(NAME, GEvalEvaluator())
