"""symjit's contrib operators against golden values recorded with MXNet 1.9.1
(tests/golden/make_contrib.py): every output's values (and dtype), the gradients MXNet defines
for the head gradients stored with each case, and the calls MXNet refuses. MXNet 1.9.1 runs
fft, ifft and count_sketch on GPUs only, so those have no golden values (their tests compare
with numpy)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_ops_io import DATA_DIR, check_case, load_cases  # noqa: E402

CASES = [c for f in sorted(DATA_DIR.glob("contrib_*.npz")) for c in load_cases(f)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_contrib_matches_mxnet(case):
    check_case(case)
