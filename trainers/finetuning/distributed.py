"""Process groups for the fine-tuning runner: `torch.distributed` directly (DDP; NCCL on GPUs,
gloo on CPUs), so the same command runs under `torchrun` and `accelerate launch`.

A single process (no launcher) is a world of one: every collective is then a no-op and the
model is not wrapped, so `torch.distributed` is never initialised.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.inference.predict_spec import device_index_ok


@dataclass
class Distributed:
    """This process's place in a `torchrun` / `accelerate launch` job (world 1 when alone)."""

    rank: int
    world_size: int
    device: Any
    owns_group: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed
            torch.distributed.barrier()

    def sum(self, value: float) -> float:
        if self.world_size == 1:
            return value
        import torch
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(tensor)
        return float(tensor.item())

    def broadcast(self, value: Any) -> Any:
        """Process 0's value, on every process."""
        if self.world_size == 1:
            return value
        import torch.distributed
        holder = [value]
        torch.distributed.broadcast_object_list(holder, src=0)
        return holder[0]

    def wrap(self, model):
        if self.world_size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(
            model, device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def no_sync(self, wrapped):
        return wrapped.no_sync() if self.world_size > 1 else contextlib.nullcontext()

    def rng_devices(self) -> list[int]:
        """Every CUDA device `torch.manual_seed` reseeds (so fork_rng restores them all)."""
        import torch

        return list(range(torch.cuda.device_count())) if self.device.type == "cuda" else []

    def close(self) -> None:
        if self.owns_group:
            import torch.distributed
            torch.distributed.destroy_process_group()


CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"


@contextlib.contextmanager
def deterministic_algorithms(enabled: bool, device):
    """Within the block, torch uses deterministic kernels when `enabled`, and an operation that
    has none is an error naming the way out (deterministic=false); the setting before the block
    is restored after it. Warnings alone would not do: on GPUs the attention backward passes
    (memory-efficient, cuDNN) stay non-deterministic unless torch is told to fail otherwise.
    cuBLAS also needs a fixed workspace: CUBLAS_WORKSPACE_CONFIG is set for the block unless
    the environment already chose one."""
    import os

    import torch

    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    workspace = os.environ.get(CUBLAS_WORKSPACE)
    if enabled and getattr(device, "type", device) == "cuda" and workspace is None:
        os.environ[CUBLAS_WORKSPACE] = ":4096:8"
    torch.use_deterministic_algorithms(enabled)
    try:
        yield
    except RuntimeError as error:
        if enabled and "deterministic" in str(error):
            raise SumbenchError(f"{error}\n{_deterministic_advice(str(error), device)}") \
                from error
        raise
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        if workspace is None:
            os.environ.pop(CUBLAS_WORKSPACE, None)


def _deterministic_advice(message: str, device) -> str:
    if CUBLAS_WORKSPACE in message:
        return (f"The environment sets {CUBLAS_WORKSPACE} to a value that is not "
                f"deterministic; unset it (sumbench then uses :4096:8), or train with "
                f"deterministic=false (--set deterministic=false)")
    return (f"This training needs an operation that has no deterministic kernel on {device}: "
            f"train with deterministic=false (--set deterministic=false); a resumed run may "
            f"then differ from an uninterrupted one in the last bits")


def init_distributed(device: str = "auto") -> Distributed:
    """Join the process group that torchrun / accelerate launch describe in the environment;
    `device` as `training_device` takes it."""
    import os

    import torch
    import torch.distributed

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    placed = training_device(device, local_rank, world_size)
    if placed.type == "cuda":
        torch.cuda.set_device(placed)
    owns = False
    if world_size > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if placed.type == "cuda" else "gloo")
        owns = True
    rank = torch.distributed.get_rank() if world_size > 1 else 0
    return Distributed(rank, world_size, placed, owns)


def check_training_device_name(name: object, world_size: int = 1) -> None:
    """Refuse what is not auto, cpu, cuda or (one process) cuda:N, without importing torch."""
    ok = isinstance(name, str) and (name in ("auto", "cpu", "cuda") or (
        name.startswith("cuda:") and device_index_ok(name[5:]) and world_size == 1))
    if not ok:
        raise SumbenchError(f"training device must be auto, cpu, cuda or (one process) cuda:N; "
                            f"got {name!r}")


def training_device(name: str, local_rank: int = 0, world_size: int = 1):
    """"auto": this process's GPU (the one of its LOCAL_RANK) when torch sees GPUs, else the
    CPU; "cpu"; "cuda" (that GPU, an error without one); "cuda:N" (one process only)."""
    import torch

    check_training_device_name(name, world_size)
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    chosen = name.startswith("cuda:")
    if not torch.cuda.is_available():
        raise SumbenchError(f"training device {name!r} was asked for but torch sees no CUDA GPU")
    count = torch.cuda.device_count()
    index = int(name[5:]) if chosen else local_rank
    if index < count:
        return torch.device("cuda", index)
    if chosen:
        raise SumbenchError(f"training device {name!r}: torch sees {count} GPU(s)")
    raise SumbenchError(
        f"process {local_rank} of this node has no GPU ({count} visible): start at most "
        f"{count} processes per node (torchrun --nproc_per_node {count}), or train on CPUs "
        f"(device cpu)")
