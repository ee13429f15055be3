"""How the command line shows what the library reports through `logging`: each message alone
on stderr, notices (INFO) included. The handler writes to the stderr of the moment, so a
redirected or captured stream gets the messages. A user of `Engine` configures the
`graphrag_engine` logger as they wish instead (warnings reach stderr by default, notices not)."""

from __future__ import annotations

import logging
import sys

LOGGER = "graphrag_engine"


class StderrHandler(logging.Handler):
    """Writes each record's message to `sys.stderr` as it is when the record comes."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 (logging's own contract: report, never raise)
            self.handleError(record)


def show_library_messages() -> None:
    """Show the library's warnings and notices on stderr (once per process)."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(h, StderrHandler) for h in logger.handlers):
        logger.addHandler(StderrHandler())
    logger.setLevel(logging.INFO)
