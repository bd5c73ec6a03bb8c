/* The "cpu-strict" backend: the CPU kernels and parameter math, but device memory is
 * unreadable from host code. All of it lives in one reserved region that is mapped
 * PROT_NONE except while one of this backend's functions runs (a process-wide depth
 * counter: the first entry opens the used part of the region read/write, the last exit
 * closes it again). A host dereference of device memory anywhere else — the trainer, a
 * callback, a checkpoint writer, a strategy, a model — faults at once with SIGSEGV at the
 * offending instruction (run it under gdb, or ASan prints the stack). Tests run the
 * trainer, callbacks, checkpoints, precision, strategies and DistilBERT parity on it
 * (VOLT_ACCELERATOR=cpu-strict); it is slow (two mprotect calls per backend call).
 *
 * The region: VOLT_STRICT_RESERVE bytes (default 64 GiB of address space, MAP_NORESERVE),
 * page-granular first-fit allocation with freed blocks returned to the OS (madvise) and
 * coalesced with their free neighbours.
 *
 * Given back (give_back, as the cuda backend unmaps device granules): whole pages stay
 * PROT_NONE even inside the backend's own functions until recommit, so a strategy that
 * forgets to recommit before a kernel, copy or memset touches them faults here too. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "core/cpu/kernels.h"

typedef struct blk { size_t off, len; struct blk *next; } blk;   /* host memory */

static struct {
    pthread_mutex_t lock;
    char *base;
    size_t reserve, high;          /* bytes reserved; end of the part ever handed out */
    blk *free_list;                /* freed blocks, by offset, neighbours merged (free_insert) */
    blk *used;                     /* live blocks (to find a block's length on free) */
    int depth;
    bool opened;
    size_t (*gone)[2];             /* given-back page ranges [lo, hi) (offsets), sorted, disjoint */
    int n_gone, cap_gone;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void prot(size_t off, size_t len, int p) {
    if (len && mprotect(g.base + off, len, p) != 0) {
        perror("volt cpu-strict: mprotect");
        abort();
    }
}
static void set_prot(int p) {
    prot(0, g.high, p);
    if (p != PROT_NONE)   /* given-back pages stay closed */
        for (int i = 0; i < g.n_gone; i++) prot(g.gone[i][0], g.gone[i][1] - g.gone[i][0], PROT_NONE);
}
/* Room for one more given-back range (lock held). */
static void gone_room(void) {
    if (g.n_gone < g.cap_gone) return;
    int cap = g.cap_gone ? 2 * g.cap_gone : 16;
    size_t (*t)[2] = realloc(g.gone, sizeof *t * (size_t)cap);
    if (!t) { perror("volt cpu-strict: out of memory"); abort(); }
    g.gone = t;
    g.cap_gone = cap;
}
/* The given-back set minus [lo, hi) (lock held); the pages taken out open when inside. */
static void gone_remove(size_t lo, size_t hi) {
    for (int i = 0; i < g.n_gone && lo < hi; i++) {
        size_t a = g.gone[i][0], b = g.gone[i][1];
        if (b <= lo || a >= hi) continue;
        const size_t ca = a > lo ? a : lo, cb = b < hi ? b : hi;
        if (g.depth > 0) prot(ca, cb - ca, PROT_READ | PROT_WRITE);
        if (a < lo && b > hi) {   /* split in two */
            gone_room();
            memmove(&g.gone[i + 2], &g.gone[i + 1], sizeof *g.gone * (size_t)(g.n_gone - i - 1));
            g.gone[i][1] = lo;
            g.gone[i + 1][0] = hi;
            g.gone[i + 1][1] = b;
            g.n_gone++;
            return;
        }
        if (a < lo) g.gone[i][1] = lo;
        else if (b > hi) g.gone[i][0] = hi;
        else {
            memmove(&g.gone[i], &g.gone[i + 1], sizeof *g.gone * (size_t)(g.n_gone - i - 1));
            g.n_gone--;
            i--;
        }
    }
}
/* Add [lo, hi) to the given-back set (lock held) and close it. */
static void gone_add(size_t lo, size_t hi) {
    if (lo >= hi) return;
    gone_remove(lo, hi);   /* keeps the ranges disjoint */
    gone_room();
    int i = 0;
    while (i < g.n_gone && g.gone[i][0] < lo) i++;
    memmove(&g.gone[i + 1], &g.gone[i], sizeof *g.gone * (size_t)(g.n_gone - i));
    g.gone[i][0] = lo;
    g.gone[i][1] = hi;
    g.n_gone++;
    prot(lo, hi - lo, PROT_NONE);
}
/* Entering/leaving a backend function: the region is readable only inside. */
void volt__strict_enter(void) {
    pthread_mutex_lock(&g.lock);
    if (g.depth++ == 0) set_prot(PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&g.lock);
}
void volt__strict_leave(void) {
    pthread_mutex_lock(&g.lock);
    if (--g.depth == 0) set_prot(PROT_NONE);
    pthread_mutex_unlock(&g.lock);
}
#define IN(expr) do { volt__strict_enter(); expr; volt__strict_leave(); } while (0)

static volt_status strict_open(int ordinal, void **ctx, char *err, size_t errlen) {
    (void)ordinal; (void)ctx;
    size_t reserve = (size_t)64 << 30;
    const char *env = getenv("VOLT_STRICT_RESERVE");
    if (env && *env) reserve = (size_t)strtoull(env, NULL, 0);
    void *p = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cpu-strict: cannot reserve %zu bytes of address space", reserve);
        return VOLT_ERR_NOMEM;
    }
    g.base = p;
    g.reserve = reserve;
    g.opened = true;
    return VOLT_OK;
}

/* Put a free block back in the free list, kept sorted by offset with neighbours merged, and a
 * block that ends the handed-out part lowers `high` (its pages closed again): freed memory
 * coalesces as a device allocator's does, so alloc/free cycles of changing sizes (the batch
 * size finder's trials) do not fragment the reserve until nothing large fits. Lock held. */
static void free_insert(blk *b) {
    blk **pp = &g.free_list;
    while (*pp && (*pp)->off < b->off) pp = &(*pp)->next;
    b->next = *pp;
    *pp = b;
    if (b->next && b->off + b->len == b->next->off) {   /* merge with the block after */
        blk *n = b->next;
        b->len += n->len;
        b->next = n->next;
        free(n);
    }
    if (pp != &g.free_list) {   /* merge with the block before */
        blk *prev = (blk *)((char *)pp - offsetof(blk, next));
        if (prev->off + prev->len == b->off) {
            prev->len += b->len;
            prev->next = b->next;
            free(b);
            b = prev;
        }
    }
    if (b->off + b->len == g.high && !b->next) {   /* the top of the handed-out part: give it up */
        g.high = b->off;
        prot(b->off, b->len, PROT_NONE);
        for (pp = &g.free_list; *pp != b; pp = &(*pp)->next) {}
        *pp = NULL;
        free(b);
    }
}

static void *strict_alloc(volt_device *d, size_t bytes) {
    (void)d;
    const size_t pg = volt__cpu_page_size();
    size_t len = ((bytes ? bytes : 1) + pg - 1) / pg * pg;
    pthread_mutex_lock(&g.lock);
    blk **pp = &g.free_list, *b = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->len >= len) { b = *pp; *pp = b->next; break; }
    if (b && b->len > len) {   /* split: the tail stays free */
        blk *rest = malloc(sizeof *rest);
        if (rest) { *rest = (blk){ b->off + len, b->len - len, NULL }; b->len = len; free_insert(rest); }
    }
    if (!b) {
        if (g.high + len > g.reserve || !(b = malloc(sizeof *b))) { pthread_mutex_unlock(&g.lock); return NULL; }
        *b = (blk){ g.high, len, NULL };
        g.high += len;
        if (g.depth > 0 && mprotect(g.base + b->off, len, PROT_READ | PROT_WRITE) != 0) abort();
    }
    b->next = g.used;
    g.used = b;
    pthread_mutex_unlock(&g.lock);
    return g.base + b->off;
}

static void strict_free(volt_device *d, void *p) {
    (void)d;
    if (!p) return;
    pthread_mutex_lock(&g.lock);
    size_t off = (size_t)((char *)p - g.base);
    for (blk **pp = &g.used; *pp; pp = &(*pp)->next)
        if ((*pp)->off == off) {
            blk *b = *pp;
            *pp = b->next;
            gone_remove(b->off, b->off + b->len);
            madvise(g.base + b->off, b->len, MADV_DONTNEED);   /* no memory held; reads zero */
            free_insert(b);
            pthread_mutex_unlock(&g.lock);
            return;
        }
    pthread_mutex_unlock(&g.lock);
    fprintf(stderr, "volt cpu-strict: free of %p, which is not a live device allocation\n", p);
    abort();
}

/* True when p points into device memory (tests and assertions). */
bool volt__strict_owns(const void *p) {
    return g.opened && (const char *)p >= g.base && (const char *)p < g.base + g.reserve;
}

static void s_memset(volt_device *d, void *p, int v, size_t n) { IN(volt__cpu_memset(d, p, v, n)); }
static void s_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k) { IN(volt__cpu_copy(d, dst, src, n, k)); }
static void s_give_back(volt_device *d, void *p, size_t n) {
    IN(volt__cpu_give_back(d, p, n));
    const size_t pg = volt__cpu_page_size(), off = (size_t)((char *)p - g.base);
    pthread_mutex_lock(&g.lock);
    gone_add((off + pg - 1) / pg * pg, (off + n) / pg * pg);   /* the whole pages inside */
    pthread_mutex_unlock(&g.lock);
}
static volt_status s_recommit(volt_device *d, void *p, size_t n) {
    (void)d;
    const size_t pg = volt__cpu_page_size(), off = (size_t)((char *)p - g.base);
    pthread_mutex_lock(&g.lock);
    gone_remove(off / pg * pg, (off + n + pg - 1) / pg * pg);   /* the pages read as zeros (madvised) */
    pthread_mutex_unlock(&g.lock);
    return VOLT_OK;
}
static int64_t s_resident(volt_device *d, const void *p, size_t n) { return volt__cpu_resident_bytes(d, p, n); }
static void s_sync(volt_device *d) { (void)d; }
static volt_device_event *s_event_create(volt_device *d) { (void)d; static char e; return (volt_device_event *)&e; }
static void s_event_noop(volt_device *d, volt_device_event *e) { (void)d; (void)e; }
static int s_count(void) { return 1; }
static unsigned s_caps(volt_device *d) { return volt__cpu_caps(d) & ~(unsigned)VOLT_DEV_HOST_ADDRESSABLE; }

/* Every kernel runs with the region open. */
#define STRICT_KERNEL_(id, nm) \
    static volt_status strict_##id##_fwd(volt_step *s, volt_node *n) { \
        volt__strict_enter(); volt_status r = volt__cpu_##id##_fwd(s, n); volt__strict_leave(); return r; } \
    static volt_status strict_##id##_bwd(volt_step *s, volt_node *n) { \
        volt__strict_enter(); volt_status r = volt__cpu_##id##_bwd(s, n); volt__strict_leave(); return r; }
VOLT_OPS(STRICT_KERNEL_)
#undef STRICT_KERNEL_
static const volt_kernel strict_kernels[VOLT_OP_COUNT] = {
#define STRICT_ENTRY_(id, nm) [VOLT_OP_##id] = { nm, strict_##id##_fwd, strict_##id##_bwd },
    VOLT_OPS(STRICT_ENTRY_)
#undef STRICT_ENTRY_
};

/* Parameter math: each entry runs with the region open. */
static void sp_scale(volt_device *d, float *x, int64_t n, float c) { IN(volt__cpu_pm_scale(d, x, n, c)); }
static void sp_sqnorm_acc(volt_device *d, const float *x, int64_t n, double *acc) { IN(volt__cpu_pm_sqnorm_acc(d, x, n, acc)); }
static void sp_clip_by_norm(volt_device *d, float *x, int64_t n, const double *sq, float mx) {
    IN(volt__cpu_pm_clip_by_norm(d, x, n, sq, mx));
}
static void sp_clip_value(volt_device *d, float *x, int64_t n, float v) { IN(volt__cpu_pm_clip_value(d, x, n, v)); }
static void sp_unscale(volt_device *d, float *x, int64_t n, volt_scaler_state *st) { IN(volt__cpu_pm_unscale(d, x, n, st)); }
static void sp_scaler_update(volt_device *d, volt_scaler_state *st, float g, float b, int64_t i) {
    IN(volt__cpu_pm_scaler_update(d, st, g, b, i));
}
static void sp_update(volt_device *d, const volt_update_args *a) { IN(volt__cpu_pm_update(d, a)); }
static void sp_convert(volt_device *d, void *dst, volt_dtype ddt, const void *src, volt_dtype sdt, int64_t n) {
    IN(volt__cpu_pm_convert(d, dst, ddt, src, sdt, n));
}
static void sp_average(volt_device *d, void *avg, volt_dtype adt, const void *p, volt_dtype pdt, int64_t n,
                       const volt_opt_coef *c, const float *skip) {
    IN(volt__cpu_pm_average(d, avg, adt, p, pdt, n, c, skip));
}
static const volt_param_math strict_pm = {
    .scale = sp_scale, .sqnorm_acc = sp_sqnorm_acc, .clip_by_norm = sp_clip_by_norm, .clip_value = sp_clip_value,
    .unscale = sp_unscale, .scaler_update = sp_scaler_update, .update = sp_update, .convert = sp_convert,
    .average = sp_average,
};

static const volt_backend strict_backend = {
    .version = VOLT_BACKEND_VERSION, .name = "cpu-strict",
    .description = "the CPU kernels with device memory unreadable outside backend calls (tests)",
    .device_count = s_count, .open = strict_open, .caps = s_caps,
    .alloc = strict_alloc, .free = strict_free, .memset = s_memset, .copy = s_copy,
    .give_back = s_give_back, .recommit = s_recommit, .resident_bytes = s_resident,
    .synchronize = s_sync, .event_create = s_event_create, .event_record = s_event_noop,
    .event_wait = s_event_noop, .event_destroy = s_event_noop,
    .kernels = strict_kernels, .pm = &strict_pm,
};

const volt_backend *volt__backend_cpu_strict(void) { return &strict_backend; }
