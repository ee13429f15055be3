"""What a query run holds, kept out of the way of Python's cycle collector.

A run holds the index's tables and the structures derived from them (hundreds of thousands of
Python objects for a few thousand passages), and its questions allocate many more. Each full
collection that those allocations set off walks every object alive, so its cost grows with the
index, and a pass of questions where one falls is slower for it (docs/throughput.md).

`SettledHeap` runs one full collection after a run's first batch (by then the run has built
what it keeps), then freezes every object alive (`gc.freeze`): later collections skip them.
The run's end unfreezes them, so what they turn into garbage afterwards is collected as usual.
"""

from __future__ import annotations

import gc


class SettledHeap:
    """A run's objects frozen for the collector from its first settled batch to its end."""

    def __init__(self) -> None:
        self.frozen = False

    def settle(self) -> None:
        """After a batch: the first time, collect once and freeze every object alive."""
        if not self.frozen:
            gc.collect()
            gc.freeze()
            self.frozen = True

    def __enter__(self) -> SettledHeap:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
