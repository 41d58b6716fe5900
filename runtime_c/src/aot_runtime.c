/* microaot C runtime: error names and the LIFO arena allocator. See aot_runtime.h. */
#include "aot_runtime.h"

#include <string.h>

const char *aot_error_name(int32_t code) {
    switch (code) {
    case AOT_OK:
        return "AOT_OK";
    case AOT_ERR_NULL_ARGUMENT:
        return "AOT_ERR_NULL_ARGUMENT";
    case AOT_ERR_ALLOCATION:
        return "AOT_ERR_ALLOCATION";
    case AOT_ERR_FREE_ORDER:
        return "AOT_ERR_FREE_ORDER";
    case AOT_ERR_POOL_TOO_SMALL:
        return "AOT_ERR_POOL_TOO_SMALL";
    case AOT_ERR_INTERNAL:
        return "AOT_ERR_INTERNAL";
    case AOT_ERR_INVALID_ARGUMENT:
        return "AOT_ERR_INVALID_ARGUMENT";
    case AOT_ERR_SHAPE_MISMATCH:
        return "AOT_ERR_SHAPE_MISMATCH";
    case AOT_ERR_GUARD:
        return "AOT_ERR_GUARD";
    default:
        return "AOT_ERR_UNKNOWN";
    }
}

/* The header sits immediately before each payload. memcpy keeps its access alignment-safe
 * whatever the payload alignment. */
typedef struct {
    size_t prev_top;
    size_t prev_last;
} aot_arena_header_t;

int32_t aot_arena_init(aot_arena_t *arena, void *mem, size_t size) {
    if (arena == NULL || (mem == NULL && size != 0u)) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    arena->base = (uint8_t *)mem;
    arena->size = size;
    arena->top = 0u;
    arena->high_water = 0u;
    arena->live = 0u;
    arena->last = 0u;
    return AOT_OK;
}

int32_t aot_arena_alloc(aot_arena_t *arena, size_t nbytes, size_t alignment, void **out) {
    uintptr_t base;
    uintptr_t first_free;
    uintptr_t payload;
    size_t payload_offset;
    size_t new_top;
    aot_arena_header_t header;

    if (out == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    *out = NULL;
    if (arena == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    if (alignment == 0u) {
        alignment = AOT_ARENA_MIN_ALIGN;
    }
    if ((alignment & (alignment - 1u)) != 0u) {
        return AOT_ERR_INVALID_ARGUMENT;
    }
    if (alignment < AOT_ARENA_MIN_ALIGN) {
        alignment = AOT_ARENA_MIN_ALIGN;
    }
    if (arena->base == NULL || arena->top > arena->size) {
        return arena->base == NULL ? AOT_ERR_ALLOCATION : AOT_ERR_INTERNAL;
    }
    /* Work in offsets bounded by arena->size so that no pointer is formed out of range and
     * no addition can overflow unnoticed. */
    base = (uintptr_t)arena->base;
    first_free = base + arena->top;
    if (arena->size - arena->top < AOT_ARENA_HEADER_BYTES + (alignment - 1u)) {
        return AOT_ERR_ALLOCATION;
    }
    payload = (first_free + AOT_ARENA_HEADER_BYTES + (alignment - 1u)) & ~(uintptr_t)(alignment - 1u);
    payload_offset = (size_t)(payload - base);
    if (nbytes > arena->size - payload_offset) {
        return AOT_ERR_ALLOCATION;
    }
    new_top = payload_offset + nbytes;

    header.prev_top = arena->top;
    header.prev_last = arena->last;
    memcpy(arena->base + payload_offset - AOT_ARENA_HEADER_BYTES, &header, sizeof(header));

    arena->top = new_top;
    arena->last = payload_offset;
    arena->live += 1u;
    if (new_top > arena->high_water) {
        arena->high_water = new_top;
    }
    *out = arena->base + payload_offset;
    return AOT_OK;
}

int32_t aot_arena_free(aot_arena_t *arena, void *ptr) {
    aot_arena_header_t header;

    if (arena == NULL || ptr == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    if (arena->live == 0u || arena->base == NULL || (uint8_t *)ptr != arena->base + arena->last) {
        return AOT_ERR_FREE_ORDER;
    }
    memcpy(&header, arena->base + arena->last - AOT_ARENA_HEADER_BYTES, sizeof(header));
    if (header.prev_top > arena->last - AOT_ARENA_HEADER_BYTES) {
        return AOT_ERR_INTERNAL; /* the header was overwritten by an out-of-bounds store */
    }
    arena->top = header.prev_top;
    arena->last = header.prev_last;
    arena->live -= 1u;
    return AOT_OK;
}

int32_t aot_arena_reset(aot_arena_t *arena) {
    if (arena == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    arena->top = 0u;
    arena->live = 0u;
    arena->last = 0u;
    return AOT_OK;
}

size_t aot_arena_high_water(const aot_arena_t *arena) {
    return arena == NULL ? 0u : arena->high_water;
}

size_t aot_arena_used(const aot_arena_t *arena) {
    return arena == NULL ? 0u : arena->top;
}

/* Guarded builds: the latest failure the default report hook saw. Not static: a process that
 * loads several copies of the runtime (host shared libraries) keeps one record. */
const char *aot_guard_last_failure = NULL;

__attribute__((weak)) void aot_guard_report(const char *buffer, const char *kernel) {
    aot_guard_last_failure = buffer;
    aot_platform_log("AOT_GUARD buffer ");
    aot_platform_log(buffer);
    aot_platform_log(" overwritten (found after kernel ");
    aot_platform_log(kernel);
    aot_platform_log(")\n");
}

const char *aot_guard_failure(void) {
    return aot_guard_last_failure;
}
