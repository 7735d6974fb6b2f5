"""Table 10's budgets for the paper's Llama/Vicuna styles (usb-baselines.md §5.3), with a stub
tokenizer that counts whitespace words (times `factor`): 6144 prompt and 512 new tokens, the
content cut by the cumulative token count of its lines minus 8, EXT/EVEXT windows closing at the
prompt limit or at 512 tokens of Yes/No output, and shots within 512/128 tokens each and 2048
in all, drawn per item from a seeded generator."""
from __future__ import annotations

import pytest

from tasks import get_task
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.planner import PromptPlanner, build_shot_pool, resolve_limits
from trainers.fewshot.prompts import get_style, render_shot
from trainers.fewshot.runner import plan_prompts
from trainers.fewshot.shots import shot_budget


class WordCounter:
    """A backend that only counts tokens: `factor` per whitespace-separated word."""

    def __init__(self, factor: int = 1):
        self.factor = factor

    def count_tokens(self, texts):
        return [self.factor * len(text.split()) for text in texts]


def train_split(usb_fixture_dir, task):
    path = usb_fixture_dir / "task_datasets" / "all" / task.name / "train.jsonl"
    return task.instances(read_jsonl(path))


def planner(task, train, style="llama", *, n_shots=0, max_prompt_tokens=None, factor=1):
    style, backend = get_style(style), WordCounter(factor)
    parts, pool = build_shot_pool(task, train, style, backend)
    max_prompt_tokens, max_new_tokens = resolve_limits(style, max_prompt_tokens, None)
    return PromptPlanner(task, style, backend, parts, pool, shot_budget(task.name, n_shots), 3,
                         max_prompt_tokens, max_new_tokens)


def test_the_paper_styles_take_table_10s_budgets_and_the_others_none():
    for name in ("llama", "vicuna", "vicuna-chat"):
        assert resolve_limits(get_style(name), None, None) == (6144, 512)
        assert resolve_limits(get_style(name), 700, 64) == (700, 64)
        assert dict(get_style(name).budget) == {"max_prompt_tokens": 6144,
                                                "max_new_tokens": 512, "content_margin": 8,
                                                "max_window_output_tokens": 512}
    for name in ("flan-t5", "gpt-3.5", "gpt-3.5-first"):
        assert resolve_limits(get_style(name), None, None) == (None, None)
        assert get_style(name).budget == ()


FAC_ITEM = {"id": "synthetic/doc.json", "summ_idx": 0, "summary_sent": "one two three",
            "label": 0,
            "input_lines": [f"w{k} a b c d" for k in range(14)] + ["x " * 10]
            + ["y"] * 5}


def test_content_is_cut_by_the_cumulative_count_of_its_lines_minus_8(usb_fixture_dir):
    """Zero-shot FAC, limit 100: the prompt without content ("Is there ... content?\\nCONTENT:
    \\nSUMMARY: one two three\\nLABEL:") is 16 words, so the lines get 100 - 16 - 8 = 76:
    fourteen lines of 5 words (70), then the 10-word line passes 76 and nothing after it is
    kept, not even the 1-word lines that would fit."""
    task = get_task("FAC")
    plans = planner(task, train_split(usb_fixture_dir, task), max_prompt_tokens=100).plan(
        0, FAC_ITEM)
    assert len(plans) == 1
    plan = plans[0]
    assert plan.kept_lines == 14 and not plan.overflow and plan.shots == ()
    assert plan.max_new_tokens == 512
    assert plan.prompt.text == ("Is there sufficient evidence for the summary in the content?\n"
                                "CONTENT: " + " ".join(FAC_ITEM["input_lines"][:14])
                                + "\nSUMMARY: one two three\nLABEL:")
    # the same limit in a style without budgets of its own: the whole prompt counted, no margin
    generic = planner(task, train_split(usb_fixture_dir, task), "flan-t5",
                      max_prompt_tokens=100).plan(0, FAC_ITEM)[0]
    assert generic.kept_lines == 15


def ext_item(n_lines: int) -> dict:
    return {"id": "synthetic/ext.json", "input_lines": [f"w{k}" for k in range(n_lines)],
            "labels": [k % 3 == 0 for k in range(n_lines)]}


def test_windows_close_at_512_tokens_of_yes_no_output(usb_fixture_dir):
    """`SENTk Yes` is 2 words: 256 lines make 512 output tokens, the 257th would pass it; the
    prompt (25 + 1 + 2 x 256 + 1 words) is far within 6144."""
    task = get_task("EXT")
    plans = planner(task, train_split(usb_fixture_dir, task)).plan(0, ext_item(300))
    assert [plan.lines for plan in plans] == [(0, 256), (256, 300)]
    assert [plan.window for plan in plans] == [0, 1] and not any(p.overflow for p in plans)
    assert plans[1].item.content.startswith("CONTENT: SENT0 w256 SENT1 w257 ")
    assert plans[1].prompt.text.endswith(" SENT43 w299\nLABELS:")
    assert {plan.max_new_tokens for plan in plans} == {512}


def test_windows_close_at_the_prompt_limit(usb_fixture_dir):
    """Limit 100: Table 7's EXT instruction is 25 words, "CONTENT:" and "LABELS:" one each,
    each line 2 (`SENTk wk`): 25 + 1 + 2n + 1 <= 100 gives windows of 36 lines."""
    task = get_task("EXT")
    plans = planner(task, train_split(usb_fixture_dir, task), max_prompt_tokens=100).plan(
        0, ext_item(80))
    assert [plan.lines for plan in plans] == [(0, 36), (36, 72), (72, 80)]
    assert all(len(plan.prompt.text.split()) <= 100 for plan in plans)
    assert len(plans[0].prompt.text.split()) == 99


@pytest.mark.parametrize("alias, per_shot, n_shots", [("FAC", 128, 16), ("ABS", 512, 4)])
def test_shots_within_their_budgets_seeded_per_item(usb_fixture_dir, alias, per_shot, n_shots):
    """With 3 tokens a word, some fixture shots pass the per-shot budget: none is chosen; the
    chosen ones stay within 2048 tokens; the same seed gives the same shots, each item its
    own draw."""
    task = get_task(alias)
    train = train_split(usb_fixture_dir, task)
    style, backend = get_style("llama"), WordCounter(3)
    lengths = {k: backend.count_tokens([render_shot(task.fewshot_parts(r), style, task.name)])[0]
               for k, r in enumerate(train)}
    assert min(lengths.values()) <= per_shot < max(lengths.values())
    budget = shot_budget(task.name)
    assert (budget.n_shots, budget.max_shot_tokens, budget.max_total_tokens) == (
        n_shots, per_shot, 2048)
    items = [dict(record, id=f"other/{k}") for k, record in enumerate(train[:3])]
    plans, _ = plan_prompts(task, items, train, backend, style, budget, seed=5)
    again, _ = plan_prompts(task, items, train, backend, style, budget, seed=5)
    assert [p.shots for p in plans] == [p.shots for p in again]
    for plan in plans:
        assert plan.shots and all(lengths[k] <= per_shot for k in plan.shots)
        assert sum(lengths[k] for k in plan.shots) <= 2048
        assert len(set(plan.shots)) == len(plan.shots) <= n_shots
    assert len({p.shots for p in plans}) > 1


def test_the_paper_styles_take_each_training_records_first_instance_as_the_release(
        usb_fixture_dir):
    """The release's pool: a training record's first converted entry, so EVEXT's first
    summary line only (usb-baselines.md §5.3); the other styles and tasks keep every
    instance, and only the runs whose pool is cut change their fingerprint."""
    from trainers.fewshot.runner import run_fingerprint

    evext, fac = get_task("EVEXT"), get_task("FAC")
    train = train_split(usb_fixture_dir, evext)
    assert any(instance["summ_idx"] > 0 for instance in train)
    for style, expected in (("llama", [i for i, x in enumerate(train) if x["summ_idx"] == 0]),
                            ("vicuna", [i for i, x in enumerate(train) if x["summ_idx"] == 0]),
                            ("flan-t5", list(range(len(train))))):
        _, pool = build_shot_pool(evext, train, get_style(style), WordCounter())
        assert [candidate.index for candidate in pool] == expected, style
    fac_train = train_split(usb_fixture_dir, fac)
    _, pool = build_shot_pool(fac, fac_train, get_style("llama"), WordCounter())
    assert len(pool) == len(fac_train)

    def fingerprint(task, style, instances):
        return run_fingerprint(task, get_style(style), type("B", (), {
            "fingerprint": lambda self: {}})(), shot_budget(task.name), 0, [], instances,
            None, None)
    assert fingerprint(evext, "llama", train)["shot_pool"] == \
        "the first instance of each training record"
    assert "shot_pool" not in fingerprint(evext, "flan-t5", train)
    assert "shot_pool" not in fingerprint(fac, "llama", fac_train)
