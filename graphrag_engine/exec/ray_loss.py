"""What a driver does when one of its Ray workers is lost with its process or node: start a
new one only where the cluster has room for it now (a lost node's GPU may exist nowhere else,
and a worker Ray restarted there would wait for it forever), and say so in one line."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from graphrag_engine.errors import WorkersLostError

log = logging.getLogger(__name__)

START_WAIT_S = 60.0
"""How long a new worker may take to start before the work goes on without it."""


def replace_lost(
    ray: Any, actors: list[Any], lost: Any, start: Callable[[], Any], gpus: float, kind: str,
    exc: Exception,
) -> None:  # fmt: skip
    """Drop `lost` from `actors` (nothing when an earlier answer of its already did), start a
    new one from `start()` where the cluster has room, and say so (see `say_lost`)."""
    if lost not in actors:
        return
    actors.remove(lost)
    new = start_where_room(ray, start, gpus)
    if new is not None:
        actors.append(new)
    say_lost(kind, exc, len(actors), new is not None)


def start_where_room(ray: Any, start: Callable[[], Any], gpus: float) -> Any | None:
    """A new worker from `start()` when the cluster has a CPU and `gpus` GPUs free and the
    worker answers within START_WAIT_S; None otherwise (its start abandoned)."""
    free = ray.available_resources()
    if free.get("CPU", 0) < 1 or free.get("GPU", 0) < gpus:
        return None
    new = start()
    try:
        ray.get(new.__ray_ready__.remote(), timeout=START_WAIT_S)
    except Exception:  # noqa: BLE001 - whatever stops it, the work goes on without it
        ray.kill(new)
        return None
    return new


def say_lost(kind: str, exc: Exception, left: int, replaced: bool) -> None:
    """One line on a lost worker; WorkersLostError (exit 75) when none is left."""
    text = str(exc).strip()
    cause = text.splitlines()[0][:120] if text else type(exc).__name__
    log.warning(
        f"warning: a Ray {kind} worker was lost ({cause}); its work goes to the {left} "
        "worker(s) left" + (", one of them new" if replaced else "")
    )
    if not left:
        raise WorkersLostError(
            f"every Ray {kind} worker was lost; what was finished is kept: run the same "
            "command again to resume"
        )
