"""Where the tests find their reference data: the one place that knows.

Two sources, both genuine output of Apache MXNet 1.9.1:
- `tests/data/` (committed): the seed examples (the API contract, `seed_examples.json`), the
  small exported models `mlp`, `lenet` and `matfact` and the graphs (JSON only) of `resnet18_v1`
  and `mobilenet1.0` (`tests/data/models/`). Always present, so a bare clone runs every test that
  uses them.
- the shared directory: `$SYMJIT_SHARED_DIR` when set, else `shared/` beside the repository
  (`<repository>/../shared`, where CI keeps it). It holds the large models' weights, inputs and
  outputs (`resnet18_v1`, `mobilenet1.0`), their ONNX exports and the mlp's training trace. Tests that need it skip with
  a stated reason when it is absent; `test_shared_data.py` checks that the committed copies equal
  the shared originals whenever both exist.

Paths are always found relative to this file (or the environment variable), never absolute.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
#: the committed small models (MXNet's exports, byte for byte)
SMALL_MODELS = DATA / "models"
#: the committed copy of the shared spec's seed examples
SEED_EXAMPLES = DATA / "seed_examples.json"
ENV = "SYMJIT_SHARED_DIR"


def shared_dir() -> Path:
    """The shared directory's location (it may not exist): $SYMJIT_SHARED_DIR, else ../shared."""
    env = os.environ.get(ENV, "").strip()
    return Path(env).expanduser().resolve() if env else REPO.parent / "shared"


def shared_path(relative: str) -> Path | None:
    """`relative` inside the shared directory, or None when it (or the directory) is absent."""
    path = shared_dir() / relative
    return path if path.exists() else None


def missing_reason(relative: str) -> str:
    """The skip reason of a test that needs `relative` from the shared directory."""
    return (f"needs {relative} from the shared reference data, not found in {shared_dir()} "
            f"(set {ENV} or place the shared directory beside the repository)")


def model_path(filename: str) -> Path:
    """A reference model file (`mlp-symbol.json`, `resnet18_v1-0000.params`, ...): the committed
    copy when there is one, else the shared directory's; skips the calling test when neither
    exists. Call it inside a test or fixture, never at import time."""
    small = SMALL_MODELS / filename
    if small.is_file():
        return small
    shared = shared_path(f"models/{filename}")
    if shared is None:
        pytest.skip(missing_reason(f"models/{filename}"))
    return shared


def have_model(name: str) -> bool:
    """Whether model `name`'s graph and weights can be found (committed or shared)."""
    return all((SMALL_MODELS / f).is_file() or shared_path(f"models/{f}") is not None
               for f in (f"{name}-symbol.json", f"{name}-0000.params"))


def needs_shared(relative: str):
    """A skipif mark for tests (or, as `pytestmark`, whole files) that need `relative` from the
    shared directory."""
    return pytest.mark.skipif(shared_path(relative) is None, reason=missing_reason(relative))
