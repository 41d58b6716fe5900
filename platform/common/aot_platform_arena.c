/*
 * The platform allocation hooks of every bare-metal board project (aot_runtime.h): a static LIFO
 * arena (runtime_c's aot_arena_t) of AOT_PLATFORM_ARENA_BYTES bytes. The default is 0: no arena
 * exists and every allocation fails with AOT_ERR_ALLOCATION, as the `micro` allocation policy
 * expects (all scratch is planned).
 */
#include "aot_runtime.h"

#include <stddef.h>
#include <stdint.h>

#ifndef AOT_PLATFORM_ARENA_BYTES
#define AOT_PLATFORM_ARENA_BYTES 0
#endif

size_t aot_platform_arena_high_water(void);


#if AOT_PLATFORM_ARENA_BYTES > 0
static uint8_t aot_platform_arena_memory[AOT_PLATFORM_ARENA_BYTES] __attribute__((aligned(16)));
static aot_arena_t aot_platform_arena;
static int aot_platform_arena_ready;

static aot_arena_t *aot_platform_get_arena(void) {
    if (!aot_platform_arena_ready) {
        (void)aot_arena_init(&aot_platform_arena, aot_platform_arena_memory,
                             sizeof(aot_platform_arena_memory));
        aot_platform_arena_ready = 1;
    }
    return &aot_platform_arena;
}

int32_t aot_platform_allocate(size_t nbytes, size_t alignment, void **out_ptr) {
    return aot_arena_alloc(aot_platform_get_arena(), nbytes, alignment, out_ptr);
}

int32_t aot_platform_free(void *ptr) {
    return aot_arena_free(aot_platform_get_arena(), ptr);
}

size_t aot_platform_arena_high_water(void) {
    return aot_arena_high_water(aot_platform_get_arena());
}
#else
int32_t aot_platform_allocate(size_t nbytes, size_t alignment, void **out_ptr) {
    (void)nbytes;
    (void)alignment;
    if (out_ptr == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    *out_ptr = NULL;
    return AOT_ERR_ALLOCATION;
}

int32_t aot_platform_free(void *ptr) {
    return ptr == NULL ? AOT_ERR_NULL_ARGUMENT : AOT_ERR_FREE_ORDER;
}

size_t aot_platform_arena_high_water(void) {
    return 0u;
}
#endif
