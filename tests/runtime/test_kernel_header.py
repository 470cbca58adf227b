"""runtime/nnkernels.h declares every entry point of the kernel library, and the LLVM
signatures code generation declares for them (lower_gemm.C_SIGNATURES) match it."""
from __future__ import annotations

import re
from pathlib import Path

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
