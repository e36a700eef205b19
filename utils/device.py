"""Device selection and seeding, shared by every chapter."""

from __future__ import annotations

import random

import torch


def get_device(prefer: str | torch.device | None = None) -> torch.device:
    """Pick the device the course runs on: CUDA if available, then Apple's MPS, else the CPU.

    Args:
        prefer: a device to use instead of the automatic choice (``"cpu"``, ``"cuda"``, ``"cuda:1"``,
            ``"mps"``). Default: ``None`` (automatic).

    Returns:
        A ``torch.device``.

    Raises:
        ValueError: ``prefer`` names a device that is not available here.

    >>> get_device("cpu")
    device(type='cpu')
    """
    if prefer is not None:
        device = torch.device(prefer)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"prefer={str(prefer)!r}: CUDA is not available on this machine")
        if device.type == "mps" and not _mps_available():
            raise ValueError(f"prefer={str(prefer)!r}: MPS is not available on this machine")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python's ``random`` and torch (CPU and CUDA), and return a fresh CPU generator.

    Args:
        seed: the seed. Default: ``0``.

    >>> g = seed_everything(0)
    >>> a = torch.rand(2)
    >>> _ = seed_everything(0)
    >>> torch.equal(a, torch.rand(2))
    True
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator
