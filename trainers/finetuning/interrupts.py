"""Ctrl-C and SIGTERM during fine-tuning: a checkpoint of the last completed step, then stop.

The loop computes a step's gradients (or an evaluation's value) with signals delivered as
usual: an interrupt there leaves the weights, optimizer, scheduler and loop state as the
previous step left them (dropout seeds are per step and the data position is the step count,
so there is no other state). Applying a step, and recording an evaluation, run inside
`InterruptCheckpoint.committing()`, which holds the signals until the state is whole again.
`InterruptCheckpoint` then saves that state as a checkpoint (atomically: a second interrupt
during the save leaves the earlier checkpoints as they were), prints where it went and how to
resume, and lets the interrupt go on, so the command still exits 130 (143 for SIGTERM).
"""
from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from trainers.finetuning.checkpoints import latest_checkpoint, save_checkpoint
from trainers.finetuning.training_run import TrainingRun

#: the signals that stop a run as KeyboardInterrupt (SIGTERM where the command line makes it
#: raise `benchmark.cli.Terminated`)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while inside; the held signal's handler runs on leaving. A
    second signal runs its handler at once (a stuck step can still be stopped). Only signals
    whose handler is a Python function (one that raises) are held, in the main thread only
    (signals go there); when the body raises, a held signal is dropped for its exception."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    held = [signum for signum, handler in previous.items() if callable(handler)]
    pending: list[int] = []

    def hold(signum, frame):
        if pending:
            previous[signum](signum, frame)
        pending.append(signum)

    for signum in held:
        signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum in held:
            signal.signal(signum, previous[signum])
    if pending:
        previous[pending[0]](pending[0], None)


class InterruptCheckpoint:
    """Around the training loop: on KeyboardInterrupt (Terminated included) save a checkpoint
    of the last completed step unless the folder already holds it, say so on stderr, and
    re-raise. Nothing is saved when a second signal broke into a step being applied."""

    def __init__(self, run: TrainingRun):
        self.run = run
        self.whole = True
        self.saved = self._position()    # what the folder holds: the checkpoint resumed from
        #: this process's summed loss since it was last read (the loop's StepLog), checked
        #: before an interrupt saves: a run that diverged since then saves nothing
        self.unread_loss: Callable[[], float] | None = None

    def _position(self) -> tuple[int, bool]:
        return self.run.state.global_step, self.run.state.evaluation_due

    @contextlib.contextmanager
    def committing(self) -> Iterator[None]:
        """Apply a step or record an evaluation with interrupts held until it is done."""
        with deferred_interrupts():
            self.whole = False
            yield
            self.whole = True

    def save(self, barrier: bool = True) -> Path:
        path = save_checkpoint(self.run, barrier=barrier)
        self.saved = self._position()
        return path

    def __enter__(self) -> InterruptCheckpoint:
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        if kind is None or not issubclass(kind, KeyboardInterrupt):
            return False
        step = self.run.state.global_step
        if not self.whole:
            self._tell("interrupted twice while a step was being applied: not saved")
        elif self._position() == self.saved:
            self._tell(f"interrupted at step {step}: nothing new to save")
        elif self.unread_loss is not None and not math.isfinite(self.unread_loss()):
            self._tell(f"interrupted after step {step}: the loss since the last read is "
                       f"{self.unread_loss()}, so the weights are not saved (the earlier "
                       f"checkpoints are intact; lower the learning rate)")
        else:
            try:       # only this process writes: the others may be stopped anywhere
                path = self.save(barrier=False)
            except KeyboardInterrupt:
                self._tell(f"interrupted again while saving step {step}: not saved (the "
                           "earlier checkpoints are intact)")
                raise
            except OSError as error:    # a full disk: still stop as interrupted
                self._tell(f"interrupted after step {step}: the checkpoint could not be "
                           f"saved ({error})")
                return False
            self._tell(f"interrupted after step {step}: checkpoint saved in {path}", path)
        return False

    def _tell(self, what: str, saved: Path | None = None) -> None:
        """One line on stderr (process 0): what was saved and what --resume continues from."""
        if not self.run.dist.is_main:
            return
        start = saved or latest_checkpoint(self.run.out_dir)
        how = "continue from it" if saved else \
            f"continue from {start}" if start else "start again from step 0"
        print(f"training {what}; run the same command with --resume to {how}",
              file=sys.stderr, flush=True)
