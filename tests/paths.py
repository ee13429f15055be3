"""Where the tests find the repository and the real evaluation data, whichever tier they are in."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
