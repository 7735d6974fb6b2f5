"""A torch.profiler summary of sumbench's training steps, for the GPU training row: the top
kernels by device time and the shares of attention, matrix multiplications, the optimizer,
copies and the host's batch collation (`sumbench.collate`, host time)."""
from __future__ import annotations

import contextlib
import re
from typing import Any

CATEGORIES = (("attention", re.compile(r"fmha|attention|flash|sdpa|softmax", re.I)),
              ("matmul", re.compile(r"gemm|matmul|cutlass|xmma|cublas|\bmm\b|addmm|bmm|sm90",
                                    re.I)),
              ("optimizer", re.compile(r"adam|multi_tensor|foreach", re.I)),
              ("copies", re.compile(r"memcpy|memset|copy_|pin_memory", re.I)))


#: profiled optimizer steps: the last two of a run, after one that warms the profiler up
ACTIVE, WARMUP = 2, 1


def profiled_steps(steps: int) -> list[int]:
    """The (1-based) optimizer steps the profiler runs in (warm-up included): they are not
    timed. Runs shorter than five steps are not profiled."""
    return list(range(steps - ACTIVE - WARMUP + 1, steps + 1)) if steps >= 5 else []


@contextlib.contextmanager
def profiled(loop: Any, device: str, steps: int, enabled: bool = True):
    """Profile the last steps of `loop.finetune` (`profiled_steps`); yields the profiler
    (None when off)."""
    if not enabled or not profiled_steps(steps):
        yield None
        return
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device != "cpu" else [])
    original = loop._apply_step
    wait = steps - ACTIVE - WARMUP
    with profile(activities=activities,
                 schedule=schedule(wait=wait, warmup=WARMUP, active=ACTIVE)) as prof:
        def stepped(run):
            original(run)
            prof.step()
        loop._apply_step = stepped
        try:
            yield prof
        finally:
            loop._apply_step = original


def profile_summary(prof: Any, top: int = 12) -> dict:
    """{"top_kernels": [[name, ms, share]], "shares": {category: share}, "collate_host_ms"}."""
    from torch.autograd import DeviceType

    events = prof.key_averages()
    device = [e for e in events if e.device_type == DeviceType.CUDA]
    timed = device or [e for e in events if e.key.startswith("aten::")]

    def spent(event):
        return (event.self_device_time_total if device else event.self_cpu_time_total) / 1e3
    total = sum(spent(e) for e in timed) or 1.0
    ranked = sorted(timed, key=spent, reverse=True)
    shares = {name: 0.0 for name, _ in CATEGORIES} | {"other": 0.0}
    for event in timed:
        category = next((name for name, pattern in CATEGORIES if pattern.search(event.key)),
                        "other")
        shares[category] += spent(event) / total
    collate = sum(e.cpu_time_total for e in events if e.key == "sumbench.collate") / 1e3
    return {"top_kernels": [[e.key[:120], round(spent(e), 2), round(spent(e) / total, 4)]
                            for e in ranked[:top]],
            "shares": {name: round(share, 4) for name, share in shares.items()},
            "device_ms": round(total, 2), "collate_host_ms": round(collate, 2),
            "timed_on": "device kernels" if device else "CPU operators"}
