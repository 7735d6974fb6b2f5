"""Resuming an encoder fine-tuning run: the state after an epoch, or after the last completed
step when Ctrl-C or SIGTERM stops the run, kept in `OUT/resume/` and read by `--resume`.

`resume/` holds `model.safetensors` (every weight, head included), `trainer_state.pt` (the
optimizer's and the schedule's state and torch's random state: tensors and plain values,
loaded with `weights_only=True`) and `state.json` (the spec, the micro-batch budget, where the
run stands: epoch, steps done in it, the global step, the best epoch and metric so far, the
epoch log and the losses of the epoch's steps done). It is written atomically, replaced after
every epoch and removed when the run finishes. The example order is a function of the seed and
the epoch (`batches.epoch_plan`), so a run resumed from a step goes on with the same steps and,
on the same device, the same weights as a run never stopped.

An interrupt reads the losses of the epoch's steps before it saves: a run that diverged since
the last epoch saves nothing (the state of the epoch before stays).
"""
from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError
from trainers.encoders.model_files import read_tagged_json
from trainers.finetuning.interrupts import deferred_interrupts

RESUME_FOLDER = "resume"
STATE_FILE = "state.json"
WEIGHTS_FILE = "model.safetensors"
TRAINER_FILE = "trainer_state.pt"
STATE_FORMAT = "sumbench-encoder-resume"


@dataclass
class Position:
    """Where a run stands: `steps_done` optimizer steps of `epoch` (0-based) applied."""
    epoch: int = 0
    steps_done: int = 0
    global_step: int = 0
    best_epoch: int | None = None
    best_metric: float | None = None
    log: list[dict] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)


def _state_json(identity: dict, position: Position) -> dict:
    return {"format": STATE_FORMAT, "version": 1, "identity": identity, "epoch": position.epoch,
            "steps_done": position.steps_done, "global_step": position.global_step,
            "best_epoch": position.best_epoch, "best_metric": position.best_metric,
            "log": position.log, "epoch_losses": position.epoch_losses}


def random_state() -> dict:
    """torch's random state now (CPU, and CUDA where in use): what dropout draws next."""
    import torch

    state = {"rng_cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["rng_cuda"] = torch.cuda.get_rng_state_all()
    return state


def save_resume_state(out_dir: Path, model, optimizer, scheduler, identity: dict,
                      position: Position, random: dict) -> Path:
    """Write `out_dir/resume/` (atomically: an interrupted save leaves the earlier one);
    `identity` is what a resumed run must share with this one (`run_identity`), `random` the
    random state after the last whole step (`random_state`)."""
    import torch
    from safetensors.torch import save_file

    trainer = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
               **random}
    with atomic_directory(out_dir / RESUME_FOLDER) as staging:
        weights = {key: value.detach().contiguous().cpu()
                   for key, value in model.state_dict().items()}
        save_file(weights, str(staging / WEIGHTS_FILE))
        torch.save(trainer, staging / TRAINER_FILE)
        (staging / STATE_FILE).write_text(
            json.dumps(_state_json(identity, position), indent=1) + "\n",
            encoding="utf-8")
    return out_dir / RESUME_FOLDER


def run_identity(spec_dict: dict, budget: int | None, examples: int) -> dict:
    """What a resumed run must share with the saved one: the spec, the micro-batch budget
    (the steps' micro-batches) and the number of training examples."""
    return {"spec": spec_dict, "tokens_per_microbatch": budget, "examples": examples}


def read_resume_state(out_dir: Path, identity: dict) -> dict | None:
    """The `state.json` of `out_dir/resume/`, or None when there is none; the state of a run
    with another `identity` is refused in one line naming what differs (it would not
    continue the same run)."""
    path = out_dir / RESUME_FOLDER / STATE_FILE
    if not path.is_file():
        return None
    state = read_tagged_json(path, STATE_FORMAT)
    saved = state.get("identity") if isinstance(state.get("identity"), dict) else {}
    differing = _differing(saved, identity)
    if differing:
        name, before, now = differing[0]
        raise SumbenchError(f"{path} is the state of a training with another {name} ({before!r}, "
                            f"now {now!r}); resume with the same settings and data, or choose "
                            f"another output folder")
    return state


def _differing(saved: dict, identity: dict) -> list[tuple[str, Any, Any]]:
    """(name, saved, now) of every identity entry that differs (spec fields by name)."""
    found = []
    for name, now in identity.items():
        before = saved.get(name)
        if isinstance(now, dict) and isinstance(before, dict):
            found += [(f"{field_name} in the spec", before.get(field_name), now.get(field_name))
                      for field_name in sorted(set(now) | set(before))
                      if before.get(field_name) != now.get(field_name)]
        elif before != now:
            found.append((name.replace("_", " "), before, now))
    return found


def position_of(state: dict) -> Position:
    return Position(int(state["epoch"]), int(state["steps_done"]), int(state["global_step"]),
                    state["best_epoch"], state["best_metric"], list(state["log"]),
                    [float(value) for value in state["epoch_losses"]])


def restore(out_dir: Path, model, optimizer, scheduler) -> None:
    """Load the saved weights, optimizer, schedule and random state into the live objects."""
    import torch
    from safetensors.torch import load_file

    folder = out_dir / RESUME_FOLDER
    try:
        weights = load_file(str(folder / WEIGHTS_FILE))
        trainer = torch.load(folder / TRAINER_FILE, weights_only=True, map_location="cpu")
        model.load_state_dict(weights, strict=True)
    except (OSError, RuntimeError, ValueError) as error:
        raise SumbenchError(f"cannot resume from {folder}: {error}") from None
    optimizer.load_state_dict(trainer["optimizer"])
    scheduler.load_state_dict(trainer["scheduler"])
    torch.set_rng_state(trainer["rng_cpu"])
    if "rng_cuda" in trainer and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(trainer["rng_cuda"])


def remove_resume_state(out_dir: Path) -> None:
    import shutil

    shutil.rmtree(out_dir / RESUME_FOLDER, ignore_errors=True)


class InterruptSave:
    """Around the epochs: on KeyboardInterrupt (SIGTERM as `Terminated` included) save the
    state after the last completed step, unless it is saved already or its losses are not
    finite; say so on stderr and let the interrupt go on. `applying()` holds the signals
    while a step is applied, so the saved state is always a whole step's."""

    def __init__(self, save, position: Position):
        self.save, self.position = save, position
        self.saved = (position.epoch, position.steps_done)
        self.whole = True
        self.unread: list[Any] = []     # the epoch's step losses not yet read (tensors)

    @contextlib.contextmanager
    def applying(self) -> Iterator[None]:
        with deferred_interrupts():
            self.whole = False
            yield
            self.whole = True

    def mark_saved(self) -> None:
        self.saved = (self.position.epoch, self.position.steps_done)

    def __enter__(self) -> InterruptSave:
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        if kind is None or not issubclass(kind, KeyboardInterrupt):
            return False
        where = f"epoch {self.position.epoch + 1}, step {self.position.global_step}"
        if not self.whole:
            return _tell("interrupted twice while a step was being applied: not saved")
        if (self.position.epoch, self.position.steps_done) == self.saved:
            return _tell(f"interrupted at {where}: nothing new to save")
        losses = self.position.epoch_losses + [float(loss) for loss in self.unread]
        if not all(math.isfinite(loss) for loss in losses):
            return _tell(f"interrupted at {where}: the loss since the last save is not finite, "
                         f"so the weights are not saved (lower the learning rate)")
        self.position.epoch_losses, self.unread = losses, []
        try:
            path = self.save()
        except OSError as error:
            return _tell(f"interrupted at {where}: the state could not be saved ({error})")
        return _tell(f"interrupted at {where}: state saved in {path}; run the same command "
                     f"with --resume to continue from it")


def _tell(message: str) -> bool:
    print(f"training {message}", file=sys.stderr, flush=True)
    return False
