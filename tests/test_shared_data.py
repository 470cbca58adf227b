"""The committed reference data (tests/data) is a faithful copy of the shared reference data, and
tests find both through `shared_data` alone."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import shared_data
from shared_data import DATA, SEED_EXAMPLES, SMALL_MODELS

COMMITTED = sorted(p.relative_to(DATA).as_posix() for p in [SEED_EXAMPLES, *SMALL_MODELS.iterdir()])


def _shared_original(relative: str) -> str:
    """tests/data's `seed_examples.json` is the shared spec's; `models/X` the shared models' X."""
    return "spec/seed_examples.json" if relative == "seed_examples.json" else relative


def test_committed_data_is_complete():
    names = {Path(r).name for r in COMMITTED}
    for model in ("mlp", "lenet"):
        assert {f"{model}-symbol.json", f"{model}-0000.params", f"{model}-input.npy", f"{model}-output.npy"} <= names
    assert "matfact-symbol.json" in names
    examples = json.loads(SEED_EXAMPLES.read_text())
    assert len(examples) > 100 and {"id", "code", "mxnet_1_9_1_output", "mxnet_1_9_1_status"} <= set(examples[0])


@pytest.mark.parametrize("relative", COMMITTED)
def test_committed_copy_equals_the_shared_original(relative):
    original = shared_data.shared_path(_shared_original(relative))
    if original is None:
        pytest.skip(shared_data.missing_reason(_shared_original(relative)))
    assert (DATA / relative).read_bytes() == original.read_bytes(), (
        f"tests/data/{relative} differs from {original}: copy the shared file again")


def test_shared_dir_comes_from_the_environment_or_beside_the_repository(monkeypatch, tmp_path):
    monkeypatch.delenv(shared_data.ENV, raising=False)
    assert shared_data.shared_dir() == shared_data.REPO.parent / "shared"
    monkeypatch.setenv(shared_data.ENV, str(tmp_path))
    assert shared_data.shared_dir() == tmp_path.resolve()
    assert shared_data.shared_path("models/resnet18_v1-0000.params") is None
    assert not shared_data.have_model("resnet18_v1")  # the graph is committed, the weights are not
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "resnet18_v1-0000.params").write_bytes(b"weights")
    assert shared_data.model_path("resnet18_v1-0000.params") == tmp_path.resolve() / "models" / "resnet18_v1-0000.params"
    assert shared_data.have_model("resnet18_v1")


def test_model_path_prefers_the_committed_copy_and_skips_when_absent(monkeypatch, tmp_path):
    monkeypatch.setenv(shared_data.ENV, str(tmp_path))
    assert shared_data.model_path("mlp-0000.params") == SMALL_MODELS / "mlp-0000.params"
    assert shared_data.have_model("lenet")
    with pytest.raises(pytest.skip.Exception, match="models/resnet18_v1-0000.params.*SYMJIT_SHARED_DIR"):
        shared_data.model_path("resnet18_v1-0000.params")


#: ways a test could reach the shared directory without `shared_data` (absolute paths, a path
#: built from the repository's parent, the environment variable read directly)
_BYPASS = re.compile(r"/work/shared|/\s*[\"']shared[\"']|[\"']shared[\"']\s*/|SYMJIT_SHARED_DIR")


def test_tests_reach_shared_data_only_through_shared_data():
    """A bare clone runs the suite only if no test reads ../shared behind `shared_data`'s back."""
    offenders = []
    for path in sorted(shared_data.TESTS.rglob("*.py")):
        if path.name in ("shared_data.py", "test_shared_data.py"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if _BYPASS.search(line):
                offenders.append(f"{path.relative_to(shared_data.REPO)}:{i}: {line.strip()}")
    assert not offenders, "use tests/shared_data.py (model_path, shared_path) instead:\n" + "\n".join(offenders)
