"""runtime/nnkernels.h declares every entry point of the kernel library, and the LLVM
signatures code generation declares for them (lower_gemm.C_SIGNATURES) match it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from symjit.codegen.llvm.lower_gemm import C_SIGNATURES

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


def _prototypes(text: str) -> dict[str, list[str]]:
    """name -> parameter C types of every `NN_API ret name(params)` in `text`."""
    out = {}
    for m in re.finditer(r"^NN_API\s+[\w ]+?\b(symjit_nn_\w+)\s*\(([^)]*)\)", text, re.M):
        params = " ".join(m.group(2).split())
        types = [] if params == "void" else [re.sub(r"\s*\b\w+$", "", p.strip()) for p in params.split(",")]
        out[m.group(1)] = types
    return out


def _llvm_type(c_type: str) -> str:
    if "*" in c_type or c_type == "symjit_kernel_fn":
        return "ptr"
    return {"int64_t": "i64", "int32_t": "i32", "double": "double", "float": "float"}[c_type]


def _library_sources() -> list[Path]:
    """nnkernels.c and the family files it includes (runtime/nn/*.c), in inclusion order."""
    top = RUNTIME / "nnkernels.c"
    return [top] + [RUNTIME / m for m in re.findall(r'^#include "(nn/\w+\.c)"', top.read_text(), re.M)]


def test_every_family_file_is_part_of_the_library():
    """runtime/nn/*.c compile only through nnkernels.c: a file it does not include is dead code,
    and the AOT build's cache key covers every one of them."""
    from symjit.codegen.aot import runtime_included_files
    included = set(_library_sources()[1:])
    assert included == set((RUNTIME / "nn").glob("*.c"))
    assert included <= set(runtime_included_files(RUNTIME))


def test_every_kernel_library_entry_point_is_declared_once_in_the_header():
    header = _prototypes((RUNTIME / "nnkernels.h").read_text())
    defined: dict[str, list[str]] = {}
    for source in _library_sources():
        protos = _prototypes(source.read_text())
        assert not protos.keys() & defined.keys(), (source.name, protos.keys() & defined.keys())
        defined.update(protos)
    assert defined.keys() == header.keys()
    assert defined == header


def test_codegen_signatures_match_the_header():
    header = _prototypes((RUNTIME / "nnkernels.h").read_text())
    assert set(C_SIGNATURES) <= set(header), set(C_SIGNATURES) - set(header)
    for name, params in C_SIGNATURES.items():
        assert params == [_llvm_type(t) for t in header[name]], name


def test_the_parser_reads_parameter_types():
    protos = _prototypes("NN_API void symjit_nn_x(const int64_t *d, int64_t n, void **args);\n"
                         "NN_API int64_t symjit_nn_y(void);\n")
    assert protos == {"symjit_nn_x": ["const int64_t *", "int64_t", "void **"], "symjit_nn_y": []}


def test_tuning_keys_match_the_header():
    from symjit.codegen.llvm.lower_gemm import TUNE_KEYS
    body = re.search(r"enum \{(.*?)\};", (RUNTIME / "nnkernels.h").read_text(), re.S).group(1)
    names = [m.group(1) for m in re.finditer(r"\bTUNE_(\w+)\b", body)]
    assert names[-1] == "COUNT"
    assert TUNE_KEYS == {n.lower(): i for i, n in enumerate(names[:-1])}


def _enum_values(name: str, prefix: str) -> dict[str, int]:
    body = re.search(r"enum %s \{(.*?)\};" % name, (RUNTIME / "nnkernels.h").read_text(), re.S).group(1)
    return {m.group(1).lower(): int(m.group(2)) for m in re.finditer(r"\b%s(\w+) = (\d+)" % prefix, body)}


def test_tuning_values_match_the_header():
    from symjit.codegen.llvm.lower_gemm import TUNE_CONV_VALUES, TUNE_PREFETCH_VALUES
    assert TUNE_CONV_VALUES == _enum_values("symjit_tune_conv", "TUNE_CONV_")
    assert TUNE_PREFETCH_VALUES == _enum_values("symjit_tune_prefetch", "TUNE_PREFETCH_")
    assert 0 not in TUNE_CONV_VALUES.values() and 0 not in TUNE_PREFETCH_VALUES.values()   # 0: built-in


def test_the_kernels_compare_tuning_values_by_name():
    """No magic number: every comparison of a TUNE_CONV / TUNE_PREFETCH override in the C names
    its value."""
    for source in _library_sources():
        bad = re.findall(r"g_tune\[TUNE_(?:CONV|PREFETCH)\]\s*[!=]=\s*\d+", source.read_text())
        assert not bad, (source.name, bad)


def _struct_fields(name: str) -> list[tuple[str, str, int]]:
    """(field, C type, array length or 0) of `typedef struct { ... } name;` in the header."""
    text = (RUNTIME / "nnkernels.h").read_text()
    body = re.search(r"typedef struct \{([^{}]*)\} %s;" % name, text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = []
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        ctype, names = re.fullmatch(r"(\w+)\s+(.+)", " ".join(decl.split()), re.S).groups()
        for name in names.split(","):     # `int64_t m, n, k;`
            m = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", name.strip())
            assert m, decl
            fields.append((m.group(1), ctype, int(m.group(2) or 0)))
    return fields


def _ctypes_fields(struct) -> list[tuple[str, str, int]]:
    import ctypes
    names = {ctypes.c_int64: "int64_t"}
    out = []
    for name, ftype in struct._fields_:
        length = getattr(ftype, "_length_", 0)
        base = ftype._type_ if length else ftype
        out.append((name, names.get(base) or _C_STRUCTS[base.__name__], length))
    return out


_C_STRUCTS = {"ConvDesc": "symjit_conv_desc", "PoolDesc": "symjit_pool_desc", "GemmDesc": "symjit_gemm_desc"}


def test_descriptor_structs_match_the_header():
    """The Python descriptor structs have the header's field names, order and types, and no
    padding (they are emitted as int64 words)."""
    import ctypes
    from symjit.codegen.llvm.lower_conv import ConvDesc, ConvPoolDesc
    from symjit.codegen.llvm.lower_pool import PoolDesc
    assert _ctypes_fields(ConvDesc) == _struct_fields("symjit_conv_desc")
    assert _ctypes_fields(PoolDesc) == _struct_fields("symjit_pool_desc")
    assert _ctypes_fields(ConvPoolDesc) == _struct_fields("symjit_conv_pool_desc")
    assert ctypes.sizeof(ConvDesc) == 8 * 23 and ctypes.sizeof(PoolDesc) == 8 * 19
    assert ctypes.sizeof(ConvPoolDesc) == 8 * 43
    from symjit.codegen.llvm.lower_gemm import GemmDesc
    assert _ctypes_fields(GemmDesc) == _struct_fields("symjit_gemm_desc")
    assert ctypes.sizeof(GemmDesc) == 8 * 10
    from symjit.codegen.llvm.lower_rnn import RNN_MODES, RnnDesc
    assert _ctypes_fields(RnnDesc) == _struct_fields("symjit_rnn_desc")
    assert ctypes.sizeof(RnnDesc) == 8 * 8
    assert RNN_MODES == {("rnn_" + k if k in ("relu", "tanh") else k): v
                         for k, v in _enum_values("symjit_rnn_mode", "SYMJIT_RNN_").items()}
    from symjit.codegen.llvm.lower_blocked import ConvBlockedDesc, ReorderDesc
    assert _ctypes_fields(ReorderDesc) == _struct_fields("symjit_reorder_desc")
    assert _ctypes_fields(ConvBlockedDesc) == _struct_fields("symjit_conv_blocked_desc")


def test_conv_methods_and_pool_types_match_the_header():
    from symjit.codegen.llvm import lower_pool
    from symjit.ops import conv_method
    assert _enum_values("symjit_conv_method", "SYMJIT_CONV_") == {
        "im2col": conv_method.IM2COL, "depthwise": conv_method.DEPTHWISE, "winograd": conv_method.WINOGRAD}
    assert _enum_values("symjit_pool_type", "SYMJIT_POOL_") == lower_pool.POOL_TYPES
    from symjit.codegen.llvm.lower_gemm import BIAS_MODES
    assert _enum_values("symjit_gemm_bias", "SYMJIT_BIAS_") == BIAS_MODES
    from symjit.codegen.llvm import lower_blocked as B
    assert _enum_values("symjit_blocked_kind", "SYMJIT_BLOCKED_") == {
        "pointwise": B.POINTWISE, "depthwise": B.DEPTHWISE, "direct": B.DIRECT, "general": B.GENERAL}


def test_the_struct_parser_reads_fields():
    assert _struct_fields("symjit_conv_desc")[:2] == [("n", "int64_t", 0), ("channels", "int64_t", 0)]
    assert ("in_size", "int64_t", 3) in _struct_fields("symjit_conv_desc")
    assert _struct_fields("symjit_gemm_desc")[1:4] == [("m", "int64_t", 0), ("n", "int64_t", 0), ("k", "int64_t", 0)]


def test_conv_desc_words_are_the_struct_fields():
    from symjit.codegen.llvm.lower_conv import ConvDesc, conv_desc
    from symjit.ops.conv_method import WINOGRAD
    from symjit.codegen.llvm.lower_gemm import desc_c_initializer
    words = conv_desc(2, 16, 1, 32, (9, 10), (3, 3), (7, 8), (1, 1), (1, 1), (0, 0), WINOGRAD)
    assert words == (2, 16, 1, 32, 1, 9, 10, 1, 3, 3, 1, 7, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, WINOGRAD)
    typed = ConvDesc.from_buffer_copy(np.asarray(words, dtype=np.int64).tobytes())
    assert typed.filters == 32 and list(typed.out_size) == [1, 7, 8] and typed.method == WINOGRAD
    assert desc_c_initializer(typed).startswith("{.n = 2, .channels = 16, .groups = 1, .filters = 32, "
                                                ".in_size = {1, 9, 10}, ")


def test_every_descriptor_argument_is_a_typed_struct():
    """No entry point takes geometry as a positional int64 array."""
    header = (RUNTIME / "nnkernels.h").read_text()
    assert not re.findall(r"const int64_t \*d\b", header)
    for params in _prototypes(header).values():
        if params and params[0].endswith("*") and "desc" in params[0]:
            assert re.fullmatch(r"const symjit_\w+_desc \*", params[0]), params[0]
