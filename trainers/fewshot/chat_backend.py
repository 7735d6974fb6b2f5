"""The few-shot backend of an OpenAI-compatible server (chat completions or completions, e.g.
OpenAI or `vllm serve`), through `trainers.fewshot.chat_client.ChatClient` (which owns the
response cache): a bound on concurrent requests (`workers`) and, with `top_logprobs`, p(yes) /
(p(yes) + p(no)) at each yes/no token of an answer (`ScoredText`); token counts are a whitespace
approximation unless a counter is given. The Hugging Face backends are in
`trainers.fewshot.backends`."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.fewshot.chat_client import ChatClient, ScoredText, reply_text, yes_probabilities
from trainers.fewshot.prompts import Prompt


def whitespace_token_count(text: str) -> int:
    return len(text.split())


class ChatBackend:
    """An OpenAI-compatible model; greedy (temperature 0) requests, cached by the client.

    Chat endpoint: a prompt's `messages` are sent as they are, a text prompt becomes one user
    message. Completions endpoint: the prompt text, with its stop strings (at most 4).
    `workers` requests run at once. `top_logprobs` > 0 asks for token log-probabilities and
    returns `ScoredText` (plain text when the server sends none).
    """

    kind = "chat"

    def __init__(self, client, *, count_tokens: Callable[[str], int] | None = None,
                 max_tokens_param: str = "max_tokens", params: dict | None = None,
                 workers: int = 1, top_logprobs: int = 0):
        self.client = client
        self.counter = count_tokens or whitespace_token_count
        self.max_tokens_param = max_tokens_param
        self.params = {"temperature": 0.0, **(params or {})}
        self.workers = max(1, int(workers))
        self.top_logprobs = max(0, int(top_logprobs))

    @property
    def endpoint(self) -> str:
        """The client's OpenAI endpoint: "chat" or "completions"."""
        return getattr(self.client, "endpoint", "chat")

    def fingerprint(self) -> dict:
        return {"type": "chat", "base_url": self.client.base_url, "model": self.client.model,
                "endpoint": self.endpoint, "params": self.params,
                "top_logprobs": self.top_logprobs,
                "counter": getattr(self.counter, "__name__", "custom")}

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [self.counter(text) for text in texts]

    @property
    def reads_label_probabilities(self) -> bool:
        """Whether answers come with p(yes) at their yes/no tokens (`top_logprobs` > 0)."""
        return self.top_logprobs > 0

    def _logprob_params(self) -> dict:
        if not self.top_logprobs:
            return {}
        if self.endpoint == "completions":
            return {"logprobs": self.top_logprobs}
        return {"logprobs": True, "top_logprobs": self.top_logprobs}

    def _request(self, prompt: Prompt, params: dict) -> dict:
        if self.endpoint == "completions":
            if prompt.stops:
                params["stop"] = list(prompt.stops)[:4]
            return self.client.chat(prompt.text, **params)
        messages = list(prompt.messages) if prompt.messages else [
            {"role": "user", "content": prompt.text}]
        return self.client.chat([dict(message) for message in messages], **params)

    def _complete(self, prompt: Prompt, max_new_tokens: int) -> str:
        params = {**self.params, **self._logprob_params(),
                  self.max_tokens_param: int(max_new_tokens)}
        try:
            response = self._request(prompt, params)
        except SumbenchError as error:
            if self.top_logprobs and "HTTP 400" in str(error):
                raise SumbenchError(f"{error} (a server without log-probabilities refuses "
                                    f"them: --top-logprobs 0)") from None
            raise
        text = reply_text(response) or ""
        if not self.top_logprobs:
            return text
        return ScoredText(text, yes_probabilities(text, response))

    def complete_text(self, text: str, max_new_tokens: int, *,
                      params: dict | None = None) -> str:
        """One user message; `params` replaces the backend's sampling parameters (the
        official GPT-3.5 protocol sends none but max_tokens: the API's defaults)."""
        chosen = self.params if params is None else params
        return self.client.complete([{"role": "user", "content": text}],
                                    **{**chosen, self.max_tokens_param: int(max_new_tokens)})

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: Sequence[int], *,
                 label_probabilities: bool = False) -> list[str]:
        """Each prompt's answer; `ScoredText` whenever `top_logprobs` asks for
        log-probabilities (`label_probabilities` changes nothing: the request is the same)."""
        if self.workers == 1:
            return [self._complete(p, n) for p, n in zip(prompts, max_new_tokens)]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self._complete, prompts, max_new_tokens))


def chat_backend(model: str, *, base_url: str | None = None, cache: Any = None,
                 endpoint: str = "chat", **options: Any) -> ChatBackend:
    """A `ChatBackend` over a new `ChatClient` (API key from OPENAI_API_KEY); `endpoint`
    "chat" or "completions"."""
    return ChatBackend(ChatClient(model=model, base_url=base_url, cache=cache,
                                  endpoint=endpoint), **options)
