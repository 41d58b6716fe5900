/*
 * microaot C runtime: the ABI every generated model module links against.
 *
 * Contents
 *   1. Error codes (negative int32_t; 0 is success) and aot_error_name().
 *   2. Platform hooks, declared here and defined once per platform
 *      (platform/host/aot_platform_host.c, platform/cortex_m/aot_platform_cortex_m.c):
 *        aot_platform_allocate / aot_platform_free  (used by the `platform` allocation class)
 *        aot_platform_log                           (verbatim text, no newline added)
 *   3. A LIFO arena allocator (aot_arena_*) over caller-provided memory. No malloc.
 *   4. The report hook of guarded builds (aot_guard_report, weak; aot_guard_failure).
 *
 * C99, freestanding-friendly: needs only <stddef.h>, <stdint.h> and memcpy/memset.
 * No function here calls malloc, printf or abort.
 */
#ifndef AOT_RUNTIME_H
#define AOT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a declaration below changes meaning. */
#define AOT_RUNTIME_ABI_VERSION 1

/* ---- 1. Error codes -------------------------------------------------------------------- */
/* Plain integer literals so they can be used in #if and by the LLVM backend as constants. */
#define AOT_OK 0
#define AOT_ERR_NULL_ARGUMENT (-1)    /* a required pointer argument was NULL */
#define AOT_ERR_ALLOCATION (-2)       /* the allocator has no room (or no allocator at all) */
#define AOT_ERR_FREE_ORDER (-3)       /* free of a pointer that is not the latest live allocation */
#define AOT_ERR_POOL_TOO_SMALL (-4)   /* an application-provided workspace pool is too small */
#define AOT_ERR_INTERNAL (-5)         /* a broken invariant inside the runtime or a model */
#define AOT_ERR_INVALID_ARGUMENT (-6) /* e.g. an alignment that is not a power of two */
#define AOT_ERR_SHAPE_MISMATCH (-7)   /* an input that gives a shape (TRANSPOSE_CONV's output_shape)
                                         differs from the static shape the model was compiled for */
#define AOT_ERR_GUARD (-8)            /* a guarded build (--guards) found a canary overwritten: a kernel
                                         wrote outside its buffer; aot_guard_report names the buffer */

/* Name of an error code ("AOT_OK", "AOT_ERR_FREE_ORDER", ...); "AOT_ERR_UNKNOWN" otherwise.
 * Never returns NULL. */
const char *aot_error_name(int32_t code);

/* ---- 2. Platform hooks (one definition per platform) ----------------------------------- */

/* Allocate nbytes aligned to `alignment` (a power of two; 0 means the platform default).
 * On success store the pointer in *out_ptr and return AOT_OK. nbytes == 0 is allowed and
 * yields a unique pointer that must still be freed. Frees must be in LIFO order on
 * platforms that use the arena (Cortex-M); the host platform accepts any order. */
int32_t aot_platform_allocate(size_t nbytes, size_t alignment, void **out_ptr);

/* Release a pointer returned by aot_platform_allocate. */
int32_t aot_platform_free(void *ptr);

/* Write `msg` verbatim to the platform's log (stderr on the host, semihosting stdout on
 * Cortex-M). No newline is added; callers end their lines with '\n'. */
void aot_platform_log(const char *msg);

/* ---- 3. LIFO arena allocator ----------------------------------------------------------- */

/* Every allocation is preceded by a header holding the previous top and the previous latest
 * allocation, so a free restores the arena exactly. The payload is aligned to
 * max(alignment, AOT_ARENA_MIN_ALIGN) as an absolute address. */
#define AOT_ARENA_MIN_ALIGN (sizeof(size_t))
#define AOT_ARENA_HEADER_BYTES (2u * sizeof(size_t))

/* Upper bound of arena bytes one allocation of `nbytes` with `alignment` can consume
 * (header + worst-case padding + payload). Use it to size an arena for a known sequence of
 * live allocations: the sum of the bounds of the allocations live at once. */
#define AOT_ARENA_ALLOC_BOUND(nbytes, alignment)                                              \
    ((size_t)(nbytes) + AOT_ARENA_HEADER_BYTES +                                              \
     (((size_t)(alignment) > AOT_ARENA_MIN_ALIGN ? (size_t)(alignment) : AOT_ARENA_MIN_ALIGN) \
      - 1u))

typedef struct {
    uint8_t *base;     /* start of the managed memory */
    size_t size;       /* bytes managed */
    size_t top;        /* offset of the first free byte */
    size_t high_water; /* largest `top` ever reached since init */
    size_t live;       /* number of live allocations */
    size_t last;       /* offset of the latest live payload (meaningful when live > 0) */
} aot_arena_t;

/* Manage `size` bytes at `mem`. mem may be NULL only when size == 0 (every allocation then
 * fails with AOT_ERR_ALLOCATION). */
int32_t aot_arena_init(aot_arena_t *arena, void *mem, size_t size);

/* Allocate: AOT_ERR_NULL_ARGUMENT (arena/out NULL), AOT_ERR_INVALID_ARGUMENT (alignment not
 * a power of two; 0 means AOT_ARENA_MIN_ALIGN), AOT_ERR_ALLOCATION (no room; *out = NULL). */
int32_t aot_arena_alloc(aot_arena_t *arena, size_t nbytes, size_t alignment, void **out);

/* Free the latest live allocation; anything else is AOT_ERR_FREE_ORDER and changes nothing. */
int32_t aot_arena_free(aot_arena_t *arena, void *ptr);

/* Drop every allocation (the high-water mark is kept). */
int32_t aot_arena_reset(aot_arena_t *arena);

/* Largest number of bytes (headers and padding included) in use at any time since init. */
size_t aot_arena_high_water(const aot_arena_t *arena);

/* Bytes in use now (headers and padding included). */
size_t aot_arena_used(const aot_arena_t *arena);

/* ---- 4. Guarded builds (--guards) ------------------------------------------------------ */

/* Called once by a guarded model when a canary next to a planned buffer (or at a pool's end) was
 * overwritten: `buffer` names the buffer, `kernel` the kernel after which it was found; the model
 * then returns AOT_ERR_GUARD. The default (a weak definition) writes one line starting with
 * "AOT_GUARD" to aot_platform_log (the board's console) and records the name for
 * aot_guard_failure(); define your own to override it. */
void aot_guard_report(const char *buffer, const char *kernel);

/* The buffer named by the latest report of the default aot_guard_report (NULL: none). A debugging
 * aid of guarded builds: one record per process, not per model. */
const char *aot_guard_failure(void);

#ifdef __cplusplus
}
#endif

#endif /* AOT_RUNTIME_H */
