/*
 * run_model.c -- run a library built by `symjit compile` from C, with no Python in the process.
 *
 *     cc -O2 -I runtime runtime/examples/run_model.c -o run_model -ldl
 *     ./run_model OUT.so data.npy [more inputs.npy ...] [-o out0.npy [-o out1.npy ...]]
 *
 * The program dlopen()s the library, asks it for its graph table (`symjit_graphs`), reads one
 * .npy file per graph input (format 1.0/2.0, C order, the dtype and shape the graph was compiled
 * for), allocates the workspace with the library's own `symjit_arena_alloc`, calls the entry
 * point with the embedded parameters, and writes each output as .npy (or prints a summary).
 * Before dlopen() it checks that the file is as long as its ELF headers say: the loader maps a
 * truncated library without complaint, and reading its missing pages later kills with SIGBUS.
 * Exit status: 0 success, 1 bad input or a failed call, 2 usage error; messages on stderr.
 */
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symjit_runtime.h"

#define MAX_OUTPUT_FILES 64

/* The library's runtime functions: the library carries its own runtime copy. */
typedef void *(*alloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef const char *(*check_fn)(void);
static alloc_fn lib_alloc;
static free_fn lib_free;

/* numpy's dtype string and element size for an ABI dtype code */
static const char *npy_descr(int32_t code, size_t *size) {
    static const struct { const char *descr; size_t size; } table[] = {
        {"<f4", 4}, {"<f8", 8}, {"<f2", 2}, {"|u1", 1}, {"<i4", 4}, {"|i1", 1},
        {"<i8", 8}, {"|b1", 1}, {"<i2", 2}, {"<u2", 2}, {"<u4", 4}, {"<u8", 8}};
    if (code < 0 || code >= (int32_t)(sizeof table / sizeof table[0])) return NULL;
    *size = table[code].size;
    return table[code].descr;
}

static size_t tensor_count(const symjit_tensor_desc *t) {
    size_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

static void shape_text(const symjit_tensor_desc *t, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int32_t d = 0; d < t->ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, t->ndim == 1 ? ",)" : ")");
}

/* Read a .npy file that must hold exactly tensor `t`; returns a malloc'ed buffer or NULL. */
static void *read_npy(const char *path, const symjit_tensor_desc *t) {
    size_t esize = 0;
    const char *descr = npy_descr(t->dtype, &esize);
    FILE *f = fopen(path, "rb");
    if (f == NULL) { fprintf(stderr, "run_model: cannot open %s\n", path); return NULL; }
    unsigned char magic[8];
    char *header = NULL;
    void *data = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "run_model: %s is not a .npy file\n", path);
        goto done;
    }
    size_t hlen = 0;
    if (magic[6] == 1) {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) goto truncated;
        hlen = (size_t)b[0] | ((size_t)b[1] << 8);
    } else {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) goto truncated;
        hlen = (size_t)b[0] | ((size_t)b[1] << 8) | ((size_t)b[2] << 16) | ((size_t)b[3] << 24);
    }
    header = calloc(hlen + 1, 1);
    if (header == NULL || fread(header, 1, hlen, f) != hlen) goto truncated;
    for (size_t k = hlen; k > 0 && (header[k - 1] == ' ' || header[k - 1] == '\n'); k--) header[k - 1] = '\0';
    char want_descr[32], want_shape[300], shape[256];
    snprintf(want_descr, sizeof want_descr, "'descr': '%s'", descr);
    shape_text(t, shape, sizeof shape);
    snprintf(want_shape, sizeof want_shape, "'shape': %s", shape);
    if (strstr(header, want_descr) == NULL || strstr(header, "'fortran_order': False") == NULL) {
        fprintf(stderr, "run_model: %s: input '%s' must be a C-order array of dtype %s (header: %s)\n",
                path, t->name, descr, header);
        goto done;
    }
    if (strstr(header, want_shape) == NULL) {
        fprintf(stderr, "run_model: %s: input '%s' must have shape %s (header: %s)\n", path, t->name, shape, header);
        goto done;
    }
    size_t nbytes = tensor_count(t) * esize;
    data = lib_alloc(nbytes ? nbytes : 1);
    if (data == NULL) { fprintf(stderr, "run_model: out of memory\n"); goto done; }
    if (fread(data, 1, nbytes, f) != nbytes) {
        lib_free(data);
        data = NULL;
        goto truncated;
    }
    goto done;
truncated:
    fprintf(stderr, "run_model: %s is truncated\n", path);
done:
    free(header);
    fclose(f);
    return data;
}

static int write_npy(const char *path, const symjit_tensor_desc *t, const void *data) {
    size_t esize = 0;
    const char *descr = npy_descr(t->dtype, &esize);
    char shape[256], header[512];
    shape_text(t, shape, sizeof shape);
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) { fprintf(stderr, "run_model: cannot write %s\n", path); return 1; }
    unsigned short hlen = (unsigned short)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t nbytes = tensor_count(t) * esize;
    ok = ok && fwrite(data, 1, nbytes, f) == nbytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        fprintf(stderr, "run_model: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* 0 if `path` is a 64-bit ELF file at least as long as its program segments and section header
 * table reach (a complete library), else 1 with a message. */
static int check_library_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { fprintf(stderr, "run_model: cannot open %s\n", path); return 1; }
    Elf64_Ehdr eh;
    int bad = fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
              eh.e_ident[EI_CLASS] != ELFCLASS64;
    unsigned long long need = 0;
    if (!bad) {
        need = eh.e_shoff + (unsigned long long)eh.e_shentsize * eh.e_shnum;
        for (int i = 0; i < eh.e_phnum && !bad; i++) {
            Elf64_Phdr ph;
            bad = fseek(f, (long)(eh.e_phoff + (unsigned long long)i * eh.e_phentsize), SEEK_SET) != 0 ||
                  fread(&ph, sizeof ph, 1, f) != 1;
            if (!bad && ph.p_offset + ph.p_filesz > need) need = ph.p_offset + ph.p_filesz;
        }
    }
    long size = bad || fseek(f, 0, SEEK_END) != 0 ? -1 : ftell(f);
    fclose(f);
    if (bad || size < 0) {
        fprintf(stderr, "run_model: %s is not a 64-bit ELF shared library (or is truncated)\n", path);
        return 1;
    }
    if ((unsigned long long)size < need) {
        fprintf(stderr, "run_model: %s is truncated (%ld bytes, its headers need %llu); rebuild it with symjit "
                        "compile\n", path, size, need);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *lib_path = NULL, *inputs[256], *outputs[MAX_OUTPUT_FILES];
    int n_in = 0, n_out = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s LIBRARY.so INPUT.npy... [-o OUTPUT.npy]...\n", argv[0]);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc && n_out < MAX_OUTPUT_FILES) {
            outputs[n_out++] = argv[++i];
        } else if (lib_path == NULL) {
            lib_path = argv[i];
        } else if (n_in < 256) {
            inputs[n_in++] = argv[i];
        }
    }
    if (lib_path == NULL) {
        fprintf(stderr, "usage: %s LIBRARY.so INPUT.npy... [-o OUTPUT.npy]...\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s%s", strchr(lib_path, '/') ? "" : "./", lib_path);
    if (check_library_file(path) != 0) return 1;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) { fprintf(stderr, "run_model: %s\n", dlerror()); return 1; }
    symjit_graphs_fn graphs = (symjit_graphs_fn)dlsym(lib, "symjit_graphs");
    check_fn check = (check_fn)dlsym(lib, "symjit_aot_check");
    lib_alloc = (alloc_fn)dlsym(lib, "symjit_arena_alloc");
    lib_free = (free_fn)dlsym(lib, "symjit_arena_free");
    if (graphs == NULL || lib_alloc == NULL || lib_free == NULL) {
        fprintf(stderr, "run_model: %s is not a symjit AOT library\n", lib_path);
        return 1;
    }
    if (check != NULL && check() != NULL) { fprintf(stderr, "run_model: %s\n", check()); return 1; }
    int32_t count = 0;
    const symjit_graph_desc *g = graphs(&count);
    if (g == NULL || count < 1) { fprintf(stderr, "run_model: the library has no graph\n"); return 1; }
    if (g->abi_version != SYMJIT_ABI_VERSION) {
        fprintf(stderr, "run_model: library ABI %u, this program was built for %d\n", g->abi_version,
                SYMJIT_ABI_VERSION);
        return 1;
    }
    if (n_in != g->n_inputs) {
        fprintf(stderr, "run_model: graph '%s' takes %d inputs, got %d files\n", g->name, g->n_inputs, n_in);
        return 1;
    }
    if (g->n_params > 0 && g->param_data == NULL) {
        fprintf(stderr, "run_model: graph '%s' expects its parameters from the caller; this example needs "
                        "embedded parameters\n", g->name);
        return 1;
    }
    int rc = 1;
    void **in = calloc((size_t)g->n_inputs + 1, sizeof(void *));
    void **out = calloc((size_t)g->n_outputs + 1, sizeof(void *));
    void **params = calloc((size_t)g->n_params + 1, sizeof(void *));
    void *ws = lib_alloc((size_t)g->workspace_size);
    if (in == NULL || out == NULL || params == NULL || ws == NULL) { fprintf(stderr, "run_model: out of memory\n"); goto end; }
    for (int32_t i = 0; i < g->n_params; i++) params[i] = (void *)g->param_data[i];
    for (int32_t i = 0; i < g->n_inputs; i++)
        if ((in[i] = read_npy(inputs[i], &g->inputs[i])) == NULL) goto end;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        size_t esize = 0;
        npy_descr(g->outputs[i].dtype, &esize);
        size_t nbytes = tensor_count(&g->outputs[i]) * esize;
        if ((out[i] = lib_alloc(nbytes ? nbytes : 1)) == NULL) { fprintf(stderr, "run_model: out of memory\n"); goto end; }
    }
    if (g->entry(in, out, params, ws) != SYMJIT_OK) {
        fprintf(stderr, "run_model: graph '%s' failed: %s\n", g->name, g->last_error());
        goto end;
    }
    rc = 0;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        char shape[256];
        shape_text(&g->outputs[i], shape, sizeof shape);
        if (i < n_out) {
            rc |= write_npy(outputs[i], &g->outputs[i], out[i]);
        } else if (g->outputs[i].dtype == SYMJIT_FLOAT32) {
            const float *y = out[i];
            size_t n = tensor_count(&g->outputs[i]);
            printf("output %d '%s' %s:", i, g->outputs[i].name, shape);
            for (size_t k = 0; k < n && k < 8; k++) printf(" %g", y[k]);
            printf(n > 8 ? " ...\n" : "\n");
        } else {
            printf("output %d '%s' %s\n", i, g->outputs[i].name, shape);
        }
    }
end:
    for (int32_t i = 0; in && i < g->n_inputs; i++) lib_free(in[i]);
    for (int32_t i = 0; out && i < g->n_outputs; i++) lib_free(out[i]);
    lib_free(ws);
    free(in);
    free(out);
    free(params);
    return rc;
}
