"""symjit.module (`mx.mod`): the MXNet 1.x Module API over symjit executors."""
from .module import BaseModule, Module, load_checkpoint, save_checkpoint  # noqa: F401
from .bucketing_module import BucketingModule  # noqa: F401
from .sequential_module import SequentialModule  # noqa: F401
from .python_module import PythonLossModule, PythonModule  # noqa: F401
