"""The generated CUDA source of a launch plan: kernels, the plan function and the library ABI.

`render(plan)` returns one self-contained `.cu` file (the `OUT.cu` that `symjit compile
--target cuda` keeps for inspection) made of:

1. the prelude (`prelude.PRELUDE`: device helpers, launch macros);
2. every kernel of the plan;
3. `sj_plan(in, out, prm, ws, stream)`: the launches and copies in order, on one stream, over
   device pointers (free inputs, outputs, the parameter block, the workspace arena laid out
   by the memory plan); a failed launch returns an error naming the kernel and its node;
4. the host side: one lazily created device state, bound to the device current at the first
   call: the parameter block and a stream; the host-pointer entry adds, at its first call, one
   allocation holding its input and output staging buffers and the arena;
5. the exported functions (all `SYMJIT_API`, see `aot.header_source` for their contract):
     * `symjit_graphs` -- the runtime's AOT descriptor table (runtime/symjit_runtime.h); its
       entry takes HOST pointers: inputs are copied to the device, the plan runs, outputs are
       copied back and the stream is synchronized (calls are serialized by a mutex);
     * `symjit_cuda_run(inputs, outputs, workspace, stream)` -- DEVICE pointers, asynchronous
       on the caller's stream, with a caller-owned workspace of `symjit_cuda_workspace_size()`;
     * `symjit_cuda_init`, `symjit_cuda_release`, `symjit_cuda_workspace_size`,
       `symjit_aot_check` (NULL when a usable GPU is present, else why not).

The parameters (weights and constants) are the `sj_param_blob` symbol, defined outside this
file (the AOT build embeds them with `.incbin`, see `aot.py`); they are copied to the device
on the first call (and again when the host entry is given other parameter pointers).

Nothing in this file is specific to nvcc: under `-DSYMJIT_CUDA_EMULATION` with
`runtime/cuda_host_emu.h` the same text compiles with the host C++ compiler (emulate.py).
"""
from __future__ import annotations

import json

import numpy as np

from ... import __symjit_version__ as __version__
from ..aot import DTYPE_CODES
from .plan import Copy, Launch, LaunchPlan
from .prelude import PRELUDE

__all__ = ["render", "ARCHS", "MIN_COMPUTE_CAPABILITY"]

#: GPU architectures the AOT library carries machine code for (plus PTX of the last one)
ARCHS = ("sm_80", "sm_90")

#: the oldest GPU generation the machine code runs on (sm_80 code runs on every 8.x GPU)
MIN_COMPUTE_CAPABILITY = (8, 0)


def _c_string(text: str) -> str:
    return json.dumps(text)


def _value_ptr(plan: LaunchPlan, v) -> str:
    kind, idx = plan.placement.where[v]
    if kind == "input":
        return f"in[{idx}]"
    if kind == "output":
        return f"out[{idx}]"
    if kind == "param":
        return f"(prm + {plan.placement.param_offsets[idx]})"
    return f"(ws + {idx})"


def _plan_function(plan: LaunchPlan) -> list[str]:
    L = ["static int32_t sj_plan(void *const *in, void *const *out, unsigned char *prm, unsigned char *ws,",
         "                       cudaStream_t stream) {",
         "    (void)in; (void)out; (void)prm; (void)ws; (void)stream;",
         "    cudaError_t err;"]
    for step in plan.steps:
        if isinstance(step, Launch):
            k = step.kernel
            args = ", ".join(f"({t})({_value_ptr(plan, v)})" for t, v in zip(k.param_types, step.args))
            macro = "SJ_LAUNCH_SYNC" if k.barriers else "SJ_LAUNCH"
            what = _c_string(f"launching {k.name} (node {step.node})")
            L += [f"    /* {step.node} */",
                  f"    {macro}({k.name}, {step.grid}, {k.threads}, stream, {args});",
                  f"    if ((err = cudaGetLastError()) != cudaSuccess) return sj_fail(err, {what});"]
        elif isinstance(step, Copy):
            dst, src = plan.placement.where[step.dst], plan.placement.where[step.src]
            if dst == src or step.nbytes == 0:
                continue
            what = _c_string(f"copying {step.nbytes} bytes (node {step.node or 'output'})")
            L += [f"    /* {step.node or 'graph output'}: copy */",
                  f"    err = cudaMemcpyAsync({_value_ptr(plan, step.dst)}, {_value_ptr(plan, step.src)}, "
                  f"{step.nbytes}, cudaMemcpyDeviceToDevice, stream);",
                  f"    if (err != cudaSuccess) return sj_fail(err, {what});"]
        else:
            raise TypeError(f"unknown plan step {step!r}")
    L += ["    return SYMJIT_OK;", "}", ""]
    return L


def _tensor_table(var: str, specs: list) -> list[str]:
    lines = []
    for i, (_, shape, _) in enumerate(specs):
        dims = ", ".join(str(int(d)) for d in shape) or "0"
        lines.append(f"static const int64_t {var}_shape{i}[] = {{{dims}}};")
    entries = [f"    {{{_c_string(n)}, {DTYPE_CODES[np.dtype(d).name]}, {len(s)}, {var}_shape{i}}}"
               for i, (n, s, d) in enumerate(specs)]
    lines.append(f"static const symjit_tensor_desc {var}[] = {{\n" + (",\n".join(entries) or "    {0, 0, 0, 0}")
                 + "\n};")
    return lines


def _spec(v) -> tuple:
    return (v.name, tuple(int(d) for d in v.type.shape), np.dtype(v.type.dtype).name)


def _host_side(plan: LaunchPlan) -> list[str]:
    p = plan.placement
    name = plan.name
    ins = [_spec(v) for v in p.inputs]
    outs = [_spec(v) for v in p.outputs]
    prms = [(n, a.shape, a.dtype.name) for n, a in p.params]
    in_bytes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for _, s, d in ins]
    out_bytes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for _, s, d in outs]

    def arr(ctype: str, var: str, values) -> str:
        values = list(values)
        items = ", ".join(str(int(x)) for x in values) or "0"
        return f"static const {ctype} {var}[{max(len(values), 1)}] = {{{items}}};"

    # the parameter block (allocated at initialization), and the host entry's block:
    # input staging | output staging | arena, each 256-byte aligned (allocated at its first call)
    def up(n: int) -> int:
        return -(-int(n) // 256) * 256
    pos = 0
    in_offs = []
    for b in in_bytes:
        in_offs.append(pos)
        pos += up(max(b, 1))
    out_offs = []
    for b in out_bytes:
        out_offs.append(pos)
        pos += up(max(b, 1))
    ws_off = pos
    io_bytes = ws_off + up(max(plan.workspace_size, 1))
    major, minor = MIN_COMPUTE_CAPABILITY
    L = ["/* ---- host side: device state, parameters, entry points ---- */",
         "#include <pthread.h>",
         "#include <stdio.h>",
         '#include "symjit_runtime.h"', "",
         f"#define SJ_N_IN {len(ins)}", f"#define SJ_N_OUT {len(outs)}", f"#define SJ_N_PARAMS {len(prms)}",
         f"#define SJ_WORKSPACE_BYTES {int(plan.workspace_size)}LL",
         f"#define SJ_PARAM_BYTES {int(max(p.param_bytes, 1))}ULL",
         f"#define SJ_IO_BYTES {int(io_bytes)}ULL", "",
         "/* the embedded parameters: one blob, each parameter at its offset (defined by the build) */",
         'extern "C" const unsigned char sj_param_blob[];', "",
         arr("int64_t", "sj_param_offsets", p.param_offsets),
         arr("int64_t", "sj_param_nbytes", [a.nbytes for _, a in p.params]),
         arr("int64_t", "sj_in_nbytes", in_bytes), arr("int64_t", "sj_in_offsets", in_offs),
         arr("int64_t", "sj_out_nbytes", out_bytes), arr("int64_t", "sj_out_offsets", out_offs), ""]
    L += _tensor_table("sj_inputs", ins) + _tensor_table("sj_outputs", outs) + _tensor_table("sj_params", prms)
    data = ",\n".join(f"    sj_param_blob + {off}" for off in p.param_offsets) or "    0"
    L += [f"static const void *const sj_param_data[{max(len(prms), 1)}] = {{\n{data}\n}};", "",
          "typedef struct {",
          "    int device;                        /* -1 until the first call */",
          "    unsigned char *params;             /* the parameters, uploaded from the host */",
          "    unsigned char *io;                 /* host entry only: inputs | outputs | arena (or 0) */",
          "    unsigned char *ws;",
          f"    void *in[{max(len(ins), 1)}], *out[{max(len(outs), 1)}];",
          f"    const void *uploaded[{max(len(prms), 1)}];  /* host pointers the device parameters came from */",
          "    cudaStream_t stream;",
          "} sj_state;",
          "static sj_state sj_st = {-1, 0, 0, 0, {0}, {0}, {0}, 0};",
          "static pthread_mutex_t sj_lock = PTHREAD_MUTEX_INITIALIZER;", "",
          "static int32_t sj_fail(cudaError_t err, const char *what) {",
          "    int32_t code = SYMJIT_ERR_INTERNAL;",
          "    if (err == cudaErrorMemoryAllocation) code = SYMJIT_ERR_OUT_OF_MEMORY;",
          "    else if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) code = SYMJIT_ERR_UNSUPPORTED;",
          f"    return symjit_set_error(code, \"graph %s (CUDA): %s: %s\", {_c_string(name)}, what, "
          f"cudaGetErrorString(err));",
          "}", "",
          _plan_function_marker(),
          "/* Bind the library to the current device (first call), allocate the parameter block and a stream;",
          " * lock held. */",
          "static int32_t sj_init_locked(void) {",
          "    int dev = 0;",
          "    cudaError_t err = cudaGetDevice(&dev);",
          "    if (err != cudaSuccess) return sj_fail(err, \"no usable CUDA device\");",
          "    if (sj_st.device >= 0) {",
          "        if (dev == sj_st.device) return SYMJIT_OK;",
          f"        return symjit_set_error(SYMJIT_ERR_UNSUPPORTED, \"graph %s (CUDA): the library was initialized on "
          f"device %d and is now called on device %d\", {_c_string(name)}, sj_st.device, dev);",
          "    }",
          "    int major = 0, minor = 0;",
          "    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);",
          "    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);",
          f"    if (major < {major})",
          "        return symjit_set_error(SYMJIT_ERR_UNSUPPORTED,",
          f"                                \"graph %s (CUDA): device %d has compute capability %d.%d; the library \"",
          f"                                \"needs >= {major}.{minor}\", {_c_string(name)}, dev, major, minor);",
          "    void *params = 0;",
          "    if ((err = cudaMalloc(&params, SJ_PARAM_BYTES)) != cudaSuccess)",
          "        return sj_fail(err, \"allocating device memory\");",
          "    cudaStream_t stream;",
          "    if ((err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {",
          "        cudaFree(params);",
          "        return sj_fail(err, \"creating a stream\");",
          "    }",
          "    sj_st.params = (unsigned char *)params;",
          "    sj_st.io = 0;",
          "    for (int k = 0; k < SJ_N_PARAMS; k++) sj_st.uploaded[k] = 0;",
          "    sj_st.stream = stream;",
          "    sj_st.device = dev;",
          "    return SYMJIT_OK;",
          "}", "",
          "/* Copy parameters whose host pointer changed since the last upload, on the library's stream, and",
          " * wait for the copies (kernels on any stream may read them afterwards); lock held. */",
          "static int32_t sj_upload_locked(void *const *params) {",
          "    int copied = 0;",
          "    for (int k = 0; k < SJ_N_PARAMS; k++) {",
          "        if (sj_st.uploaded[k] == params[k]) continue;",
          "        cudaError_t err = cudaMemcpyAsync(sj_st.params + sj_param_offsets[k], params[k],",
          "                                          (size_t)sj_param_nbytes[k], cudaMemcpyHostToDevice,",
          "                                          sj_st.stream);",
          "        if (err != cudaSuccess) return sj_fail(err, \"copying parameters to the device\");",
          "        sj_st.uploaded[k] = 0;",
          "        copied = 1;",
          "    }",
          "    if (!copied) return SYMJIT_OK;",
          "    cudaError_t err = cudaStreamSynchronize(sj_st.stream);",
          "    if (err != cudaSuccess) return sj_fail(err, \"copying parameters to the device\");",
          "    for (int k = 0; k < SJ_N_PARAMS; k++) sj_st.uploaded[k] = params[k];",
          "    return SYMJIT_OK;",
          "}", "",
          "/* The runtime ABI entry: HOST pointers; copy in, run, copy out, synchronize. */",
          "static int32_t sj_entry(void **inputs, void **outputs, void **params, void *workspace) {",
          "    (void)workspace;   /* the arena lives on the device */",
          "    symjit_clear_error();",
          "    pthread_mutex_lock(&sj_lock);",
          "    int32_t rc = sj_init_locked();",
          "    if (rc == SYMJIT_OK) rc = sj_upload_locked(params);",
          "    cudaError_t err = cudaSuccess;",
          "    if (rc == SYMJIT_OK && sj_st.io == 0) {      /* staging buffers and the arena, once */",
          "        void *io = 0;",
          "        if ((err = cudaMalloc(&io, SJ_IO_BYTES)) != cudaSuccess) {",
          "            rc = sj_fail(err, \"allocating device memory\");",
          "        } else {",
          "            sj_st.io = (unsigned char *)io;",
          f"            sj_st.ws = sj_st.io + {ws_off};",
          "            for (int k = 0; k < SJ_N_IN; k++) sj_st.in[k] = sj_st.io + sj_in_offsets[k];",
          "            for (int k = 0; k < SJ_N_OUT; k++) sj_st.out[k] = sj_st.io + sj_out_offsets[k];",
          "        }",
          "    }",
          "    for (int k = 0; rc == SYMJIT_OK && k < SJ_N_IN; k++)",
          "        if ((err = cudaMemcpyAsync(sj_st.in[k], inputs[k], (size_t)sj_in_nbytes[k], cudaMemcpyHostToDevice,",
          "                                   sj_st.stream)) != cudaSuccess)",
          "            rc = sj_fail(err, \"copying inputs to the device\");",
          "    if (rc == SYMJIT_OK) rc = sj_plan(sj_st.in, sj_st.out, sj_st.params, sj_st.ws, sj_st.stream);",
          "    for (int k = 0; rc == SYMJIT_OK && k < SJ_N_OUT; k++)",
          "        if ((err = cudaMemcpyAsync(outputs[k], sj_st.out[k], (size_t)sj_out_nbytes[k],",
          "                                   cudaMemcpyDeviceToHost, sj_st.stream)) != cudaSuccess)",
          "            rc = sj_fail(err, \"copying outputs from the device\");",
          "    if (sj_st.device >= 0 && (err = cudaStreamSynchronize(sj_st.stream)) != cudaSuccess && rc == SYMJIT_OK)",
          "        rc = sj_fail(err, \"running the kernels\");",
          "    pthread_mutex_unlock(&sj_lock);",
          "    return rc;",
          "}", "",
          "static const symjit_graph_desc sj_graphs[] = {{",
          f"    SYMJIT_ABI_VERSION, {_c_string(name)}, {len(ins)}, {len(outs)}, {len(prms)},",
          f"    sj_inputs, sj_outputs, sj_params, {'sj_param_data' if prms else '0'}, 0, sj_entry, symjit_last_error",
          "}};", "",
          'extern "C" {', "",
          "SYMJIT_API const symjit_graph_desc *symjit_graphs(int32_t *count) {",
          "    *count = 1;",
          "    return sj_graphs;",
          "}", "",
          "SYMJIT_API int64_t symjit_cuda_workspace_size(void) { return SJ_WORKSPACE_BYTES; }", "",
          "SYMJIT_API int32_t symjit_cuda_init(void) {",
          "    pthread_mutex_lock(&sj_lock);",
          "    int32_t rc = sj_init_locked();",
          "    if (rc == SYMJIT_OK) rc = sj_upload_locked((void *const *)sj_param_data);",
          "    pthread_mutex_unlock(&sj_lock);",
          "    return rc;",
          "}", "",
          "SYMJIT_API int32_t symjit_cuda_run(void *const *inputs, void *const *outputs, void *workspace,",
          "                                   void *stream) {",
          "    symjit_clear_error();",
          "    if (workspace == 0 && SJ_WORKSPACE_BYTES > 0)",
          "        return symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT,",
          "                                \"graph %s (CUDA): symjit_cuda_run needs a device workspace of \"",
          "                                \"%lld bytes\",",
          f"                                {_c_string(name)}, (long long)SJ_WORKSPACE_BYTES);",
          "    int32_t rc = symjit_cuda_init();",
          "    if (rc != SYMJIT_OK) return rc;",
          "    return sj_plan(inputs, outputs, sj_st.params, (unsigned char *)workspace, (cudaStream_t)stream);",
          "}", "",
          "SYMJIT_API void symjit_cuda_release(void) {",
          "    pthread_mutex_lock(&sj_lock);",
          "    if (sj_st.device >= 0) {",
          "        cudaStreamSynchronize(sj_st.stream);",
          "        cudaStreamDestroy(sj_st.stream);",
          "        cudaFree(sj_st.params);",
          "        if (sj_st.io) cudaFree(sj_st.io);",
          "        sj_st.io = 0;",
          "        sj_st.device = -1;",
          "    }",
          "    pthread_mutex_unlock(&sj_lock);",
          "}", "",
          "static char sj_check_msg[512];", "",
          "SYMJIT_API const char *symjit_aot_check(void) {",
          "    int count = 0, dev = 0, major = 0, minor = 0;",
          "    cudaError_t err = cudaGetDeviceCount(&count);",
          "    if (err != cudaSuccess || count == 0) {",
          f"        snprintf(sj_check_msg, sizeof sj_check_msg, \"symjit CUDA library %s: no usable NVIDIA GPU (%s)\", "
          f"{_c_string(name)}, err != cudaSuccess ? cudaGetErrorString(err) : \"no device\");",
          "        cudaGetLastError();",
          "        return sj_check_msg;",
          "    }",
          "    cudaGetDevice(&dev);",
          "    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);",
          "    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);",
          f"    if (major < {major}) {{",
          "        snprintf(sj_check_msg, sizeof sj_check_msg,",
          f"                 \"symjit CUDA library %s: device %d has compute capability %d.%d, the library needs \"",
          f"                 \">= {major}.{minor} (built for {', '.join(ARCHS)})\",",
          f"                 {_c_string(name)}, dev, major, minor);",
          "        return sj_check_msg;",
          "    }",
          "    return 0;",
          "}", "",
          '}  /* extern "C" */', ""]
    return L


def _plan_function_marker() -> str:
    return "@PLAN@"


def render(plan: LaunchPlan) -> str:
    """The complete CUDA source of `plan` (see the module docstring)."""
    p = plan.placement
    head = [f"/* {plan.name}.cu -- generated by symjit {__version__} (symjit compile --target cuda).",
            f" * graph {plan.name!r}: {len(plan.kernels)} kernels, {len(plan.launches)} launches; device memory: "
            f"parameters {p.param_bytes} B, workspace {plan.workspace_size} B.",
            " * Compile with nvcc (see the manifest), or for the host with -DSYMJIT_CUDA_EMULATION",
            " * -include cuda_host_emu.h (symjit/codegen/cuda/emulate.py). */",
            "#ifndef SYMJIT_CUDA_EMULATION",
            "#include <cuda_runtime.h>",
            "#endif"]
    parts = ["\n".join(head), PRELUDE.strip("\n"), "/* ---- kernels ---- */"]
    parts += [k.source for k in plan.kernels]
    host = "\n".join(_host_side(plan))
    host = host.replace(_plan_function_marker(), "\n".join(["/* ---- launch plan ---- */"] + _plan_function(plan)))
    parts.append(host)
    return "\n\n".join(parts) + "\n"
