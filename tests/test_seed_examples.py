"""The seed examples (the API contract) that the implemented issues cover.

Later issues extend SEED_IDS until every example is in it.
"""
from __future__ import annotations

import builtins
import re

import pytest

from symjit.base import MXNetError
from seed_runner import SPEC, load_examples, mask_numbers, normalize, run_code

#: issue "Foundation" covers E8-E27, E46-E50, E60-E65, E68, E69, E82, E83; listed as they pass
SEED_IDS = {"E8", "E9", "E10", "E11", "E12", "E13", "E17", "E46", "E47",
            "E3", "E88", "E89", "E90", "E91", "E92", "E93", "E94",
            *[f"E{i}" for i in range(14, 28)], "E48", "E49", "E50",
            "E82", "E83", "E109", "E110", "E111", "E112",
            # issue "Gluon with hybridize()"
            "E5", "E6", "E7", "E29", "E30", "E31", "E33", "E34", "E35", "E70", "E71", "E84",
            # ndarray/symbol API chapters: contrib, image, random, sparse
            *[f"E{i}" for i in range(51, 70)], *[f"E{i}" for i in range(95, 109)],
            # issue "KVStore and distributed training on MPI"
            *[f"E{i}" for i in range(36, 45)], *[f"E{i}" for i in range(113, 122)],
            # issue "Visualization, the symjit CLI and ahead-of-time compiled libraries"
            "E45", "E122",
            # installation check, GPU-less errors, initializer dumps and Module (autograd chapter)
            "E1", "E2", "E85", "E86", "E87",
            # gluon.rnn and gluon.data (E76-E79 replay the rnn examples of their session first)
            "E72", "E73", "E74", "E75", "E76", "E77", "E78", "E79", "E80",
            # a Gluon training loop over a DataLoader with worker threads (random losses: format)
            "E28"}

EXAMPLES = load_examples()
BY_ID = {e["id"]: e for e in EXAMPLES}
if not EXAMPLES:
    pytest.skip(f"the seed examples {SPEC} are absent (set SYMJIT_SHARED_DIR)", allow_module_level=True)


def expected_error(status: str | None) -> type[BaseException] | None:
    """The exception type an example's MXNet status names ("error in code: RuntimeError: ..."
    -> RuntimeError; MXNetError or an unnamed error -> symjit's MXNetError); None if it runs."""
    if not (status or "").startswith("error"):
        return None
    m = re.match(r"error in code: (\w+):", status)
    found = getattr(builtins, m.group(1), None) if m else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else MXNetError


def _session_prefix(example: dict) -> list[dict]:
    """Examples of the same session up to and including this one, in order."""
    sess = example["session"]
    out = []
    for e in EXAMPLES:
        if e["session"] == sess:
            out.append(e)
        if e is example:
            break
    return out


def test_expected_error_type_comes_from_the_status():
    assert expected_error("ok") is None and expected_error(None) is None
    assert expected_error("error in code: RuntimeError: Parameter 'weight' was not initialized") is RuntimeError
    assert expected_error("error in code: MXNetError: MXNetError: GPU is not enabled") is MXNetError
    assert expected_error("error in code: ValueError: bad") is ValueError
    assert expected_error("error: crashed") is MXNetError


@pytest.mark.parametrize("eid", sorted(SEED_IDS, key=lambda s: int(s[1:])))
def test_seed_example(eid, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from symjit.symbol.naming import NameManager
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)  # fresh process
    example = BY_ID[eid]
    namespace: dict = {"__name__": "__seed__"}
    for e in _session_prefix(example):
        expect_error = expected_error(e["mxnet_1_9_1_status"])
        try:
            out = run_code(e["code"], namespace)
            raised = None
        except (expect_error or MXNetError) as err:
            out, raised = getattr(err, "partial_output", ""), err
        if e is not example:
            continue
        if expect_error:
            assert raised is not None, f"{eid}: MXNet raises here ({e['mxnet_1_9_1_status']}), symjit did not"
        elif raised is not None:
            raise raised
        want = normalize(e["mxnet_1_9_1_output"])
        got = normalize(out)
        if e["deterministic"]:
            assert got == want, f"{eid} output differs\n--- got:\n{got}\n--- MXNet 1.9.1:\n{want}"
        else:
            assert mask_numbers(got) == mask_numbers(want), (
                f"{eid} output format differs\n--- got:\n{got}\n--- MXNet 1.9.1:\n{want}")
