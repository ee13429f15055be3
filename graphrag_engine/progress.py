"""Progress bars for long stages: items done, rate and ETA on stderr."""

from __future__ import annotations

import functools
import os
import sys
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
