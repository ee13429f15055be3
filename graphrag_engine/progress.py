"""Progress bars for long stages: items done, rate and ETA on stderr."""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any

from tqdm import tqdm


def progress(desc: str, total: float | None = None, unit: str = "it", **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr; quiet when GRAPHRAG_PROGRESS=0, sparse when stderr is not a TTY."""
    tty = sys.stderr.isatty()
    return tqdm(
        desc=desc,
        total=total,
        unit=unit,
        file=sys.stderr,
        mininterval=0.2 if tty else 5.0,
        disable=os.environ.get("GRAPHRAG_PROGRESS", "1") == "0",
        dynamic_ncols=tty,
        **kwargs,
    )


def move_bar(bar: tqdm, position: float) -> None:
    """Set a bar to `position` items done (tenths of an item: answers of a forward pass move
    it step by step, without float drift) and redraw it, at most once per its interval."""
    bar.n = round(position, 1)
    bar.update(0)


def silence_library_bars() -> None:
    """Turn off transformers' unlabelled bars (weight loading, downloads, the GGUF tensor
    conversion, which ignores transformers' own switch): the engine's own labelled bars say
    what is happening."""
    from transformers.utils import logging as hf_logging  # loaded with the model that needs it

    hf_logging.disable_progress_bar()
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_loading
    except ImportError:  # a transformers without GGUF support has no such bar
        return
    gguf_loading.tqdm = functools.partial(tqdm, disable=True)


BLOCK_SECONDS = 2.0
"""About how long one model call on a block of texts should take: a stage's bar moves at least
that often, whatever the machine's speed or load."""


class BlockSizer:
    """How many texts the next model call of a stage takes: `first` to begin with, then as many
    as the rate measured so far (texts done over wall seconds, across `workers` parallel
    callers) does in about BLOCK_SECONDS, growing at most fourfold a block, never over `most`."""

    def __init__(self, most: int, first: int = 16, workers: int = 1) -> None:
        self.most, self.workers = max(1, most), max(1, workers)
        self.last = min(max(1, first), self.most)
        self.done = 0
        self._started: float | None = None

    def size(self) -> int:
        """Texts for the next block (the clock starts at the first ask)."""
        if self._started is None:
            self._started = time.perf_counter()
        if self.done == 0:
            return self.last
        seconds = max(time.perf_counter() - self._started, 1e-6)
        per_worker = self.done / seconds / self.workers
        fit = int(per_worker * BLOCK_SECONDS)
        self.last = max(1, min(fit, 4 * self.last, self.most))
        return self.last

    def finished(self, texts: int) -> None:
        """Count `texts` done (a block came back)."""
        self.done += texts
