"""`python -m graphrag_engine.cli`: the same command line as `graphrag-engine`."""

import sys

from graphrag_engine.cli.commands import main

sys.exit(main())
