/*
 * Host (POSIX / any hosted C99) platform hooks for microaot's runtime.
 *
 * aot_platform_allocate: malloc with the requested alignment honoured by over-allocating
 *   and keeping the original pointer just below the aligned payload. Any free order works.
 * aot_platform_log: writes the text verbatim to stderr.
 */
#include "aot_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t aot_platform_allocate(size_t nbytes, size_t alignment, void **out_ptr) {
    void *raw;
    uintptr_t payload;
    size_t extra;

    if (out_ptr == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    *out_ptr = NULL;
    if (alignment == 0u) {
        alignment = sizeof(void *);
    }
    if ((alignment & (alignment - 1u)) != 0u) {
        return AOT_ERR_INVALID_ARGUMENT;
    }
    if (alignment < sizeof(void *)) {
        alignment = sizeof(void *);
    }
    extra = alignment - 1u + sizeof(void *);
    if (nbytes > (size_t)-1 - extra) {
        return AOT_ERR_ALLOCATION;
    }
    raw = malloc(nbytes + extra);
    if (raw == NULL) {
        return AOT_ERR_ALLOCATION;
    }
    payload = ((uintptr_t)raw + sizeof(void *) + (alignment - 1u)) & ~(uintptr_t)(alignment - 1u);
    memcpy((void *)(payload - sizeof(void *)), &raw, sizeof(raw));
    *out_ptr = (void *)payload;
    return AOT_OK;
}

int32_t aot_platform_free(void *ptr) {
    void *raw;

    if (ptr == NULL) {
        return AOT_ERR_NULL_ARGUMENT;
    }
    memcpy(&raw, (uint8_t *)ptr - sizeof(void *), sizeof(raw));
    free(raw);
    return AOT_OK;
}

void aot_platform_log(const char *msg) {
    if (msg != NULL) {
        fputs(msg, stderr);
    }
}
