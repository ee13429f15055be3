"""How a command ends: each kind of failure as one line on stderr and a documented exit code.

| exit | when |
| --- | --- |
| 0 | done |
| 1 | an internal error (a bug): `GRAPHRAG_DEBUG=1` shows the traceback |
| 2 | bad input: a file, record, config or argument, named with what to do |
| 3 | `query`: some answers failed after every retry (recorded; the same command asks again) |
| 4 | an LLM stage's share of invalid answers is over `models.llm.max_failed_share`; nothing committed |
| 69 | the LLM (a server or a local model) failed a call after every retry: down, timing out, HTTP 5xx; nothing committed, the same command resumes |
| 74 | the device is full, over quota, read-only or not writable for this user while writing; nothing committed was lost |
| 75 | another process holds the index (`reindex`) |
| 130 | interrupted (Ctrl-C) |
| 141 | standard output closed by its reader (piped into `head`); nothing else is affected |
| 143 | terminated (SIGTERM); what was being written was dropped |
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable

from graphrag_engine.errors import GraphRAGError, Terminated


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


BROKEN_PIPE_EXIT = 141
"""Exit code when stdout's reader closed it (128 + SIGPIPE, as a shell reports it)."""
STORAGE_EXIT = 74
"""Exit code of a write that found the device full, over quota, read-only or closed to this
user (sysexits' EX_IOERR)."""
_STORAGE = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted (an immutable file or folder?)",
}
_STORAGE_TEXT = {  # libraries that report it without an errno (pyarrow, SQLite)
    "no space left on device": errno.ENOSPC,
    "disk is full": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT,
    "read-only file system": errno.EROFS,
    "readonly database": errno.EROFS,
}


def _storage_full(exc: BaseException) -> str | None:
    """What is wrong with the storage when `exc` (or an error it was raised from) is a full
    device, a used-up quota or a read-only file system; None for any other error."""
    seen = 0
    while exc is not None and seen < 8:
        code = getattr(exc, "errno", None)
        if code in _STORAGE:
            return _STORAGE[code]
        text = str(exc).lower()
        for words, code in _STORAGE_TEXT.items():
            if words in text:
                return _STORAGE[code]
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _internal_error(exc: BaseException) -> int:
    """One line for the user (the traceback with GRAPHRAG_DEBUG=1); exit 1."""
    if os.environ.get("GRAPHRAG_DEBUG"):
        raise exc
    print(
        f"graphrag-engine: internal error: {type(exc).__name__}: {exc} "
        "(set GRAPHRAG_DEBUG=1 for the traceback)",
        file=sys.stderr,
    )
    return 1


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run one command and turn what can go wrong into one line on stderr and an exit code:
    the engine's own errors (their code: 2 for bad input), SIGTERM (143) and Ctrl-C (130),
    a full, over-quota or read-only device (74), anything else (1, the traceback with
    GRAPHRAG_DEBUG=1). SIGTERM unwinds like Ctrl-C for the command's length."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if on_main_thread else None
    try:
        code = func(args)
        sys.stdout.flush()  # a reader that went away shows here when the output was buffered
        return code
    except GraphRAGError as exc:
        print(f"graphrag-engine: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print(
            "graphrag-engine: terminated (SIGTERM); what was being written was dropped and "
            "everything committed was left as it was",
            file=sys.stderr,
        )
        return 143
    except KeyboardInterrupt:
        print("graphrag-engine: interrupted; the index was left as it was", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (`| head`): no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except (OSError, sqlite3.OperationalError) as exc:
        why = _storage_full(exc)
        if why is None:
            return _internal_error(exc)
        where = getattr(exc, "filename", None) or getattr(args, "out", None) or "the output"
        print(
            f"graphrag-engine: error: {why} while writing {where}; what was being written was "
            "dropped and nothing committed was lost: make room (or a writable place) and run "
            "the same command again",
            file=sys.stderr,
        )
        return STORAGE_EXIT
    except Exception as exc:  # one line for the user, the traceback on request
        return _internal_error(exc)
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)
