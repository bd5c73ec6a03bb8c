/* Grad pool: device memory for activation gradients, which backward frees as it goes.
 *
 * The step arena (core/arena.c) only bumps: everything in it lives until the step ends. A
 * gradient of an activation is dead once backward has run the node that produced the
 * activation, so keeping every one of them to the end of the step doubles the memory of
 * a training step (forward's activations + all their gradients). The pool hands out and
 * takes back blocks of one device block: best fit over a segment list kept on the host
 * (sorted by offset, free neighbours merged), so the same sequence of requests — a
 * training step of the same shape — lands on the same offsets every time and never
 * allocates. A request that does not fit is served by a block of its own from the
 * backend (freed as soon as it is given back); at the next reset the main block is regrown
 * to the step's peak plus a quarter for fragmentation, so a step of the same shape fits. */
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

#define POOL_ALIGN 64
static size_t align_up(size_t n) { return (n + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1); }

static bool grow_array(void **arr, int *cap, size_t elem, uint64_t *allocs) {
    int nc = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, elem * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    (*allocs)++;
    return true;
}

static void segs_reset(volt_pool *p) {
    p->n_seg = 0;
    if (p->cap) p->seg[p->n_seg++] = (volt_pool_seg){ .off = 0, .size = p->cap, .free = true };
}

void volt__pool_init(volt_pool *p, volt_device *dev) { *p = (volt_pool){ .dev = dev }; }

void *volt__pool_alloc(volt_pool *p, size_t bytes) {
    bytes = align_up(bytes ? bytes : 1);
    int best = -1;
    for (int i = 0; i < p->n_seg; i++)
        if (p->seg[i].free && p->seg[i].size >= bytes && (best < 0 || p->seg[i].size < p->seg[best].size)) {
            best = i;
            if (p->seg[i].size == bytes) break;
        }
    void *ptr;
    if (best >= 0) {
        volt_pool_seg *sg = &p->seg[best];
        if (sg->size > bytes) {   /* split: the tail stays free */
            if (p->n_seg == p->cap_seg && !grow_array((void **)&p->seg, &p->cap_seg, sizeof *p->seg, &p->heap_allocs))
                return NULL;
            sg = &p->seg[best];
            memmove(sg + 2, sg + 1, sizeof *sg * (size_t)(p->n_seg - best - 1));
            sg[1] = (volt_pool_seg){ .off = sg->off + bytes, .size = sg->size - bytes, .free = true };
            sg->size = bytes;
            p->n_seg++;
        }
        sg->free = false;
        ptr = p->base + sg->off;
    } else {   /* does not fit: a block of its own until the next reset regrows the pool */
        if (p->n_ext == p->cap_ext && !grow_array((void **)&p->ext, &p->cap_ext, sizeof *p->ext, &p->heap_allocs))
            return NULL;
        if (!(ptr = volt__dev_alloc(p->dev, bytes))) return NULL;
        p->ext[p->n_ext++] = (volt_pool_ext){ ptr, bytes };
        p->overflowed = true;
        p->heap_allocs++;
    }
    p->used += bytes;
    if (p->used > p->step_peak) p->step_peak = p->used;
    return ptr;
}

void volt__pool_release(volt_pool *p, void *ptr) {
    if (!ptr) return;
    char *c = ptr;
    if (p->base && c >= p->base && c < p->base + p->cap) {
        size_t off = (size_t)(c - p->base);
        int lo = 0, hi = p->n_seg - 1, i = -1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (p->seg[mid].off == off) { i = mid; break; }
            if (p->seg[mid].off < off) lo = mid + 1;
            else hi = mid - 1;
        }
        if (i < 0 || p->seg[i].free) return;   /* not a block of ours: nothing to give back */
        p->used -= p->seg[i].size;
        p->seg[i].free = true;
        if (i + 1 < p->n_seg && p->seg[i + 1].free) {   /* merge the next one into i */
            p->seg[i].size += p->seg[i + 1].size;
            memmove(&p->seg[i + 1], &p->seg[i + 2], sizeof *p->seg * (size_t)(p->n_seg - i - 2));
            p->n_seg--;
        }
        if (i > 0 && p->seg[i - 1].free) {              /* merge i into the previous one */
            p->seg[i - 1].size += p->seg[i].size;
            memmove(&p->seg[i], &p->seg[i + 1], sizeof *p->seg * (size_t)(p->n_seg - i - 1));
            p->n_seg--;
        }
        return;
    }
    for (int i = 0; i < p->n_ext; i++)
        if (p->ext[i].ptr == ptr) {
            p->used -= p->ext[i].bytes;
            volt__dev_free(p->dev, ptr);
            p->ext[i] = p->ext[--p->n_ext];
            return;
        }
}

void volt__pool_reset(volt_pool *p) {
    for (int i = 0; i < p->n_ext; i++) volt__dev_free(p->dev, p->ext[i].ptr);
    p->n_ext = 0;
    if (p->overflowed) {
        size_t want = align_up(p->step_peak + p->step_peak / 4);
        if (want < p->cap + p->cap / 4) want = align_up(p->cap + p->cap / 4);
        char *nb = volt__dev_alloc(p->dev, want);
        if (nb) {   /* on failure keep the old block: the next step overflows again */
            if (p->base) volt__dev_free(p->dev, p->base);
            p->base = nb;
            p->cap = want;
            p->heap_allocs++;
        }
        if (!p->cap_seg && !grow_array((void **)&p->seg, &p->cap_seg, sizeof *p->seg, &p->heap_allocs)) {
            if (p->base) volt__dev_free(p->dev, p->base);
            p->base = NULL;
            p->cap = 0;
        }
    }
    p->overflowed = false;
    p->step_peak = 0;
    p->used = 0;
    segs_reset(p);
}

void volt__pool_free(volt_pool *p) {
    for (int i = 0; i < p->n_ext; i++) volt__dev_free(p->dev, p->ext[i].ptr);
    if (p->base) volt__dev_free(p->dev, p->base);
    free(p->seg);
    free(p->ext);
    *p = (volt_pool){ 0 };
}
