/* Per-op profile of a step's kernels (VOLT_PROFILE=1 in the environment): wall time of every
 * op's forward and backward kernel and of the grad set-up (allocation, zeroing) before each
 * backward kernel, summed per op over the step's begin/end cycles after the first
 * VOLT_PROFILE_WARMUP (default 1: the first step pays first-touch page faults), and printed
 * to stderr when the step is destroyed. What a step spends outside its kernels (tape
 * recording, an optimizer step run between backward and volt_step_end, host code) is the
 * begin-to-end time minus the kernels. On a backend whose kernels run asynchronously (cuda)
 * every timed call synchronizes the device first, so the profile is exact and the run slower
 * (not while a graph is captured: a compiled step's replays run no step kernels to time).
 * Nothing is allocated per step: one table of VOLT_OP_COUNT rows, made at step create. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

struct volt_profile {
    int warmup;            /* begin/end cycles not counted */
    uint64_t cycles;       /* begins seen */
    uint64_t steps;        /* counted cycles */
    bool on;               /* counting the current cycle */
    double t_begin, t_total;
    double fwd[VOLT_OP_COUNT], bwd[VOLT_OP_COUNT], setup;
    uint64_t nf[VOLT_OP_COUNT], nb[VOLT_OP_COUNT];
};

volt_status volt__profile_create(volt_step *s) {
    const char *e = getenv("VOLT_PROFILE");
    if (!e || !*e || !strcmp(e, "0")) return VOLT_OK;
    if (!(s->prof = calloc(1, sizeof *s->prof))) return VOLT_ERR_NOMEM;
    const char *w = getenv("VOLT_PROFILE_WARMUP");
    s->prof->warmup = 1;
    if (w && *w) {
        char *end;
        long v = strtol(w, &end, 10);
        if (*end || v < 0 || v > 1000000) {
            fprintf(stderr, "volt: VOLT_PROFILE_WARMUP='%s' is not a step count (0 ... 1000000); using 1\n", w);
            v = 1;
        }
        s->prof->warmup = (int)v;
    }
    return VOLT_OK;
}

static double stamp(volt_step *s) {
    /* async kernels: wait for them, except while a graph is captured (nothing runs then,
     * and a capture refuses synchronize) */
    if (!volt__dev_host_addressable(s->dev) && !s->dev->capturing) s->be->synchronize(s->dev);
    return volt__now();
}

void volt__profile_begin(volt_step *s) {
    volt_profile *p = s->prof;
    p->on = p->cycles++ >= (uint64_t)p->warmup;
    if (p->on) p->t_begin = stamp(s);
}

void volt__profile_end(volt_step *s) {
    volt_profile *p = s->prof;
    if (!p->on) return;
    p->t_total += stamp(s) - p->t_begin;
    p->steps++;
    p->on = false;
}

double volt__profile_mark(volt_step *s) { return s->prof->on ? stamp(s) : 0.; }

void volt__profile_add(volt_step *s, volt_op_id op, int what, double t0) {
    volt_profile *p = s->prof;
    if (!p->on) return;
    double dt = stamp(s) - t0;
    if (what == 0) { p->fwd[op] += dt; p->nf[op]++; }
    else if (what == 1) { p->bwd[op] += dt; p->nb[op]++; }
    else p->setup += dt;
}

/* The table, rows by total time, into buf (always terminated). */
size_t volt__profile_format(const volt_step *s, char *buf, size_t len) {
    const volt_profile *p = s->prof;
    size_t at = 0;
#define PUT(...) do { if (at < len) { int w_ = snprintf(buf + at, len - at, __VA_ARGS__); \
                                       if (w_ > 0) at += (size_t)w_; } } while (0)
    if (len) buf[0] = 0;
    if (!p) return 0;
    if (!p->steps) {
        PUT("volt profile (%s): no step counted (%llu seen, %d warm-up)\n", s->be->name,
            (unsigned long long)p->cycles, p->warmup);
        return at;
    }
    double n = (double)p->steps, ms = 1e3 / n, kernels = p->setup;
    int order[VOLT_OP_COUNT], k = 0;
    for (int i = 0; i < VOLT_OP_COUNT; i++) {
        kernels += p->fwd[i] + p->bwd[i];
        if (p->nf[i] || p->nb[i]) order[k++] = i;
    }
    for (int i = 1; i < k; i++)   /* insertion sort by total, largest first */
        for (int j = i; j > 0 && p->fwd[order[j]] + p->bwd[order[j]] > p->fwd[order[j - 1]] + p->bwd[order[j - 1]]; j--) {
            int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    double step = p->t_total * ms;
    PUT("volt profile (%s): %llu steps after %d warm-up, %.2f ms per step (begin to end)\n", s->be->name,
        (unsigned long long)p->steps, p->warmup, step);
    PUT("| op | calls/step | forward ms | backward ms | total ms | %% of step |\n|---|---:|---:|---:|---:|---:|\n");
    for (int r = 0; r < k; r++) {
        int i = order[r];
        double t = (p->fwd[i] + p->bwd[i]) * ms;
        PUT("| %s | %.0f | %.3f | %.3f | %.3f | %.1f |\n", s->be->kernels[i].name, (double)p->nf[i] / n,
            p->fwd[i] * ms, p->bwd[i] * ms, t, step > 0 ? 100. * t / step : 0.);
    }
    PUT("| (grad set-up: allocation, zeroing) | | | %.3f | %.3f | %.1f |\n", p->setup * ms, p->setup * ms,
        step > 0 ? 100. * p->setup * ms / step : 0.);
    double rest = step - kernels * ms;
    PUT("| (outside kernels: recording, optimizer, host code) | | | | %.3f | %.1f |\n", rest,
        step > 0 ? 100. * rest / step : 0.);
#undef PUT
    return at < len ? at : len ? len - 1 : 0;
}

void volt__profile_destroy(volt_step *s) {
    if (!s->prof) return;
    char buf[8192];
    volt__profile_format(s, buf, sizeof buf);
    fputs(buf, stderr);
    free(s->prof);
    s->prof = NULL;
}
