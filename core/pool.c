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
 * to exactly what the step needs: the pool logs the step's requests and give-backs, and
 * replays them through the same best fit in an unbounded block, whose high-water offset
 * is the size at which the same step lands on the same offsets with no block of its own.
 * For the replay to be the real layout, the free tail of the block (the space past every
 * block handed out) is taken only when no other free segment fits: in the unbounded block
 * the tail is the one segment that always fits, and it must not win a best fit there that
 * the bounded tail would lose. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

#define POOL_ALIGN 64
/* 0 when n rounded up does not fit a size_t (no request is served from a wrapped size) */
static size_t align_up(size_t n) { return n > SIZE_MAX - (POOL_ALIGN - 1) ? 0 : (n + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1); }

static bool grow_array(void **arr, int *cap, size_t elem, uint64_t *allocs) {
    int nc = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, elem * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    (*allocs)++;
    return true;
}

/* ---- segments: a block's layout by offset, shared by the pool and its replay -------------- */
typedef struct segs { volt_pool_seg **seg; int *n, *cap; uint64_t *allocs; } segs;

/* Best fit for bytes (aligned) among the free segments, the tail (a free last segment) only
 * when nothing else fits; the segment is split, its head handed out as block `id`.
 * false: nothing fits, or no memory for the segment list. */
static bool seg_take(segs g, size_t bytes, int id, size_t *off) {
    volt_pool_seg *sg = *g.seg;
    const int n = *g.n;
    int best = -1;
    for (int i = 0; i < n - 1; i++)
        if (sg[i].free && sg[i].size >= bytes && (best < 0 || sg[i].size < sg[best].size)) {
            best = i;
            if (sg[i].size == bytes) break;
        }
    if (best < 0 && n > 0 && sg[n - 1].free && sg[n - 1].size >= bytes) best = n - 1;
    if (best < 0) return false;
    if (sg[best].size > bytes) {   /* split: the rest stays free */
        if (*g.n == *g.cap && !grow_array((void **)g.seg, g.cap, sizeof **g.seg, g.allocs)) return false;
        sg = *g.seg;
        memmove(sg + best + 2, sg + best + 1, sizeof *sg * (size_t)(n - best - 1));
        sg[best + 1] = (volt_pool_seg){ .off = sg[best].off + bytes, .size = sg[best].size - bytes, .free = true };
        sg[best].size = bytes;
        (*g.n)++;
    }
    sg[best].free = false;
    sg[best].id = id;
    *off = sg[best].off;
    return true;
}

/* Give back the block at off; merges free neighbours. Its id and size, or id -1 when no
 * block starts there. */
static int seg_give(segs g, size_t off, size_t *size) {
    volt_pool_seg *sg = *g.seg;
    int lo = 0, hi = *g.n - 1, i = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (sg[mid].off == off) { i = mid; break; }
        if (sg[mid].off < off) lo = mid + 1;
        else hi = mid - 1;
    }
    if (i < 0 || sg[i].free) return -1;
    const int id = sg[i].id;
    *size = sg[i].size;
    sg[i].free = true;
    if (i + 1 < *g.n && sg[i + 1].free) {   /* merge the next one into i */
        sg[i].size += sg[i + 1].size;
        memmove(&sg[i + 1], &sg[i + 2], sizeof *sg * (size_t)(*g.n - i - 2));
        (*g.n)--;
    }
    if (i > 0 && sg[i - 1].free) {          /* merge i into the previous one */
        sg[i - 1].size += sg[i].size;
        memmove(&sg[i], &sg[i + 1], sizeof *sg * (size_t)(*g.n - i - 1));
        (*g.n)--;
    }
    return id;
}

static segs pool_segs(volt_pool *p) { return (segs){ &p->seg, &p->n_seg, &p->cap_seg, &p->heap_allocs }; }

static void segs_reset(volt_pool *p) {
    p->n_seg = 0;
    if (p->cap) p->seg[p->n_seg++] = (volt_pool_seg){ .off = 0, .size = p->cap, .free = true };
}

/* The step's log: a request's bytes (> 0) or ~id of a block given back (< 0). A log that
 * cannot grow stops the replay (the regrow falls back to the live peak plus a quarter). */
static void log_event(volt_pool *p, int64_t e) {
    if (p->log_broken) return;
    if (p->n_log == p->cap_log && !grow_array((void **)&p->log, &p->cap_log, sizeof *p->log, &p->heap_allocs)) {
        p->log_broken = true;
        return;
    }
    p->log[p->n_log++] = e;
}

void volt__pool_init(volt_pool *p, volt_device *dev) { *p = (volt_pool){ .dev = dev }; }

void *volt__pool_alloc(volt_pool *p, size_t bytes) {
    bytes = align_up(bytes ? bytes : 1);
    if (!bytes || bytes > (size_t)INT64_MAX) return NULL;   /* the log keeps sizes as int64 */
    const int id = p->n_ids;
    size_t off;
    void *ptr;
    if (p->cap && seg_take(pool_segs(p), bytes, id, &off)) {
        ptr = p->base + off;
    } else {   /* does not fit: a block of its own until the next reset regrows the pool */
        if (p->n_ext == p->cap_ext && !grow_array((void **)&p->ext, &p->cap_ext, sizeof *p->ext, &p->heap_allocs))
            return NULL;
        if (!(ptr = volt__dev_alloc(p->dev, bytes))) return NULL;
        p->ext[p->n_ext++] = (volt_pool_ext){ ptr, bytes, id };
        p->overflowed = true;
        p->heap_allocs++;
    }
    p->n_ids++;
    log_event(p, (int64_t)bytes);
    p->used += bytes;
    if (p->used > p->step_peak) p->step_peak = p->used;
    return ptr;
}

void volt__pool_release(volt_pool *p, void *ptr) {
    if (!ptr) return;
    char *c = ptr;
    if (p->base && c >= p->base && c < p->base + p->cap) {
        size_t size = 0;
        const int id = seg_give(pool_segs(p), (size_t)(c - p->base), &size);
        if (id < 0) return;   /* not a block of ours: nothing to give back */
        p->used -= size;
        log_event(p, ~(int64_t)id);
        return;
    }
    for (int i = 0; i < p->n_ext; i++)
        if (p->ext[i].ptr == ptr) {
            p->used -= p->ext[i].bytes;
            log_event(p, ~(int64_t)p->ext[i].id);
            volt__dev_free(p->dev, ptr);
            p->ext[i] = p->ext[--p->n_ext];
            return;
        }
}

/* The size at which the logged step lands in the main block: its replay through seg_take
 * in an unbounded block, the highest offset reached. 0 when the replay cannot run. */
static size_t replay_high_water(volt_pool *p) {
    if (p->log_broken) return 0;
    if (p->cap_off < p->n_ids) {
        size_t *o = realloc(p->off, sizeof *o * (size_t)p->n_ids);
        if (!o) return 0;
        p->off = o;
        p->cap_off = p->n_ids;
        p->heap_allocs++;
    }
    int n = 0;
    if (!p->cap_sim && !grow_array((void **)&p->sim, &p->cap_sim, sizeof *p->sim, &p->heap_allocs)) return 0;
    p->sim[n++] = (volt_pool_seg){ .off = 0, .size = SIZE_MAX / 4, .free = true };
    segs g = { &p->sim, &n, &p->cap_sim, &p->heap_allocs };
    size_t hw = 0;
    int id = 0;
    for (int i = 0; i < p->n_log; i++) {
        const int64_t e = p->log[i];
        size_t size;
        if (e > 0) {
            if (!seg_take(g, (size_t)e, id, &p->off[id])) return 0;
            if (p->off[id] + (size_t)e > hw) hw = p->off[id] + (size_t)e;
            id++;
        } else if (seg_give(g, p->off[~e], &size) < 0) {
            return 0;
        }
    }
    return hw;
}

void volt__pool_reset(volt_pool *p) {
    for (int i = 0; i < p->n_ext; i++) volt__dev_free(p->dev, p->ext[i].ptr);
    p->n_ext = 0;
    if (p->overflowed) {
        size_t want = replay_high_water(p);
        if (!want) want = align_up(p->step_peak + p->step_peak / 4);   /* no replay: the old margin */
        if (want > p->cap) {
            char *nb = volt__dev_alloc(p->dev, want);
            if (nb) {   /* on failure keep the old block: the next step overflows again */
                if (p->base) volt__dev_free(p->dev, p->base);
                p->base = nb;
                p->cap = want;
                p->heap_allocs++;
            }
        }
        if (!p->cap_seg && !grow_array((void **)&p->seg, &p->cap_seg, sizeof *p->seg, &p->heap_allocs)) {
            if (p->base) volt__dev_free(p->dev, p->base);
            p->base = NULL;
            p->cap = 0;
        }
    }
    p->overflowed = false;
    p->log_broken = false;
    p->n_log = 0;
    p->n_ids = 0;
    p->step_peak = 0;
    p->used = 0;
    segs_reset(p);
}

void volt__pool_free(volt_pool *p) {
    for (int i = 0; i < p->n_ext; i++) volt__dev_free(p->dev, p->ext[i].ptr);
    if (p->base) volt__dev_free(p->dev, p->base);
    free(p->seg);
    free(p->ext);
    free(p->log);
    free(p->sim);
    free(p->off);
    *p = (volt_pool){ 0 };
}
