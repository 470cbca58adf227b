/*
 * arena.c -- SYMJIT_ALIGNMENT-aligned allocations for a graph's memory plan.
 *
 * The memory planner packs all intermediate buffers of a graph into one workspace at offsets
 * that are multiples of SYMJIT_ALIGNMENT; this file provides that workspace. Sizes are rounded
 * up to a whole number of cache lines so vector loops may read a full last vector safely.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "symjit_internal.h"

void *symjit_arena_alloc(size_t size) {
    size_t rounded;
    void *ptr = NULL;
    if (size > SIZE_MAX - SYMJIT_ALIGNMENT) {
        symjit_set_error(SYMJIT_ERR_OUT_OF_MEMORY, "arena: cannot allocate %zu bytes", size);
        return NULL;
    }
    rounded = (size + SYMJIT_ALIGNMENT - 1) / SYMJIT_ALIGNMENT * SYMJIT_ALIGNMENT;
    if (rounded == 0) rounded = SYMJIT_ALIGNMENT;
    if (posix_memalign(&ptr, SYMJIT_ALIGNMENT, rounded) != 0) {
        symjit_set_error(SYMJIT_ERR_OUT_OF_MEMORY, "arena: cannot allocate %zu bytes", size);
        return NULL;
    }
    return ptr;
}

void symjit_arena_free(void *ptr) { free(ptr); }

int32_t symjit_arena_reserve(symjit_arena *arena, size_t size) {
    void *fresh;
    if (arena->data != NULL && arena->size >= size) return SYMJIT_OK;
    fresh = symjit_arena_alloc(size);
    if (fresh == NULL) return SYMJIT_ERR_OUT_OF_MEMORY;
    symjit_arena_free(arena->data);
    arena->data = fresh;
    arena->size = size;
    return SYMJIT_OK;
}

void symjit_arena_release(symjit_arena *arena) {
    symjit_arena_free(arena->data);
    arena->data = NULL;
    arena->size = 0;
}
