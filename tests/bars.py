"""Watching a module's progress bars in tests: every position a bar is drawn at."""

from __future__ import annotations

from types import ModuleType


def watch_bar_positions(module: ModuleType, monkeypatch) -> list[float]:
    """Make the `progress` bars that `module` creates record their position at every update;
    returns the list they append to (the real bars still draw)."""
    positions: list[float] = []
    real = module.progress

    def watched_bar(*args, **kwargs):
        bar = real(*args, **kwargs)
        update = bar.update
        bar.update = lambda n=1: (positions.append(bar.n), update(n))[1]
        return bar

    monkeypatch.setattr(module, "progress", watched_bar)
    return positions
