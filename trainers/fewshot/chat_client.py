"""A minimal OpenAI-compatible client (stdlib `urllib`) for chat completions and completions,
with retries and a cache; it is thread-safe, so callers may send requests concurrently.

- Endpoint: `{base_url}/chat/completions` (`endpoint="chat"`, messages) or
  `{base_url}/completions` (`endpoint="completions"`, a prompt text), as OpenAI's API and
  vLLM's `vllm serve` answer them; base URL, model and API key come from the arguments or the
  environment (`OPENAI_BASE_URL`, default https://api.openai.com/v1; `OPENAI_API_KEY`).
- Token log-probabilities, where the server returns them (chat: `logprobs` + `top_logprobs`;
  completions: `logprobs`), are read by `token_alternatives` in one shape for both.
- Retries: HTTP 429 and 5xx, connection errors (reset, refused, bad status line), timeouts and
  broken bodies (truncated, not UTF-8, not JSON such as an HTML error page, no reply text) are
  retried with exponential backoff (`backoff_s`, doubled each attempt, capped by
  `max_backoff_s`); a `Retry-After` header in seconds takes precedence, capped by
  `max_retry_after_s` and logged. Other HTTP errors fail at once. After `max_attempts` failures
  a `ChatError` names the URL, the attempts and the last error.
- Cache: responses are stored on disk keyed by a hash of (base_url, model, messages, params); the
  API key is never part of the key nor stored. A cached request makes no HTTP call. Only
  accepted replies are cached: an empty reply, or one the caller's `accept` rejects (it could
  not be parsed), is returned but never stored, so a rerun asks again.
"""
from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.models.disk_cache import DiskCache, cache_key, open_cache

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ENDPOINTS = {"chat": "chat/completions", "completions": "completions"}
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class ChatError(SumbenchError):
    """A chat request failed for good (non-retryable status or retries exhausted)."""


class _BrokenResponse(Exception):
    """A response that arrived but cannot be used (retried like a connection error)."""


def _log(message: str) -> None:
    print(f"sumbench chat: {message}", file=sys.stderr)


@dataclass
class ChatClient:
    """Chat completions against an OpenAI-compatible server.

    `cache` is a `DiskCache`, a path to one, or None. `sleep` is injectable so tests need not wait.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 60.0
    max_attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 60.0
    cache: Any = None
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = _log
    default_params: dict = field(default_factory=dict)
    endpoint: str = "chat"

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {sorted(ENDPOINTS)}, got "
                             f"{self.endpoint!r}")
        base = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = base.rstrip("/")
        if self.api_key is None:
            self.api_key = os.environ.get("OPENAI_API_KEY")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        self.cache = open_cache(self.cache)
        self.requests_made = 0

    @property
    def url(self) -> str:
        return f"{self.base_url}/{ENDPOINTS[self.endpoint]}"

    def request_key(self, messages: Sequence[dict] | str, params: dict) -> str:
        if self.endpoint == "chat":
            return cache_key("chat", self.base_url, self.model, list(messages), params)
        return cache_key("completions", self.base_url, self.model, messages, params)

    def chat(self, messages: Sequence[dict] | str, *,
             accept: Callable[[str], bool] | None = None, **params: Any) -> dict:
        """The full response JSON for `messages` (a prompt text for the completions
        endpoint), from the cache when present. The response is cached only when its reply
        text is non-empty and `accept(text)` (if given) holds."""
        params = {**self.default_params, **params}
        key = self.request_key(messages, params)
        if isinstance(self.cache, DiskCache):
            cached = self.cache.get(key)
            if cached is not None:
                return cached
        if self.endpoint == "chat":
            body = {"model": self.model, "messages": list(messages), **params}
        else:
            body = {"model": self.model, "prompt": str(messages), **params}
        response = self._post_with_retries(body)
        text = reply_text(response)
        if isinstance(self.cache, DiskCache) and text and (accept is None or accept(text)):
            self.cache.set(key, response)
        return response

    def complete(self, messages: Sequence[dict], *, accept: Callable[[str], bool] | None = None,
                 **params: Any) -> str:
        """The text of the first choice ("" for an empty reply, which is never cached)."""
        return reply_text(self.chat(messages, accept=accept, **params)) or ""

    # ---- HTTP ---------------------------------------------------------------------------
    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _post_once(self, body: dict) -> dict:
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url, data=data, headers=self._headers(),
                                         method="POST")
        self.requests_made += 1
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            payload = response.read()
        try:
            decoded = json.loads(payload.decode("utf-8"))
        except UnicodeDecodeError:
            raise _BrokenResponse("response body is not UTF-8") from None
        except json.JSONDecodeError:
            kind = "an HTML page" if payload.lstrip()[:1] == b"<" else "not JSON"
            raise _BrokenResponse(f"response body is {kind}: {payload[:120]!r}") from None
        if reply_text(decoded) is None:
            raise _BrokenResponse(f"response has no reply text: {json.dumps(decoded)[:200]}")
        return decoded

    def _post_with_retries(self, body: dict) -> dict:
        last_error = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._post_once(body)
            except urllib.error.HTTPError as error:
                detail = error.read()[:300].decode("utf-8", "replace")
                last_error = f"HTTP {error.code}: {detail}"
                if error.code not in RETRYABLE_STATUS:
                    raise ChatError(f"{self.url}: {last_error}") from None
                wait = self._retry_wait(error.headers, attempt) \
                    if attempt < self.max_attempts else 0.0
            except _BrokenResponse as error:
                last_error, wait = str(error), self._backoff(attempt)
            except (urllib.error.URLError, TimeoutError, ConnectionError,
                    http.client.HTTPException) as error:
                last_error = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
                wait = self._backoff(attempt)
            if attempt < self.max_attempts:
                self.sleep(wait)
        raise ChatError(f"{self.url}: failed after {self.max_attempts} attempts; "
                        f"last error: {last_error}")

    def _backoff(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))

    def _retry_wait(self, headers: Any, attempt: int) -> float:
        """The server's Retry-After (capped at `max_retry_after_s`, logged) or the backoff."""
        asked = _retry_after(headers)
        if asked is None:
            return self._backoff(attempt)
        wait = min(asked, self.max_retry_after_s)
        self.log(f"{self.url} asked to retry after {asked:g} s; waiting {wait:g} s"
                 + (f" (capped by max_retry_after_s={self.max_retry_after_s:g})"
                    if wait < asked else ""))
        return wait


def reply_text(response: Any) -> str | None:
    """The first choice's message content, or its text (completions); "" when null, None when
    the shape is wrong."""
    try:
        choice = response["choices"][0]
        content = choice["message"]["content"] if "message" in choice else choice["text"]
    except (KeyError, IndexError, TypeError):
        return None
    return "" if content is None else str(content)


def token_alternatives(response: Any) -> list[tuple[str, dict[str, float]]]:
    """Per generated token of the first choice: (its text, {alternative token text: log
    probability}, the token itself included); [] when the server sent no log-probabilities.
    Chat: `logprobs.content[i]` with `top_logprobs`; completions: `logprobs.tokens` with
    `top_logprobs` dictionaries."""
    try:
        return _alternatives(response["choices"][0].get("logprobs") or {})
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return []          # a shape this reader does not know: no probabilities


def _alternatives(logprobs: dict) -> list[tuple[str, dict[str, float]]]:
    if isinstance(logprobs.get("content"), list):
        return _chat_tokens(logprobs["content"])
    tokens, tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if isinstance(tokens, list) and isinstance(tops, list):
        chosen = logprobs.get("token_logprobs") or [None] * len(tokens)
        return [(str(token), {str(k): float(v) for k, v in (top or {}).items()}
                 | ({str(token): float(lp)} if lp is not None else {}))
                for token, top, lp in zip(tokens, tops, chosen)]
    return []


def _chat_tokens(content: list) -> list[tuple[str, dict[str, float]]]:
    """Chat tokens as text. A character split over several byte tokens (their `bytes` given)
    becomes one piece, without alternatives (it is no yes/no); bytes that never complete a
    character become U+FFFD; a token without usable `bytes` is its `token` text."""
    rows: list[tuple[str, dict[str, float]]] = []
    pending = b""
    for item in content:
        token = str(item["token"])
        alternatives = {str(alt["token"]): float(alt["logprob"])
                        for alt in item.get("top_logprobs") or []} | \
            {token: float(item["logprob"])}
        raw = _token_bytes(item.get("bytes"))
        if pending and (raw is None or not 0x80 <= raw[0] < 0xC0):
            rows.append((pending.decode("utf-8", errors="replace"), {}))  # never completed
            pending = b""
        if raw is None or (not pending and _complete(raw)):
            rows.append((token if raw is None else raw.decode("utf-8"), alternatives))
            continue
        pending += raw
        if _complete(pending):
            rows.append((pending.decode("utf-8"), {}))
            pending = b""
    if pending:
        rows.append((pending.decode("utf-8", errors="replace"), {}))
    return rows


def _token_bytes(raw: Any) -> bytes | None:
    """A token's `bytes` field as bytes; None when absent, empty or not bytes."""
    if not isinstance(raw, list) or not raw or not all(
            isinstance(value, int) and 0 <= value < 256 for value in raw):
        return None
    return bytes(raw)


def _complete(data: bytes) -> bool:
    """Whether `data` is whole UTF-8 characters."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class ScoredText(str):
    """A generated text and p(yes) / (p(yes) + p(no)) at its yes/no tokens:
    `yes_probabilities` = {character offset where the word starts: probability}."""
    yes_probabilities: dict[int, float]

    def __new__(cls, text: str, yes_probabilities: dict[int, float]):
        made = super().__new__(cls, text)
        made.yes_probabilities = yes_probabilities
        return made


def yes_probabilities(text: str, response: Any) -> dict[int, float]:
    """{offset of each yes/no token's word in `text`: p(yes) / (p(yes) + p(no))}, from the
    response's token log-probabilities (`token_alternatives`), p summed over
    the token's alternatives that are yes (or no) in any case and spacing. The tokens must
    spell `text`, possibly followed by more (a server that cut a stop string from the text
    keeps its tokens); else {} (their offsets would be wrong)."""
    import math

    tokens = token_alternatives(response)
    if not "".join(token for token, _ in tokens).startswith(text):
        return {}
    found, offset = {}, 0
    for token, alternatives in tokens:
        if offset >= len(text):
            break
        if token.strip().lower() in ("yes", "no"):
            mass = {word: sum(math.exp(lp) for alt, lp in alternatives.items()
                              if alt.strip().lower() == word) for word in ("yes", "no")}
            if mass["yes"] + mass["no"] > 0:
                found[offset + len(token) - len(token.lstrip())] = \
                    mass["yes"] / (mass["yes"] + mass["no"])
        offset += len(token)
    return found
