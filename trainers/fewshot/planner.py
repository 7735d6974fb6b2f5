"""Few-shot prompt planning: the shot pool, each test item's shots, and its windows or
truncation within the prompt budget (trainers.fewshot.runner runs the plans).

Two ways to fit an item's input (lines of a USB task):
- by default, the longest prefix of its input lines (EXT, EVEXT: the longest window of whole
  lines) whose whole rendered prompt fits the limit, counted exactly;
- for styles with the paper's budgets (`llama`, `vicuna`, `vicuna-chat`:
  trainers.fewshot.prompts.PAPER_LLM_BUDGET, usb-baselines.md §5.3), as the release cut its
  content: the leading lines whose cumulative token count (each line counted alone) fits the
  limit minus the prompt without content minus `content_margin` (8); an EXT/EVEXT window
  closes when the next line would take the prompt over the limit or the window's Yes/No
  output (`SENT0 Yes SENT1 Yes ...`, the longer of the all-Yes and all-No strings, so that
  the gold labels never decide) over `max_window_output_tokens` (512).
Either way an item whose shortest cut does not fit with its shots is planned zero-shot.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.base import FewShotParts
from trainers.fewshot.prompts import Prompt, PromptStyle, render, render_shot
from trainers.fewshot.shots import ShotBudget, ShotCandidate, select_for_item

#: output room per task (the release's longest training outputs, in tokens, rounded up)
DEFAULT_MAX_NEW_TOKENS = {"abstractive_summarization": 560, "topicbased_summarization": 370,
                          "multisentence_compression": 212, "fixing_factuality": 212,
                          "unsupported_span_prediction": 216, "factuality_classification": 8}
#: line tasks: tokens per line of the window (`SENT12 Yes` / `SENT12`), plus a margin
LINE_TOKENS = {"yes_no": 5, "id_list": 3}
LINE_MARGIN = 8


@dataclass(frozen=True)
class PlannedPrompt:
    """One prompt to run: a test instance (one window of it), its shots and its prompt."""
    instance: int
    window: int
    lines: tuple[int, int] | None
    kept_lines: int | None
    shots: tuple[int, ...]
    item: FewShotParts
    prompt: Prompt
    max_new_tokens: int
    overflow: bool


def largest_fitting(fits: Callable[[int], bool], low: int, high: int) -> tuple[int, bool]:
    """The largest v in [low, high] with fits(v) (fits is monotone: true up to some v), and
    whether it fits at all (else `low`)."""
    if not fits(low):
        return low, False
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low, True


def build_shot_pool(task: Any, train_instances: Sequence[dict], style: PromptStyle,
                    backend: Any) -> tuple[dict[int, FewShotParts], list[ShotCandidate]]:
    """Every training instance as a demonstration ({its index: its parts}), with its rendered
    length in tokens; for the styles with the paper's budgets, as the release built its pool
    (usb-baselines.md §5.3), only the first instance of each training record (EVEXT: its first
    summary line)."""
    parts = {index: task.fewshot_parts(instance)
             for index, instance in enumerate(train_instances)
             if not releases_pool(style) or task.first_of_its_record(instance)}
    lengths = backend.count_tokens([render_shot(part, style, task.name)
                                    for part in parts.values()])
    pool = [ShotCandidate(index, task.group_key(train_instances[index]), int(length))
            for index, length in zip(parts, lengths)]
    return parts, pool


def releases_pool(style: PromptStyle) -> bool:
    """Whether the style builds its shot pool as the release did (the paper-budget styles)."""
    return bool(style.budget)


class PromptPlanner:
    """Plans the prompts of each test item: its shots, then its windows or truncation."""

    def __init__(self, task: Any, style: PromptStyle, backend: Any,
                 shot_parts: Mapping[int, FewShotParts], pool: Sequence[ShotCandidate],
                 budget: ShotBudget, seed: int, max_prompt_tokens: int | None = None,
                 max_new_tokens: int | None = None,
                 prompt_room: Callable[[int], int | None] | None = None):
        """`prompt_room(output_tokens)`: the longest prompt the model's context holds beside
        that many output tokens (None: unbounded); it caps `max_prompt_tokens`."""
        self.task, self.style, self.backend = task, style, backend
        self.shot_parts, self.pool, self.budget, self.seed = shot_parts, pool, budget, seed
        self.max_prompt_tokens, self.max_new_tokens = max_prompt_tokens, max_new_tokens
        self.prompt_room = prompt_room
        self.limits = dict(style.budget)

    def plan(self, index: int, instance: dict) -> list[PlannedPrompt]:
        """The item's prompts with its shots; without shots (as the release fell back to
        zero-shot) when even its shortest cut does not fit with them."""
        shots = tuple(select_for_item(self.pool, self.budget, self.seed, index,
                                      self.task.group_key(instance)))
        planned = self._plan_with(index, instance, shots)
        if shots and any(plan.overflow for plan in planned):
            planned = self._plan_with(index, instance, ())
        return planned

    def _plan_with(self, index: int, instance: dict,
                   shots: tuple[int, ...]) -> list[PlannedPrompt]:
        demos = [self.shot_parts[i] for i in shots]
        full = self.task.fewshot_parts(instance)
        if "line_labels" in full.extra:
            return self._windows(index, instance, shots, demos)
        kept, overflow = self._kept_lines(instance, demos, full)
        item = full if kept is None else self.task.fewshot_parts(
            dict(instance, input_lines=instance["input_lines"][:kept]))
        return [self._planned(index, 0, None, kept, shots, demos, item, overflow)]

    def _render(self, demos: Sequence[FewShotParts], item: FewShotParts) -> Prompt:
        return render(demos, item, self.style, self.task.name)

    def prompt_limit(self, item: FewShotParts) -> int | None:
        """The most prompt tokens `item` may take: `max_prompt_tokens` capped by the model's
        context beside the item's output room; None when neither limits it."""
        limits = [self.max_prompt_tokens]
        if self.prompt_room is not None:
            limits.append(self.prompt_room(self._output_room(item)))
        limits = [int(limit) for limit in limits if limit is not None]
        return min(limits) if limits else None

    def _fits(self, demos: Sequence[FewShotParts], item: FewShotParts) -> bool:
        limit = self.prompt_limit(item)
        if limit is None:
            return True
        prompt = self._render(demos, item)
        return self.backend.count_tokens([prompt.text])[0] <= limit

    def _kept_lines(self, instance: dict, demos, full: FewShotParts) -> tuple[int | None, bool]:
        """None when the whole input fits (or cannot be cut), else the lines kept."""
        lines = instance.get("input_lines")
        if lines and "content_margin" in self.limits:
            return self._cumulative_kept(instance, demos, full)
        if self._fits(demos, full):
            return None, False
        if not lines or len(lines) < 2:
            return None, True

        def fits(count: int) -> bool:
            cut = dict(instance, input_lines=lines[:count])
            return self._fits(demos, self.task.fewshot_parts(cut))

        kept, fitted = largest_fitting(fits, 1, len(lines) - 1)
        return kept, not fitted

    def _windows(self, index, instance, shots, demos) -> list[PlannedPrompt]:
        n_lines, planned, start = len(instance["input_lines"]), [], 0
        while start < n_lines or not planned:
            end, fitted = largest_fitting(
                lambda stop, start=start: self._window_fits(demos, instance, start, stop),
                min(start + 1, n_lines), n_lines)
            item = self.task.fewshot_parts(instance, lines=(start, end))
            planned.append(self._planned(index, len(planned), (start, end), None, shots,
                                         demos, item, not fitted))
            start = end
        return planned

    def _cumulative_kept(self, instance: dict, demos,
                         full: FewShotParts) -> tuple[int | None, bool]:
        """The leading lines whose summed token counts fit the limit minus the prompt
        without content minus the margin (at least one line; overflow when none fits)."""
        limit, lines = self.prompt_limit(full), list(instance["input_lines"])
        if limit is None:
            return None, False
        empty = self._render(demos, self.task.fewshot_parts(dict(instance, input_lines=[])))
        room = (limit - self.backend.count_tokens([empty.text])[0]
                - self.limits["content_margin"])
        kept, total = 0, 0
        for count in self.backend.count_tokens(lines):
            total += int(count)
            if total > room:
                break
            kept += 1
        return (None, False) if kept == len(lines) else (max(kept, 1), kept == 0)

    def _window_fits(self, demos, instance: dict, start: int, stop: int) -> bool:
        item = self.task.fewshot_parts(instance, lines=(start, stop))
        cap = self.limits.get("max_window_output_tokens")
        if cap is not None and window_output_tokens(self.backend, stop - start) > cap:
            return False
        return self._fits(demos, item)

    def _planned(self, index, window, lines, kept, shots, demos, item, overflow):
        prompt = self._render(demos, item)
        return PlannedPrompt(index, window, lines, kept, shots, item, prompt,
                             self._output_room(item), overflow)

    def _output_room(self, item: FewShotParts) -> int:
        if self.max_new_tokens is not None:
            return int(self.max_new_tokens)
        labels = item.extra.get("line_labels")
        if labels is not None:
            return LINE_TOKENS[self.style.line_output] * len(labels) + LINE_MARGIN
        return DEFAULT_MAX_NEW_TOKENS.get(self.task.name, 256)


def window_output_tokens(backend: Any, n_lines: int) -> int:
    """Tokens of a window's Yes/No output, label-blind: the longer of `SENT0 Yes SENT1 Yes
    ...` and `SENT0 No SENT1 No ...`."""
    answers = [" ".join(f"SENT{k} {word}" for k in range(n_lines)) for word in ("Yes", "No")]
    return max(int(count) for count in backend.count_tokens(answers))


def resolve_limits(style: PromptStyle, max_prompt_tokens: int | None,
                   max_new_tokens: int | None) -> tuple[int | None, int | None]:
    """(max_prompt_tokens, max_new_tokens): the given values, else the style's own budgets
    (None where it has none)."""
    limits = dict(style.budget)
    return (limits.get("max_prompt_tokens") if max_prompt_tokens is None else max_prompt_tokens,
            limits.get("max_new_tokens") if max_new_tokens is None else max_new_tokens)
