/* A scheduler whose lr leaves float's range (core/sched.c, core/optim.c): StepLR with gamma > 1
 * (PyTorch accepts it, so does volt's config check) makes base x gamma^(step // step_size)
 * overflow to inf, or NaN where the base lr is 0 (0 x inf). The optimizer step that would use
 * such an lr fails with VOLT_ERR_NUMERIC naming the scheduler's kind, its step and the value,
 * before anything moves, instead of training on NaN weights.
 *
 * - The pieces: gamma 1e30 passes the config check; after two scheduler steps the lr is inf,
 *   volt_optimizer_check_lr and volt_optimizer_step refuse it (the step count and the weights
 *   stay), the message naming "scheduler 'step'", "StepLR", "its step 2" and "inf"; set_last_step
 *   back to 1 (lr 1e29) steps again, set_last_step to an overflowing step says VOLT_ERR_NUMERIC;
 *   a group with base lr 0 gets NaN at step 11 (1e30^11 overflows double) and is refused naming
 *   its group and "nan"; ordinary schedules step as before.
 * - Fit, StepLR gamma 1e30, step_size 1, per step, SGD lr 0.1: steps 0 and 1 run (lr 0.1, 1e29),
 *   step 2 (lr inf) fails fit with VOLT_ERR_NUMERIC and the named message; global_step is 2 and
 *   every weight is finite. Per epoch: epoch 2's first step fails the same way (the scheduler's
 *   step 2).
 * - compile = true on "cpu-graph" (a cpu backend whose graph capture records the H2D copies and
 *   whose launch re-does them, as tests/test_compile.c's; no GPU needed): step 0 runs eagerly,
 *   step 1 is captured, step 2 would be a replay, which skips volt_optimizer_step: the trainer
 *   checks the lr there too and fails fit the same way. */
#include "vtest.h"
#include "core/internal.h"
#include "volt/volt.h"
#include "volt/trainer.h"

/* ---- the optimizer and the scheduler alone ------------------------------------------------------ */
static volt_params *mkps(volt_tensor **w) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.accelerator = "cpu";
    volt_params *ps = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    CHECK_OK(volt_params_unit(ps, "fc"));
    CHECK_OK(volt_param_new(ps, "fc.weight", VOLT_SHAPE(3), VOLT_INIT_CONST(0.5f), w));
    CHECK_OK(volt_params_finalize(ps));
    return ps;
}

static bool all_equal(const volt_tensor *w, float want) {
    float v[3] = { 0 };
    CHECK_OK(volt_tensor_to_host(w, v));
    return v[0] == want && v[1] == want && v[2] == want;
}

static void test_pieces(void) {
    volt_tensor *w = NULL;
    volt_params *ps = mkps(&w);
    volt_optimizer_config oc;
    volt_optimizer_config_init(&oc);
    oc.kind = VOLT_OPTIM_SGD;
    oc.lr = 0.1f;
    volt_optimizer *o = NULL;
    CHECK_OK(volt_optimizer_create(&oc, ps, &o));
    volt_scheduler_config sc;
    volt_scheduler_config_init(&sc);
    sc.kind = VOLT_SCHED_STEP;
    sc.step_size = 1;
    sc.gamma = 1e30f;
    CHECK_OK(volt_scheduler_config_validate(&sc));   /* torch accepts gamma > 1: so does volt */
    volt_scheduler *s = NULL;
    CHECK_OK(volt_scheduler_create(&sc, o, &s));
    if (!o || !s) return;
    CHECK_OK(volt_optimizer_step(o));   /* lr 0.1, zero grads: the weights stay */
    volt_scheduler_step(s);
    CHECK(fabsf(volt_optimizer_lr(o) - 1e29f) <= 1e23f, "step 1: lr %g", volt_optimizer_lr(o));
    CHECK_OK(volt_optimizer_check_lr(o));
    CHECK_OK(volt_optimizer_step(o));
    volt_scheduler_step(s);
    CHECK(isinf(volt_optimizer_lr(o)), "step 2: lr %g (set as computed, as torch)", volt_optimizer_lr(o));
    volt_status st = volt_optimizer_check_lr(o);
    const char *m = volt_optimizer_errmsg(o);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(m, "scheduler 'step'") && strstr(m, "StepLR") && strstr(m, "its step 2") &&
              strstr(m, "inf") && strstr(m, "group 0"),
          "check_lr at an inf lr: %s, '%s'", volt_status_str(st), m);
    /* the step: refused before anything moves (a step at lr inf with zero grads writes NaN) */
    st = volt_optimizer_step(o);
    m = volt_optimizer_errmsg(o);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(m, "scheduler 'step'") && strstr(m, "its step 2") && strstr(m, "inf") &&
              strstr(m, "at step 2"),
          "optimizer step at an inf lr: %s, '%s'", volt_status_str(st), m);
    CHECK(volt_optimizer_step_count(o) == 2 && all_equal(w, 0.5f), "the refused step moved nothing: %lld steps",
          (long long)volt_optimizer_step_count(o));
    /* back to a step whose lr is finite: it steps again; to one past the range: NUMERIC */
    CHECK_OK(volt_scheduler_set_last_step(s, 1));
    CHECK_OK(volt_optimizer_step(o));
    st = volt_scheduler_set_last_step(s, 5);
    CHECK(st == VOLT_ERR_NUMERIC && isinf(volt_optimizer_lr(o)), "set_last_step(5): %s, lr %g", volt_status_str(st),
          volt_optimizer_lr(o));
    CHECK(volt_optimizer_step(o) == VOLT_ERR_NUMERIC && strstr(volt_optimizer_errmsg(o), "its step 5"), "after set_last_step(5): '%s'",
          volt_optimizer_errmsg(o));
    volt_scheduler_destroy(s);
    volt_optimizer_destroy(o);

    /* base lr 0 in a group: 0 x gamma^11 (past double's range) = NaN, refused naming the group */
    oc.lr = 0.1f;
    oc.n_groups = 1;
    oc.groups[0] = (volt_optim_group){ .params = "fc.weight", .lr = 0.f, .weight_decay = NAN };
    o = NULL;
    CHECK_OK(volt_optimizer_create(&oc, ps, &o));
    s = NULL;
    CHECK_OK(volt_scheduler_create(&sc, o, &s));
    if (!o || !s) return;
    st = volt_scheduler_set_last_step(s, 10);   /* group 0: 0.1 x 1e300, past float's range */
    CHECK(st == VOLT_ERR_NUMERIC, "set_last_step(10): %s", volt_status_str(st));
    CHECK(isinf(volt_optimizer_group_lr(o, 0)) && volt_optimizer_group_lr(o, 1) == 0.f, "step 10: %g %g",
          volt_optimizer_group_lr(o, 0), volt_optimizer_group_lr(o, 1));
    volt_scheduler_step(s);
    CHECK(isnan(volt_optimizer_group_lr(o, 1)), "step 11: group 1's lr %g, want NaN (0 x inf)", volt_optimizer_group_lr(o, 1));
    volt_optimizer_set_group_lr(o, 0, 0.5f);   /* group 0 fixed by hand: group 1's NaN is what is left */
    st = volt_optimizer_step(o);
    m = volt_optimizer_errmsg(o);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(m, "group 1") && strstr(m, "nan") && strstr(m, "its step 11"),
          "a NaN lr: %s, '%s'", volt_status_str(st), m);
    volt_scheduler_destroy(s);
    volt_optimizer_destroy(o);

    /* an ordinary schedule is untouched: StepLR gamma 0.5 steps every time */
    oc.n_groups = 0;
    sc.gamma = 0.5f;
    o = NULL;
    CHECK_OK(volt_optimizer_create(&oc, ps, &o));
    s = NULL;
    CHECK_OK(volt_scheduler_create(&sc, o, &s));
    for (int k = 0; o && s && k < 200; k++) {
        CHECK_OK(volt_optimizer_step(o));
        volt_scheduler_step(s);
    }
    CHECK(volt_optimizer_lr(o) == 0.f, "gamma 0.5 after 200 steps: %g (underflows to 0: allowed)", volt_optimizer_lr(o));
    volt_scheduler_destroy(s);
    volt_optimizer_destroy(o);
    volt_params_destroy(ps);
}

/* ---- fit ------------------------------------------------------------------------------------------- */
enum { NS = 32, BS = 8, SPE = NS / BS };
static volt_dataset *DS;
static bool per_epoch;

static volt_status net_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.1f;
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_STEP;
    o->scheduler.step_size = 1;
    o->scheduler.gamma = 1e30f;
    o->scheduler.interval = per_epoch ? VOLT_SCHED_EVERY_EPOCH : VOLT_SCHED_EVERY_STEP;
    return VOLT_OK;
}
static const volt_module_ops net_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin4", .setup = vtest_lin4_setup,
                                         .configure_optimizers = net_opt, .training_step = vtest_lin4_train };

static void fit_case(bool epochs) {
    per_epoch = epochs;
    const char *what = epochs ? "per epoch" : "per step";
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.max_epochs = 4;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (!t) return;
    vtest_lin4 m = { 0 };
    volt_loader *l = vtest_loader(DS, BS, false);
    const volt_status st = volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL);
    const char *e = volt_trainer_errmsg(t);
    printf("%s: %s: %s\n", what, volt_status_str(st), e);
    /* the scheduler's step 2 is inf: optimizer step 2 (per step) or epoch 2's first (per epoch) */
    const int64_t want_gs = epochs ? 2 * SPE : 2;
    CHECK(st == VOLT_ERR_NUMERIC && strstr(e, "scheduler 'step'") && strstr(e, "StepLR") && strstr(e, "its step 2") &&
              strstr(e, "inf") && strstr(e, "gamma 1e+30"),
          "%s: fit: %s, '%s' (want VOLT_ERR_NUMERIC naming the scheduler, its step and the lr)", what, volt_status_str(st), e);
    CHECK(volt_trainer_global_step(t) == want_gs, "%s: global_step %lld, want %lld (the failing step not counted)", what,
          (long long)volt_trainer_global_step(t), (long long)want_gs);
    if (!epochs) {   /* per epoch, epoch 1 trained at lr 1e29: its weights are anything */
        float v[5] = { 0 };
        CHECK_OK(volt_tensor_to_host(m.w, v));
        CHECK_OK(volt_tensor_to_host(m.b, v + 4));
        bool finite = true;
        for (int i = 0; i < 5; i++) finite = finite && isfinite(v[i]);
        CHECK(finite, "%s: a weight is not finite after the refused step: %g %g %g %g %g", what, v[0], v[1], v[2], v[3], v[4]);
    }
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* ---- compile: a replayed step ------------------------------------------------------------------------ */
#define MAX_COPIES 64
typedef struct rec_copy { void *dst; const void *src; size_t n; unsigned char *snap; } rec_copy;
struct volt_device_graph { rec_copy h2d[MAX_COPIES]; int n_h2d; };
static const volt_backend *g_cpu;
static volt_backend g_be;
static uint64_t g_word = UINT64_MAX;
static struct { bool capturing; rec_copy h2d[MAX_COPIES]; int n_h2d, launches; } g_cap;

static void rb_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k) {
    if (g_cap.capturing && (k == VOLT_COPY_H2D || k == VOLT_COPY_H2D_SNAPSHOT) && g_cap.n_h2d < MAX_COPIES) {
        rec_copy r = { dst, src, n, NULL };
        if (k == VOLT_COPY_H2D_SNAPSHOT && (r.snap = malloc(n ? n : 1))) memcpy(r.snap, src, n);
        g_cap.h2d[g_cap.n_h2d++] = r;
    }
    g_cpu->copy(d, dst, src, n, k);   /* the cpu kernels run during "capture" */
}
static uint64_t *rb_error_word(volt_device *d) { (void)d; return &g_word; }
static volt_status rb_begin(volt_device *d, char *err, size_t n) {
    (void)d; (void)err; (void)n;
    g_cap.capturing = true;
    g_cap.n_h2d = 0;
    return VOLT_OK;
}
static volt_status rb_end(volt_device *d, volt_device_graph **out, char *err, size_t n) {
    (void)d; (void)err; (void)n;
    g_cap.capturing = false;
    volt_device_graph *g = calloc(1, sizeof *g);
    if (!g) return VOLT_ERR_NOMEM;
    memcpy(g->h2d, g_cap.h2d, sizeof g->h2d);
    g->n_h2d = g_cap.n_h2d;
    *out = g;
    return VOLT_OK;
}
static volt_status rb_launch(volt_device *d, volt_device_graph *g, char *err, size_t n) {
    (void)d; (void)err; (void)n;
    for (int i = 0; i < g->n_h2d; i++) memcpy(g->h2d[i].dst, g->h2d[i].snap ? g->h2d[i].snap : g->h2d[i].src, g->h2d[i].n);
    g_cap.launches++;
    return VOLT_OK;
}
static void rb_destroy(volt_device *d, volt_device_graph *g) {
    (void)d;
    for (int i = 0; g && i < g->n_h2d; i++) free(g->h2d[i].snap);
    free(g);
}

static void compile_case(void) {
    g_cpu = volt__backend_find("cpu");
    g_be = *g_cpu;
    g_be.version = VOLT_BACKEND_VERSION;
    g_be.name = "cpu-graph";
    g_be.description = "test: cpu with recorded graph capture";
    g_be.copy = rb_copy;
    g_be.error_word = rb_error_word;
    g_be.graph_begin = rb_begin;
    g_be.graph_end = rb_end;
    g_be.graph_launch = rb_launch;
    g_be.graph_destroy = rb_destroy;
    char err[256] = "";
    CHECK_OK(volt__backend_register(&g_be, err, sizeof err));
    per_epoch = false;
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.max_epochs = 4;
    c.accelerator = "cpu-graph";
    c.compile = true;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (!t) return;
    vtest_lin4 m = { 0 };
    volt_loader *l = vtest_loader(DS, BS, false);
    const volt_status st = volt_trainer_fit(t, &net_ops, &m, l, NULL, NULL);
    const char *e = volt_trainer_errmsg(t);
    printf("compile: %s: %s\n", volt_status_str(st), e);
    int64_t eager = -1, captured = -1, replayed = -1;
    volt_trainer_compile_stats(t, &eager, &captured, &replayed);
    CHECK(eager == 1 && captured == 1, "compile: %lld eager, %lld captured steps before the refused one (want 1, 1)",
          (long long)eager, (long long)captured);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(e, "scheduler 'step'") && strstr(e, "StepLR") && strstr(e, "its step 2") &&
              strstr(e, "inf"),
          "compile: fit: %s, '%s' (want the replayed step 2 refused naming the scheduler)", volt_status_str(st), e);
    CHECK(volt_trainer_global_step(t) == 2 && g_cap.launches == 1, "compile: global_step %lld, %d launches (want 2, 1: the "
          "capture's own)", (long long)volt_trainer_global_step(t), g_cap.launches);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

int main(void) {
    test_pieces();
    DS = vtest_rows4(NS);
    if (!DS) return vtest_finish();
    fit_case(false);
    fit_case(true);
    compile_case();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
