"""The memory free for the package's work: what training and the numeral scoring of the numeracy
evaluation check their requests against before allocating."""

from __future__ import annotations


def available_memory(gpu: bool) -> tuple[int, str] | None:
    """Bytes free and what they are: the GPU's free memory (``gpu``), else the system's
    ``MemAvailable`` (``/proc/meminfo``, or ``psutil``); None where it cannot be read."""
    if gpu:
        import torch

        return torch.cuda.mem_get_info()[0], "GPU memory free"
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "memory available"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return psutil.virtual_memory().available, "memory available"


__all__ = ["available_memory"]
