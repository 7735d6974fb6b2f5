"""Benchmark (not a test): the `alignscore` presence backend against the official fork's own
batching, over REALSumm (summary, SCU) pairs, at AlignScore-large's shape with random weights.

The official code is the PyPI fork `alignscore-speedofmagic==0.1.4` (yuh-zha/AlignScore
a0936d5 plus the two loading fixes), installed without its stale pins into a folder of its
own (`pip install --no-deps --target DIR alignscore-speedofmagic==0.1.4 pytorch-lightning
torchmetrics lightning-utilities`; SUMBENCH_ALIGNSCORE_OFFICIAL=DIR). `official_alignscore`
runs it with one shim: `spacy.load("en_core_web_sm")` (not on PyPI; only the SMART modes use
it) answers a blank English pipeline. tests/leaderboard/test_alignscore_official.py checks the
port against it with the same helpers.

Arms, alternated `--repeat` times (bench/harness.py: min and median, ratio of medians):
  ours      AlignScoreBackend: every pair's (chunk, sentence) rows pooled, each distinct row
            once, longest first, in batches of at most `--batch-size` at least 4/5
            filled (each padded to its longest row);
  baseline  the fork's `AlignScore(...).score(summaries, units)`: pair by pair, each pair's
            rows in batches of `--batch-size` padded to 512 tokens, MLM head included.
"identical": every probability within 1e-5 (padding changes float rounding).
Shape: roberta-large's config (24 layers, 1024 wide) with a byte-level BPE of up to 30,000
tokens trained on the data; `--shape tiny` for a quick check.

    python bench/alignscore_speed.py [--subset 16] [--repeat 5] [--json] [--device cuda]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a script; imported as bench.alignscore_speed, sys.path is kept
    sys.path.insert(0, str(REPO_ROOT))
from bench.harness import add_options, compare_arms, cpus, report  # noqa: E402

ENV = "SUMBENCH_ALIGNSCORE_OFFICIAL"
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "pyramid" / "realsumm"
#: roberta-large's published config (AlignScore-large's base)
ROBERTA_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                 "intermediate_size": 4096, "max_position_embeddings": 514,
                 "type_vocab_size": 1, "layer_norm_eps": 1e-5}


def official_folder() -> Path | None:
    """The folder the fork is installed in (SUMBENCH_ALIGNSCORE_OFFICIAL, else the
    repository's .ci-alignscore), or None."""
    for folder in (os.environ.get(ENV), REPO_ROOT / ".ci-alignscore"):
        if folder and (Path(folder) / "alignscore" / "inference.py").is_file():
            return Path(folder)
    return None


@contextlib.contextmanager
def official_package(folder: Path) -> Iterator:
    """The fork's `alignscore` module, importable while the context lasts (its folder first
    on sys.path, `spacy.load("en_core_web_sm")` a blank English pipeline); sys.path and
    sys.modules restored afterwards (the transformers classes it uses are imported first, so
    that later code keeps the same classes)."""
    import spacy
    import transformers

    for name in ("AutoConfig", "AutoTokenizer", "RobertaModel", "RobertaForMaskedLM",
                 "BertModel", "BertForPreTraining", "AlbertModel", "AlbertForMaskedLM",
                 "get_linear_schedule_with_warmup"):
        getattr(transformers, name)  # imported before sys.modules is saved: they outlive it
    real_load = spacy.load

    def load(name, *args, **keywords):
        return spacy.blank("en") if name == "en_core_web_sm" else real_load(name, *args,
                                                                              **keywords)

    with contextlib.ExitStack() as stack:
        sys.path.insert(0, str(folder))
        stack.callback(sys.path.remove, str(folder))
        stack.enter_context(mock.patch.dict(sys.modules))
        stack.enter_context(mock.patch.object(spacy, "load", load))
        import tasks.plumbing.punkt as punkt

        punkt.install_english_punkt()
        import alignscore

        yield alignscore


def official_scorer(package, checkpoint: Path, base: Path, batch_size: int = 32,
                    device: str = "cpu"):
    """The fork's `AlignScore` on a checkpoint and a local base model folder (whose path
    must contain "roberta": the official model class picks its branch by substring)."""
    return package.AlignScore(model=str(base), batch_size=batch_size, device=device,
                              ckpt_path=str(checkpoint), evaluation_mode="nli_sp",
                              verbose=False)


def write_checkpoint(align_model, path: Path) -> Path:
    """A Lightning checkpoint of a fork `BERTAlignModel`: its state dict and
    hyper-parameters under Lightning's keys (written as Lightning's `dump_checkpoint`
    does, without a Trainer)."""
    import pytorch_lightning
    import torch

    torch.save({"epoch": 0, "global_step": 0,
                "pytorch-lightning_version": pytorch_lightning.__version__,
                "state_dict": align_model.state_dict(), "loops": {}, "callbacks": {},
                "optimizer_states": [], "lr_schedulers": [],
                "hyper_parameters": dict(align_model.hparams)}, str(path))
    return path


def randomize(module, seed: int, head_gain: float = 12.0) -> None:
    """Seeded weights: matrices normal with std gain/sqrt(fan-in) (`head_gain` for
    tri_layer, 1 elsewhere), vectors perturbed by N(0, 0.1); so the checkpoint differs from
    the base folder's weights and the aligned probabilities spread over (0, 1)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(module.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() < 2:
                parameter.add_(0.1 * noise)
                continue
            gain = head_gain if name.startswith("tri_layer") else 1.0
            parameter.copy_(noise * gain / parameter.shape[-1] ** 0.5)


def build_base(folder: Path, texts: list[str], seed: int, shape: str) -> Path:
    """A random RoBERTa (masked LM) and a BPE trained on `texts`, saved in `folder`."""
    import torch
    from transformers import RobertaConfig, RobertaForMaskedLM

    from trainers.models.tiny import build_tiny_roberta_tokenizer, tiny_roberta_config

    tokenizer = build_tiny_roberta_tokenizer(texts, vocab_size=800 if shape == "tiny"
                                             else 30000, model_max_length=512)
    if shape == "tiny":
        config = tiny_roberta_config(len(tokenizer), dropout=0.1)
    else:
        config = RobertaConfig(**ROBERTA_LARGE, vocab_size=len(tokenizer), pad_token_id=1,
                               bos_token_id=0, eos_token_id=2)
    torch.manual_seed(seed)
    RobertaForMaskedLM(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def official_checkpoint(package, base: Path, path: Path, seed: int) -> Path:
    """The fork's own BERTAlignModel on `base`, randomized, written as a Lightning .ckpt."""
    from alignscore.model import BERTAlignModel  # the fork's, on sys.path in the context

    assert package is not None
    align_model = BERTAlignModel(model=str(base))
    randomize(align_model, seed)
    return write_checkpoint(align_model, path)


def realsumm_pairs(data: Path, subset: int) -> tuple[list[tuple[str, str]], list[str]]:
    """About `subset` evenly spaced (summary, SCU) pairs of REALSumm, and the texts the BPE
    is trained on (references and three systems' summaries, as bench/presence_speed.py)."""
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    dataset = load_pyramid_dataset(str(data), labels=False)
    pairs = [(dataset.summaries[system][position], unit)
             for position, units in enumerate(dataset.units["scus"])
             for system in dataset.systems for unit in units]
    stride = max(1, len(pairs) // subset)
    texts = list(dataset.references) + [summary for system in dataset.systems[:3]
                                        for summary in dataset.summaries[system]]
    return pairs[::stride][:subset], texts


def close(first, second) -> bool:
    return len(first) == len(second) and max(
        (abs(a - b) for a, b in zip(first, second)), default=0.0) <= 1e-5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--subset", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=cpus())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    parser.add_argument("--shape", choices=("tiny", "roberta-large"), default="roberta-large")
    parser.add_argument("--work", default=None, help="folder for the model (default: a temp)")
    add_options(parser)
    args = parser.parse_args(argv)
    folder = official_folder()
    if folder is None:
        print(f"the fork is not installed ({ENV}=DIR, see this file's docstring)",
              file=sys.stderr)
        return 2
    import tempfile

    import torch

    torch.set_num_threads(args.threads)
    pairs, texts = realsumm_pairs(Path(args.data), args.subset)
    with tempfile.TemporaryDirectory() as temp:
        work = Path(args.work or temp)
        base = build_base(work / "random-roberta", texts, args.seed, args.shape)
        return run_arms(folder, base, work / "AlignScore-random.ckpt", pairs, args)


def run_arms(folder: Path, base: Path, checkpoint: Path, pairs: list, args) -> int:
    import torch

    from leaderboard.evaluators.pyramid.alignscore import AlignScoreBackend

    with official_package(folder) as package:
        official_checkpoint(package, base, checkpoint, args.seed)
        official = official_scorer(package, checkpoint, base, args.batch_size, args.device)
        ours = AlignScoreBackend(str(checkpoint), batch_size=args.batch_size,
                                 device=args.device)
        summaries, units = [s for s, _ in pairs], [u for _, u in pairs]
        result = compare_arms(lambda: [r.probability for r in ours.score(pairs)],
                              lambda: official.score(summaries, units),
                              repeat=args.repeat, same=close)
    difference = max(abs(a - b) for a, b in zip(result["outputs"]["ours"],
                                                result["outputs"]["baseline"]))
    extra = {"pairs": len(pairs), "shape": args.shape, "batch_size": args.batch_size,
             "device": args.device, "threads": args.threads, "torch": torch.__version__,
             "max_abs_difference": difference}
    report("alignscore_speed", result, as_json=args.json, extra=extra,
           labels=("ours (pooled rows, sorted, dynamic padding)",
                   "alignscore-speedofmagic 0.1.4 (pair by pair, pad to 512)"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
