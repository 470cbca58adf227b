"""symjit's sparse-storage operators against golden values recorded with MXNet 1.9.1
(tests/golden/make_sparse.py): output values, output storage types, the stored rows of
row_sparse outputs, gradients and their storage types, and the calls MXNet refuses."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_ops_io import DATA_DIR, check_case, load_cases  # noqa: E402

CASES = [c for f in sorted(DATA_DIR.glob("sparse_*.npz")) for c in load_cases(f)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sparse_matches_mxnet(case):
    check_case(case)
