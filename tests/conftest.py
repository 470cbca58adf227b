import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# executors compile natively from their first call here, so that every test of an executor's
# results checks native code (the interpreted first calls of small graphs are tested on their own)
os.environ.setdefault("SYMJIT_JIT_AFTER", "0")
