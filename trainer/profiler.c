/* profiler = "simple": Lightning's SimpleProfiler. The loop times its actions — a training
 * batch (the step and the optimizer boundary; on cuda the step's logged values are read back
 * at its end, so the time is the device's too), fetching a batch, validation and test steps,
 * each callback and module hook, setup, loading a checkpoint — and sums them per action
 * name; at the end of fit / validate / test / predict rank 0 prints one table to stdout
 * (Lightning's "FIT Profiler Report"): per action the mean, the calls, the total and its
 * share of the stage's wall time. The figures stay readable (volt_trainer_profiler_action)
 * until the next stage starts. Off (the default), an action costs one test of t->prof. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/clock.h"
#include "trainer/trainer_internal.h"

typedef struct prof_action {
    const char *kind, *who, *what;   /* the caller's strings (literals, ops names): the fast match */
    char name[112];
    double total;
    int64_t calls;
} prof_action;

struct volt_prof {
    prof_action *a;
    int n, cap;
    double t0;                       /* the stage's start */
    char stage[16];
};

volt_status volt__prof_check(volt_trainer *t) {
    const char *p = t->cfg.profiler;
    if (!p || !*p) { t->cfg.profiler = NULL; return VOLT_OK; }
    if (strcmp(p, "simple") != 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: profiler must be \"simple\" or none, got \"%s\"", p);
    t->cfg.profiler = "simple";
    if (!(t->prof = calloc(1, sizeof *t->prof))) return volt__terr(t, VOLT_ERR_NOMEM, "trainer: out of memory (profiler)");
    return VOLT_OK;
}

void volt__prof_destroy(volt_trainer *t) {
    if (!t->prof) return;
    free(t->prof->a);
    free(t->prof);
    t->prof = NULL;
}

void volt__prof_stage(volt_trainer *t, const char *stage) {
    volt_prof *p = t->prof;
    if (!p) return;
    p->n = 0;
    p->t0 = volt__now();
    snprintf(p->stage, sizeof p->stage, "%s", stage);
}

/* The caller's strings are literals and callback names that live as long as the trainer, so
 * an action is found by pointer; the name is formatted (and compared, as two equal literals
 * may have two addresses) only when the pointers are new. A new action grows the table. */
void volt__prof_record(volt_trainer *t, const char *kind, const char *who, const char *what, double t_start) {
    volt_prof *p = t->prof;
    const double dt = volt__now() - t_start;
    prof_action *a = NULL;
    for (int i = 0; i < p->n && !a; i++)
        if (p->a[i].kind == kind && p->a[i].who == who && p->a[i].what == what) a = &p->a[i];
    if (!a) {
        char name[sizeof p->a[0].name];
        if (kind) snprintf(name, sizeof name, "[%s]%s.%s", kind, who ? who : "?", what);
        else snprintf(name, sizeof name, "%s", what);
        for (int i = 0; i < p->n && !a; i++)
            if (!strcmp(p->a[i].name, name)) a = &p->a[i];
        if (!a) {
            if (p->n == p->cap) {
                int cap = p->cap ? 2 * p->cap : 32;
                prof_action *na = realloc(p->a, (size_t)cap * sizeof *na);
                if (!na) return;   /* the figure is lost, nothing else */
                p->a = na;
                p->cap = cap;
            }
            a = &p->a[p->n++];
            *a = (prof_action){ .kind = kind, .who = who, .what = what };
            snprintf(a->name, sizeof a->name, "%s", name);
        }
    }
    a->total += dt;
    a->calls++;
}

static int by_total(const void *x, const void *y) {
    const prof_action *a = x, *b = y;
    return a->total < b->total ? 1 : a->total > b->total ? -1 : strcmp(a->name, b->name);
}

void volt__prof_report(volt_trainer *t) {
    volt_prof *p = t->prof;
    if (!p || !p->stage[0] || t->rank != 0) return;
    const double wall = volt__now() - p->t0;
    prof_action *s = malloc((size_t)(p->n ? p->n : 1) * sizeof *s);
    if (!s) return;
    memcpy(s, p->a, (size_t)p->n * sizeof *s);
    qsort(s, (size_t)p->n, sizeof *s, by_total);
    int64_t calls = 0;
    for (int i = 0; i < p->n; i++) calls += s[i].calls;
    char up[sizeof p->stage];   /* "fit" -> "FIT" */
    for (size_t k = 0; k < sizeof up; k++) up[k] = (char)toupper((unsigned char)p->stage[k]);
    char rule[134];   /* as wide as the rows */
    memset(rule, '-', sizeof rule - 1);
    rule[sizeof rule - 1] = 0;
    printf("%s Profiler Report\n\n%s\n|  %-60s|  %-18s|  %-11s|  %-15s|  %-13s|\n%s\n", up, rule, "Action", "Mean duration (s)",
           "Num calls", "Total time (s)", "Percentage %", rule);
    printf("|  %-60s|  %-18s|  %-11lld|  %-15.5g|  %-13s|\n%s\n", "Total", "-", (long long)calls, wall, "100 %", rule);
    for (int i = 0; i < p->n; i++)
        printf("|  %-60.60s|  %-18.5g|  %-11lld|  %-15.5g|  %-13.5g|\n", s[i].name, s[i].total / (double)s[i].calls,
               (long long)s[i].calls, s[i].total, wall > 0 ? 100.0 * s[i].total / wall : 0.0);
    printf("%s\n\n", rule);
    fflush(stdout);
    free(s);
}

bool volt_trainer_profiler_action(const volt_trainer *t, const char *name, int64_t *calls, double *total_s) {
    if (!t || !t->prof || !name) return false;
    for (int i = 0; i < t->prof->n; i++)
        if (!strcmp(t->prof->a[i].name, name)) {
            if (calls) *calls = t->prof->a[i].calls;
            if (total_s) *total_s = t->prof->a[i].total;
            return true;
        }
    return false;
}
