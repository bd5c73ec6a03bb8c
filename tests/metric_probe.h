/* tests/metric_probe.h — a probe callback for the monitor tests (test_callback_throughput.c,
 * test_callback_device_stats.c): at each train batch end (added after the monitor, so it runs
 * after it) it records the global step and the fresh metrics whose names start with `prefix`. */
#ifndef VOLT_TESTS_METRIC_PROBE_H
#define VOLT_TESTS_METRIC_PROBE_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "volt/trainer.h"

enum { PROBE_MAXB = 64, PROBE_MAXK = 24 };
typedef struct rec { int n; char names[PROBE_MAXK][80]; double vals[PROBE_MAXK]; int64_t gs; } rec;
typedef struct probe {
    rec at[PROBE_MAXB];
    int n;
    const char *prefix;   /* the metrics kept */
    double spin_s;        /* > 0: a busy loop of that long at each train batch start */
} probe;

static void probe_visit(void *ctx, const char *name, double v, unsigned flags) {
    (void)flags;
    probe *p = ctx;
    rec *r = &p->at[p->n];
    if (strncmp(name, p->prefix, strlen(p->prefix)) || r->n == PROBE_MAXK) return;
    snprintf(r->names[r->n], sizeof r->names[0], "%s", name);
    r->vals[r->n++] = v;
}

static double probe_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static volatile double probe_sink;
static volt_status probe_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)t; (void)b; (void)i;
    const probe *p = self;
    if (p->spin_s > 0) {
        double x = 0;
        for (const double t0 = probe_now_s(); probe_now_s() - t0 < p->spin_s;)
            for (int k = 0; k < 1000; k++) x += sqrt((double)k);
        probe_sink = x;
    }
    return VOLT_OK;
}
static volt_status probe_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    probe *p = self;
    if (p->n == PROBE_MAXB) return VOLT_OK;
    p->at[p->n] = (rec){ .gs = volt_trainer_global_step(t) };
    volt_trainer_visit_fresh_metrics(t, probe_visit, p);
    p->n++;
    return VOLT_OK;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Probe",
                                             .on_train_batch_start = probe_batch_start,
                                             .on_train_batch_end = probe_batch_end };

/* the value of name in record r; NAN when absent */
static double rv(const rec *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->names[i], name)) return r->vals[i];
    return NAN;
}
#endif
