"""symjit.ir — the graph IR (see DESIGN.md): typed values, nodes over registered ops, graphs.

  graph.py        TensorType, Value, Node, Graph (plain dataclasses)
  builder.py      GraphBuilder: frontends and passes create graphs through it
  verify.py       verify(): definitions, order/acyclicity, arity, types
  printer.py      format_graph(): one node per line, for tests and `symjit inspect`
  interpreter.py  run(): the numpy reference executor (ground truth for passes and codegen)
"""
from .graph import Graph, Node, TensorType, Value  # noqa: F401
from .builder import GraphBuilder, infer_node_types  # noqa: F401
from .verify import verify  # noqa: F401
from .printer import format_graph  # noqa: F401
from .interpreter import RunResult, run  # noqa: F401
