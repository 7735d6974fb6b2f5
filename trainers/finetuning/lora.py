"""LoRA with peft: the adapter config from a spec, the adapter saved on its own, and merging.

Defaults (spec fields): r=16, alpha=32 (scale alpha/r = 2), dropout 0.05 on the query and value
projections of every attention block ("q", "v" in T5), the LoRA paper's recipe. The base model
stays frozen; `adapter/` holds only the LoRA weights plus the tokenizer, and its
`adapter_config.json` names the base model and its revision (`spec.revision`; a local base is
recorded by its absolute path, see `trainers.finetuning.model_setup.load_finetuning_start`).
`merge_lora` folds the adapter into the base weights for plain `from_pretrained` inference.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.plumbing.atomic import atomic_directory

ADAPTER_DIR = "adapter"


def lora_config(spec) -> Any:
    """The peft `LoraConfig` for a `FinetuneSpec` (recording the base model's revision, so
    loading the adapter loads the base it was trained on)."""
    from peft import LoraConfig, TaskType

    return LoraConfig(task_type=TaskType.SEQ_2_SEQ_LM, r=spec.lora_r, lora_alpha=spec.lora_alpha,
                      lora_dropout=spec.lora_dropout,
                      target_modules=list(spec.lora_target_modules), bias="none",
                      revision=spec.revision)


def apply_lora(model, spec):
    """Wrap `model` in a peft model whose only trainable weights are the LoRA matrices.

    The random LoRA A matrices are drawn from a generator seeded with `spec.seed` (the global
    generator is left as it was), so equal specs start from equal adapters.
    """
    import torch
    from peft import get_peft_model

    with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
        torch.manual_seed(spec.seed)
        return get_peft_model(model, lora_config(spec))


def save_adapter(model, tokenizer, out_dir: str | Path) -> Path:
    """Write the adapter weights, its config and the tokenizer to `out_dir` (all or nothing)."""
    out_dir = Path(out_dir)
    with atomic_directory(out_dir) as staging:
        model.save_pretrained(str(staging))
        if tokenizer is not None:
            tokenizer.save_pretrained(str(staging))
    return out_dir


def adapter_base_model(adapter_path: str | Path) -> str:
    """The base model recorded in an adapter's config."""
    from peft import PeftConfig

    return PeftConfig.from_pretrained(str(adapter_path)).base_model_name_or_path


def load_adapter_model(adapter_path: str | Path, base_path: str | Path | None = None,
                       revision: str | None = None):
    """Base model + adapter (unmerged), in eval mode; the base defaults to the recorded one
    (at the recorded revision unless `revision` is given)."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForSeq2SeqLM

    if base_path is None:
        config = PeftConfig.from_pretrained(str(adapter_path))
        base_path, revision = config.base_model_name_or_path, revision or config.revision
    base = AutoModelForSeq2SeqLM.from_pretrained(str(base_path), revision=revision)
    return PeftModel.from_pretrained(base, str(adapter_path)).eval()


def merge_lora(base_path: str | Path | None, adapter_path: str | Path, out_path: str | Path,
               revision: str | None = None) -> Path:
    """Fold the adapter into the base weights and save a plain model (+ tokenizer) to out_path.

    `base_path` may be None to use the base recorded in the adapter config. The tokenizer is
    taken from the adapter folder when it has one, else from the base.
    """
    from transformers import AutoTokenizer

    model = load_adapter_model(adapter_path, base_path, revision=revision)
    merged = model.merge_and_unload()
    adapter_path = Path(adapter_path)
    tokenizer_source = (adapter_path if (adapter_path / "tokenizer_config.json").exists()
                        else str(base_path or adapter_base_model(adapter_path)))
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_source))
    out_path = Path(out_path)
    with atomic_directory(out_path) as staging:
        merged.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
    return out_path
