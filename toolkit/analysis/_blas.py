"""Matrix products whose sums do not depend on the machine's cores: BLAS splits a large product among its
threads, and how it splits changes the order of some additions, so an interval's last digit moved between a
2-core and a 4-core machine for the same seed. One BLAS thread (through threadpoolctl, whichever BLAS numpy
loaded) keeps each sum in the kernel's own order; small products lose nothing by it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np


@lru_cache(maxsize=1)
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController  # after numpy: it finds the BLAS numpy loaded

    return ThreadpoolController()


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` computed by one BLAS thread (the same bits on every machine with the same BLAS kernel)."""
    with _controller().limit(limits=1, user_api="blas"):
        return a @ b
