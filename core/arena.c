/* Step arena: one main block, bump-allocated; overflow blocks only until the arena has
 * seen the step's peak, after which the main block is regrown to exactly that peak and
 * steps of that shape never allocate.
 * Blocks are device memory from the arena's backend (volt__dev_alloc), or host memory
 * when the arena has no device (the step's bookkeeping). Block headers of overflow blocks
 * are host memory either way: host code walks the list. */
#include <stdlib.h>
#include "core/internal.h"

#define ARENA_ALIGN 64
/* 0 when n rounded up does not fit a size_t (callers fail: no block of a wrapped size) */
static size_t align_up(size_t n) { return n > SIZE_MAX - (ARENA_ALIGN - 1) ? 0 : (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

static void *block_alloc(volt_arena *a, size_t bytes) {
    return a->dev ? volt__dev_alloc(a->dev, bytes) : aligned_alloc(ARENA_ALIGN, bytes);
}
static void block_free(volt_arena *a, void *p) {
    if (a->dev) volt__dev_free(a->dev, p);
    else free(p);
}

volt_status volt__arena_init(volt_arena *a, volt_device *dev, size_t cap) {
    *a = (volt_arena){ .dev = dev };
    cap = align_up(cap ? cap : 1);
    if (!cap) return VOLT_ERR_NOMEM;
    a->base = block_alloc(a, cap);
    if (!a->base) return VOLT_ERR_NOMEM;
    a->cap = cap;
    a->heap_allocs = 1;
    return VOLT_OK;
}

void *volt__arena_alloc(volt_arena *a, size_t bytes) {
    bytes = align_up(bytes ? bytes : 1);
    if (!bytes) return NULL;
    void *p;
    if (bytes <= a->cap - a->used) {
        p = a->base + a->used;
        a->used += bytes;
    } else {
        volt_arena_block *b = a->overflow;
        if (!b || bytes > b->cap - b->used) {
            size_t cap = align_up(bytes > (a->cap / 2) ? bytes : a->cap / 2);
            if (!(b = malloc(sizeof *b))) return NULL;
            if (!(b->base = block_alloc(a, cap))) { free(b); return NULL; }
            a->heap_allocs++;
            b->cap = cap;
            b->used = 0;
            b->next = a->overflow;
            a->overflow = b;
        }
        p = b->base + b->used;
        b->used += bytes;
        a->overflow_used += bytes;
    }
    size_t in_use = a->used + a->overflow_used;
    if (in_use > a->peak) a->peak = in_use;
    return p;
}

void volt__arena_reset(volt_arena *a) {
    if (a->overflow) {
        while (a->overflow) {
            volt_arena_block *n = a->overflow->next;
            block_free(a, a->overflow->base);
            free(a->overflow);
            a->overflow = n;
        }
        /* exactly the peak: a step of the same shape bumps through the same aligned sizes */
        size_t cap = align_up(a->peak);
        char *nb = cap ? block_alloc(a, cap) : NULL;
        if (nb) {   /* on failure keep the old block: the next step overflows again */
            block_free(a, a->base);
            a->base = nb;
            a->cap = cap;
            a->heap_allocs++;
        }
    }
    a->used = 0;
    a->overflow_used = 0;
}

void volt__arena_free(volt_arena *a) {
    volt__arena_reset(a);
    if (a->base) block_free(a, a->base);
    *a = (volt_arena){ 0 };
}
