"""Streaming (non-temporal) stores for large elementwise outputs.

An output written once and not read again before it leaves the cache costs a read for ownership
per cache line with ordinary stores: with three inputs and one output, five lines move per four
of data. Non-temporal stores write the line without reading it. LLVM's loop vectorizer only emits
them for stores it can prove aligned to the vector size, which a scalar loop body never is, so:

  * the emitter (elementwise.py) writes a large contiguous kernel twice: the exported kernel
    checks at run time that every output starts on a 64-byte boundary at `begin` and that the
    call writes at least STREAM_MIN_CALL_BYTES of each, and then calls
    `<kernel>` + STREAM_SUFFIX (a noinline copy of the same loop ending in an sfence), otherwise
    it runs its own loop with ordinary stores;
  * after LLVM's optimisation pipeline, `mark_streaming_stores` rewrites every vector store of
    the functions named with STREAM_SUFFIX into an aligned `!nontemporal` store.

Invariant that makes the rewrite sound: in a STREAM_SUFFIX function every vector store of K
elements writes output element begin + j with j a multiple of K (the vectorized loop starts at
`begin` and steps by multiples of its width, and an epilogue loop of width K' < K starts where
the main loop stopped), so with the output 64-byte aligned at `begin` it is aligned to
min(64, K * element size) bytes. The runtime's parallel-for starts chunks at multiples of 16
indices, so every chunk of a 64-byte-aligned float32 output takes the streaming path.
"""
from __future__ import annotations

import re

__all__ = ["STREAM_SUFFIX", "STREAM_MIN_BYTES", "STREAM_MIN_CALL_BYTES", "mark_streaming_stores"]

#: name suffix of the kernel copies whose vector stores become non-temporal
STREAM_SUFFIX = ".stream"
#: outputs of at least this many bytes in all stream (half the L3 of the machines measured: an
#: output this large is evicted before the next kernel reads it anyway)
STREAM_MIN_BYTES = 8 << 20
#: ... and of those, only calls that write at least this many bytes of each output: the kernel
#: library calls a convolution's epilogue block by block, row by row, on rows it has just written
#: (in cache), where the sfence that ends each streaming call would stall every few hundred
#: bytes (measured on a Zen 3: a 1x1 convolution with a clip epilogue spent 41% of its time
#: there, called on rows of 64 floats)
STREAM_MIN_CALL_BYTES = 64 << 10

_DEFINE = re.compile(r'^define\b[^@]*@"?([-\w.$]+)"?\(')
_STORE = re.compile(r"^(\s*store <(\d+) x (float|double|i8|i16|i32|i64)> [^,]+, ptr [^,]+), align \d+(.*)$")
_ELEMENT_BYTES = {"float": 4, "double": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8}
_METADATA_ID = re.compile(r"!(\d+)\b")


def mark_streaming_stores(ir_text: str) -> tuple[str, int]:
    """(IR text with the vector stores of STREAM_SUFFIX functions non-temporal and aligned,
    number of stores rewritten). Text without such functions comes back unchanged."""
    if STREAM_SUFFIX + "(" not in ir_text and STREAM_SUFFIX + '"(' not in ir_text:
        return ir_text, 0
    node = max((int(m) for m in _METADATA_ID.findall(ir_text)), default=-1) + 1
    out, inside, count = [], False, 0
    for line in ir_text.split("\n"):
        m = _DEFINE.match(line)
        if m:
            inside = m.group(1).endswith(STREAM_SUFFIX)
        elif line == "}":
            inside = False
        elif inside:
            s = _STORE.match(line)
            nbytes = int(s.group(2)) * _ELEMENT_BYTES[s.group(3)] if s else 0
            if nbytes >= 16 and nbytes & (nbytes - 1) == 0:
                line = f"{s.group(1)}, align {min(64, nbytes)}{s.group(4)}, !nontemporal !{node}"
                count += 1
        out.append(line)
    if not count:
        return ir_text, 0
    return "\n".join(out) + f"\n!{node} = !{{i32 1}}\n", count
