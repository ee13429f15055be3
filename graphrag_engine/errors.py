"""The one exception family of the engine: every message says what was wrong and what to do."""

from __future__ import annotations


class GraphRAGError(Exception):
    """Base class of every error the engine raises on purpose."""

    exit_code = 1


class BadInputError(GraphRAGError):
    """Input the user can fix (a corpus line, a config key, a path); the CLI exits with 2."""

    exit_code = 2


class ConfigError(BadInputError):
    """A configuration file or value that is unknown, mistyped or out of range."""


class IngestError(BadInputError):
    """A corpus record that cannot be read; the message starts with `file:line:`."""


class IndexFormatError(BadInputError):
    """An index directory that is missing, damaged or from an incompatible version."""


class NotYetAvailableError(GraphRAGError):
    """A subcommand or stage that a later release fills in."""

    exit_code = 2


class BusyError(GraphRAGError):
    """Another process holds the lock of the work asked for (a scheduled re-index already
    running); the CLI exits with 75 (EX_TEMPFAIL): try again at the next slot."""

    exit_code = 75


class WorkersLostError(GraphRAGError):
    """Every Ray worker of a run was lost with its process or node; what finished is kept and
    the same command resumes; the CLI exits with 75 (EX_TEMPFAIL): try again later."""

    exit_code = 75


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it unwinds as on Ctrl-C: staged files
    are dropped, caches closed, nothing committed is touched."""


class StageFailedError(GraphRAGError):
    """An LLM stage whose answers failed after every re-ask beyond the configured share
    (models.llm.max_failed_share): the command stops and commits nothing."""

    exit_code = 4
