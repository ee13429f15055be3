"""Skip marker for tests that need a CUDA GPU (GPU paths are not exercised in CI)."""

from __future__ import annotations

import pytest


def cuda_available() -> bool:
    """Whether torch sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU")
