"""G-Eval (Liu et al., EMNLP 2023) as a judge through an OpenAI-compatible chat endpoint:
`prompts` (prompt files and their placeholders; G-Eval's SummEval relevance prompt shipped in
prompts/ with its source), `scoring` (the official parsing and mean of n samples, and the
probability-weighted score from log-probabilities) and `evaluator` (the registered `geval`
evaluator: options, requests through trainers.fewshot.chat_client, the cache, the cost)."""
from __future__ import annotations
