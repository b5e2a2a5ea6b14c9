"""Paths the tests share. Import these from here, not from `conftest` (several conftest modules
exist, and which one `import conftest` finds depends on collection order)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED_ASSETS = REPO.parent / "shared" / "assets"
if not SHARED_ASSETS.is_dir() and (REPO / ".assets").is_dir():  # on the GPU machine: scripts/gpu_prepare's copy
    SHARED_ASSETS = REPO / ".assets"
