import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# executors compile natively from their first call here, so that every test of an executor's
# results checks native code (the interpreted first calls of small graphs are tested on their own)
os.environ.setdefault("SYMJIT_JIT_AFTER", "0")

# the on-disk plan cache (codegen/plan_cache.py) is off: many tests compile the same seeded
# graphs and then inspect how they were compiled, which a plan stored by an earlier test or run
# would skip. tests/codegen/test_plan_cache.py turns it on with a private cache directory.
os.environ.setdefault("SYMJIT_PLAN_CACHE", "0")
