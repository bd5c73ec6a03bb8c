/* The batch size finder (volt_trainer_scale_batch_size, trainer/tuner.c; Lightning's
 * Tuner.scale_batch_size).
 *
 * No argument: a module whose training step runs out of memory (VOLT_ERR_NOMEM, as an
 * allocation would) above a batch size LIMIT, so every search is exact:
 *  - power from 2 with LIMIT 40: 2, 4, 8, 16, 32 ran, 64 did not: 32; the loader's batch
 *    size is 32 after, the weights and global_step are what they were, a fit runs after;
 *  - binsearch: 2 ... 32, 64 no, then 48 no, 40 yes, 44 no, 42 no, 41 no: 40;
 *  - doubling stops at the dataset's samples (100: ... 64, 100); max_trials 3: 2, 4, 8 → 8
 *    (the last that ran, not a doubled, untried size); init_val above the limit halves
 *    (power) until one runs; LIMIT 0: nothing runs → NOMEM naming it, the loader as before;
 *  - accumulate_grad_batches 2: steps_per_trial optimizer steps of 2 micro-batches each;
 *  - bad configs; after the search the step is a fresh one (what the sizes grew is back);
 *  - a step that runs out after its backward: the search clears the grads it wrote.
 * LearningRateFinder / BatchSizeFinder (the callbacks, trainer/tuner_callbacks.c): inside fit
 * they find what the Tuner's calls find (the same points, suggestion and trials; the fit after
 * the same weights), set it (the module's lr through set_lr, fit's optimizer; the train and val
 * loaders' size), keep it in checkpoints (a resumed fit applies it without a search; one saved
 * without it changes nothing); fast_dev_run skips them; bad configs, a second one, a damaged
 * state and a search where nothing runs are refused, naming the problem.
 * "memory" (cpu-strict with a small VOLT_STRICT_RESERVE, tests/strict_pm.cmake) and "cuda"
 * (the simulated GPU with CUDASIM_MEM_MB, tests/gpu_sim.cmake): real allocations run out; power's answer ran and its double did not, binsearch's ran and
 * answer + 1 did not, and a fit at the size found runs (the failed sizes' memory came back). */
#include <dirent.h>
#include <math.h>
#include <unistd.h>
#include "vtest.h"
#include "core/internal.h"
#include "volt/volt.h"
#include "volt/trainer.h"

enum { IN = 16, NC = 3 };
static int64_t g_limit = 40;        /* the step fails above this batch size; < 0: never */
static int64_t g_hidden = 8;
static int64_t g_max_seen;          /* the largest batch a step saw */
static bool g_module_size_hook;     /* test_grads_after_failure: the step says its batch size */
static int64_t g_cur;
static int64_t g_train_calls;       /* training steps run (the finders' sweeps included) */
static float g_lr = 1e-2f;          /* what configure_optimizers gives Adam (LearningRateFinder's set_lr sets it) */

typedef struct { volt_tensor *w1, *b1, *w2, *b2; } mlp;
static volt_status mlp_setup(void *self, volt_params *ps) {
    mlp *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(g_hidden, IN), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(g_hidden), VOLT_INIT_ZEROS, &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(NC, g_hidden), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(NC), VOLT_INIT_ZEROS, &m->b2);
}
static volt_status mlp_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    mlp *m = self;
    if (b->size > g_max_seen) g_max_seen = b->size;
    g_train_calls++;
    if (g_module_size_hook) g_cur = b->size;
    volt_tensor *h = volt_gelu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    volt_tensor *loss = volt_cross_entropy(s, volt_linear(s, h, m->w2, m->b2), volt_batch_y(b));
    if (g_limit >= 0 && b->size > g_limit)   /* after the forward: its tensors are in the arena */
        return volt_step_fail(s, VOLT_ERR_NOMEM, "test: out of memory at batch size %lld", (long long)b->size);
    return volt_step_set_loss(s, loss);
}
static volt_status adam(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_ADAM;
    o->optimizer.lr = g_lr;
    return VOLT_OK;
}
static void set_lr(void *self, float lr) {
    (void)self;
    g_lr = lr;
}
static volt_status mlp_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {   /* a forward, nothing logged */
    (void)i;
    mlp *m = self;
    volt_tensor *h = volt_gelu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    return volt_cross_entropy(s, volt_linear(s, h, m->w2, m->b2), volt_batch_y(b)) ? VOLT_OK : volt_step_status(s);
}
static const volt_module_ops mlp_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = mlp_setup,
                                         .configure_optimizers = adam, .training_step = mlp_train,
                                         .validation_step = mlp_val };

/* the data: x sin waves, y = i % NC */
static float *X;
static int64_t *Y;
static volt_dataset *make_ds(int64_t n) {
    free(X);
    free(Y);
    X = malloc(sizeof *X * (size_t)(n * IN));
    Y = malloc(sizeof *Y * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        Y[i] = i % NC;
        for (int k = 0; k < IN; k++) X[i * IN + k] = sinf(0.1f * (float)(i * IN + k)) + 0.3f * (float)Y[i];
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { X, Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, n, &ds));
    return ds;
}

typedef struct world {
    volt_dataset *ds;
    volt_loader *l;
    volt_trainer *t;
    mlp m;
} world;

static void make(world *w, const char *name, int64_t n, int64_t accumulate) {
    memset(w, 0, sizeof *w);
    char root[512];
    snprintf(root, sizeof root, "%s/%s", vtest_tmpdir(), name);
    vtest_fresh_dir(root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.accumulate_grad_batches = accumulate;
    c.limit_train_batches = 3;
    w->ds = make_ds(n);
    w->l = vtest_loader(w->ds, 7, true);
    CHECK_OK(volt_trainer_create(&c, &w->t));
}
static void drop(world *w) {
    volt_trainer_destroy(w->t);
    volt_loader_destroy(w->l);
    volt_dataset_destroy(w->ds);
}

static int64_t g_steps_per_trial = 3;
static int64_t search(world *w, volt_batch_scale_mode mode, int64_t init, int64_t max_trials, volt_batch_size_result *r) {
    volt_batch_size_config c;
    volt_batch_size_config_init(&c);
    c.steps_per_trial = g_steps_per_trial;
    c.mode = mode;
    c.init_val = init;
    c.max_trials = max_trials;
    CHECK_OK(volt_trainer_scale_batch_size(w->t, &mlp_ops, &w->m, w->l, &c, r));
    return r->batch_size;
}

/* r's trials are want[0..n) (a negative size: that one did not run) */
static void expect_trials(const volt_batch_size_result *r, const int64_t *want, int n, const char *what) {
    bool same = r->n_trials == n;
    for (int i = 0; same && i < n; i++) same = r->sizes[i] == (want[i] < 0 ? -want[i] : want[i]) && r->ran[i] == (want[i] > 0);
    char got[512] = "";
    for (int i = 0; i < r->n_trials && i < VOLT_BATCH_SIZE_TRIALS_MAX; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld%s", i ? " " : "", (long long)r->sizes[i],
                 r->ran[i] ? "" : "x");
    CHECK(same, "%s: trials %s (x: out of memory)", what, got);
}

static void weights(const mlp *m, float *out) {
    vtest_f32(m->w1, out);
    vtest_f32(m->b1, out + g_hidden * IN);
    vtest_f32(m->w2, out + g_hidden * (IN + 1));
    vtest_f32(m->b2, out + g_hidden * (IN + 1) + NC * g_hidden);
}
static int64_t n_weights(void) { return g_hidden * (IN + 1) + NC * g_hidden + NC; }

static void test_power(void) {
    world w;
    make(&w, "power", 500, 1);
    g_limit = 40;
    /* a fit first, so the search starts from trained weights and a step count */
    CHECK_OK(volt_trainer_fit(w.t, &mlp_ops, &w.m, w.l, NULL, NULL));
    const int64_t gs = volt_trainer_global_step(w.t);
    float *before = malloc(sizeof(float) * (size_t)n_weights()), *after = malloc(sizeof(float) * (size_t)n_weights());
    weights(&w.m, before);
    volt_batch_size_result r;
    CHECK(search(&w, VOLT_BATCH_SCALE_POWER, 2, 25, &r) == 32, "power: found %lld, want 32", (long long)r.batch_size);
    const int64_t want[] = { 2, 4, 8, 16, 32, -64 };
    expect_trials(&r, want, 6, "power");
    CHECK(volt_loader_batch_size(w.l) == 32, "power: the loader's batch size is %lld after", (long long)volt_loader_batch_size(w.l));
    weights(&w.m, after);
    CHECK(!memcmp(before, after, sizeof(float) * (size_t)n_weights()) && volt_trainer_global_step(w.t) == gs,
          "power: the weights or global_step (%lld, was %lld) changed", (long long)volt_trainer_global_step(w.t), (long long)gs);
    CHECK(!strcmp(volt_trainer_errmsg(w.t), ""), "power: a search that found a size leaves an error: %s", volt_trainer_errmsg(w.t));
    /* the step's memory was made anew after the trials: nothing of 64's arena is held */
    volt_memory_report mr;
    CHECK_OK(volt_trainer_memory_report(w.t, &mr));
    CHECK(mr.activation_peak_bytes == 0, "power: the step holds a peak of %lld bytes after the search, want a fresh one",
          (long long)mr.activation_peak_bytes);
    /* a fit goes on at the size found (3 batches of 32) */
    g_max_seen = 0;
    CHECK_OK(volt_trainer_fit(w.t, &mlp_ops, &w.m, w.l, NULL, NULL));
    CHECK(g_max_seen == 32 && volt_trainer_global_step(w.t) == 3, "fit after: batches up to %lld, global_step %lld",
          (long long)g_max_seen, (long long)volt_trainer_global_step(w.t));
    free(before);
    free(after);
    drop(&w);
}

static void test_binsearch(void) {
    world w;
    make(&w, "binsearch", 500, 1);
    g_limit = 40;
    volt_batch_size_result r;
    CHECK(search(&w, VOLT_BATCH_SCALE_BINSEARCH, 2, 25, &r) == 40, "binsearch: found %lld, want 40", (long long)r.batch_size);
    const int64_t want[] = { 2, 4, 8, 16, 32, -64, -48, 40, -44, -42, -41 };
    expect_trials(&r, want, 11, "binsearch");
    CHECK(volt_loader_batch_size(w.l) == 40, "binsearch: loader batch size %lld", (long long)volt_loader_batch_size(w.l));
    /* from an init_val that runs out of memory: power halves until one runs */
    CHECK(search(&w, VOLT_BATCH_SCALE_POWER, 100, 25, &r) == 25, "power from 100: found %lld, want 25", (long long)r.batch_size);
    const int64_t down[] = { -100, -50, 25, -50 };
    expect_trials(&r, down, 4, "power from 100");
    drop(&w);
}

static void test_limits(void) {
    world w;
    make(&w, "limits", 100, 1);
    g_limit = -1;   /* nothing runs out */
    volt_batch_size_result r;
    CHECK(search(&w, VOLT_BATCH_SCALE_POWER, 2, 25, &r) == 100, "no limit: found %lld, want the 100 samples", (long long)r.batch_size);
    const int64_t all[] = { 2, 4, 8, 16, 32, 64, 100 };
    expect_trials(&r, all, 7, "power to the dataset");
    CHECK(search(&w, VOLT_BATCH_SCALE_BINSEARCH, 2, 25, &r) == 100, "binsearch no limit: %lld", (long long)r.batch_size);
    expect_trials(&r, all, 7, "binsearch to the dataset");
    CHECK(search(&w, VOLT_BATCH_SCALE_POWER, 2, 3, &r) == 8, "max_trials 3: found %lld, want 8 (the last that ran)",
          (long long)r.batch_size);
    const int64_t three[] = { 2, 4, 8 };
    expect_trials(&r, three, 3, "max_trials 3");
    CHECK(search(&w, VOLT_BATCH_SCALE_POWER, 500, 25, &r) == 100, "init_val 500 of 100 samples: %lld", (long long)r.batch_size);
    /* nothing runs: NOMEM, naming it; the loader keeps its size */
    g_limit = 0;
    CHECK_OK(volt_loader_set_batch_size(w.l, 7));
    volt_batch_size_config c;
    volt_batch_size_config_init(&c);
    volt_status st = volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, w.l, &c, &r);
    CHECK(st == VOLT_ERR_NOMEM && strstr(volt_trainer_errmsg(w.t), "no batch size ran") &&
              strstr(volt_trainer_errmsg(w.t), "smallest tried, 1,") && r.batch_size == 0,
          "limit 0: %s (%s), found %lld", volt_status_str(st), volt_trainer_errmsg(w.t), (long long)r.batch_size);
    const int64_t none[] = { -2, -1 };
    expect_trials(&r, none, 2, "limit 0");
    CHECK(volt_loader_batch_size(w.l) == 7, "limit 0: the loader's size is %lld, was 7", (long long)volt_loader_batch_size(w.l));
    /* bad configs */
    g_limit = 40;
    c.mode = (volt_batch_scale_mode)7;
    CHECK(volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, w.l, &c, &r) == VOLT_ERR_INVALID_ARG &&
              strstr(volt_trainer_errmsg(w.t), "power or binsearch"), "mode 7: %s", volt_trainer_errmsg(w.t));
    volt_batch_size_config_init(&c);
    c.steps_per_trial = 0;
    CHECK(volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, w.l, &c, &r) == VOLT_ERR_INVALID_ARG &&
              strstr(volt_trainer_errmsg(w.t), "steps_per_trial (0)"), "steps 0: %s", volt_trainer_errmsg(w.t));
    volt_batch_size_config_init(&c);
    c.init_val = 0;
    CHECK(volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, w.l, &c, &r) == VOLT_ERR_INVALID_ARG, "init_val 0 accepted");
    volt_batch_size_config_init(&c);
    c.version = 99;
    CHECK(volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, w.l, &c, &r) == VOLT_ERR_VERSION, "version 99 accepted");
    CHECK(volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, NULL, NULL, &r) == VOLT_ERR_INVALID_ARG, "a NULL loader accepted");
    CHECK(volt_trainer_scale_batch_size(NULL, &mlp_ops, &w.m, w.l, NULL, &r) == VOLT_ERR_INVALID_ARG, "a NULL trainer accepted");
    drop(&w);
}

/* accumulation: each trial step is 2 micro-batches; the step that failed mid-window left no
 * grads: the search's first steps after a failure match a fresh trainer's */
static void test_accumulate(void) {
    world w;
    make(&w, "accumulate", 500, 2);
    g_limit = 40;
    volt_batch_size_result r;
    CHECK(search(&w, VOLT_BATCH_SCALE_POWER, 8, 25, &r) == 32, "accumulate 2: found %lld", (long long)r.batch_size);
    const int64_t want[] = { 8, 16, 32, -64 };
    expect_trials(&r, want, 4, "accumulate 2");
    drop(&w);
}

/* a step that runs out after its backward wrote the grads (a callback's on_after_backward
 * fails above the limit): the search clears them, so the grads the next fit starts from are
 * none or zeros, not the failed step's (its first step would add to them) */
static volt_status oom_after_backward(void *self, volt_trainer *t) {
    (void)self;
    return g_cur > 40 ? volt_trainer_fail(t, VOLT_ERR_NOMEM, "test: out of memory after backward at %lld", (long long)g_cur)
                      : VOLT_OK;
}
static const volt_callback_ops oom_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "OomAfterBackward",
                                           .on_after_backward = oom_after_backward };
static volt_status grads_clean(const volt_tensor *p) {
    const int64_t n = volt_tensor_numel(p);
    float *g = malloc(sizeof *g * (size_t)n);
    volt_status st = volt_tensor_grad_to_host(p, g);
    bool zero = true;
    for (int64_t i = 0; st == VOLT_OK && i < n; i++) zero = zero && g[i] == 0.f;
    free(g);
    return st == VOLT_ERR_STATE || (st == VOLT_OK && zero) ? VOLT_OK : VOLT_ERR_NUMERIC;
}
static void test_grads_after_failure(void) {
    world w;
    make(&w, "grads", 500, 1);
    g_limit = -1;
    CHECK_OK(volt_trainer_add_callback(w.t, &oom_ops, NULL));
    volt_batch_size_result r;
    g_module_size_hook = true;
    CHECK(search(&w, VOLT_BATCH_SCALE_BINSEARCH, 2, 25, &r) == 40, "after backward: found %lld", (long long)r.batch_size);
    g_module_size_hook = false;
    CHECK(r.n_trials > 0 && !r.ran[r.n_trials - 1], "after backward: the last trial ran (%d trials)", r.n_trials);
    CHECK(grads_clean(w.m.w1) == VOLT_OK && grads_clean(w.m.b2) == VOLT_OK,
          "after backward: the failed step's grads are still there after the search");
    drop(&w);
}

/* ---- the tuner's failures (trainer/tuner.c) ------------------------------------------------------
 * A Gate callback fails on cue: its state on the save (the hidden checkpoint cannot be written),
 * its load_state_dict (the state cannot come back), its on_after_backward (a step fails after
 * backward, inside an accumulation window), its teardown. */
static int g_gate_save, g_gate_load, g_gate_after_backward, g_gate_teardown;
static volt_lr_find_result g_inner_lr;
static volt_status g_inner_st = VOLT_OK;
static char g_inner_msg[512];
static char *gate_state(void *self) {
    (void)self;
    char *s = malloc(16);
    if (s) snprintf(s, 16, "%s", g_gate_save ? "[1]" : "{}");   /* not an object: the save fails */
    return s;
}
static volt_status gate_load(void *self, volt_trainer *t, const char *json) {
    (void)self; (void)json;
    return g_gate_load ? volt_trainer_fail(t, VOLT_ERR_CORRUPT, "test: this state will not load") : VOLT_OK;
}
static volt_status gate_after_backward(void *self, volt_trainer *t) {
    (void)self;
    return g_gate_after_backward && ++g_gate_after_backward > 2
               ? volt_trainer_fail(t, VOLT_ERR_NUMERIC, "test: a step fails after its backward") : VOLT_OK;
}
static volt_status gate_teardown(void *self, volt_trainer *t, volt_stage sg) {
    (void)self; (void)sg;
    return g_gate_teardown ? volt_trainer_fail(t, VOLT_ERR_IO, "test: teardown fails") : VOLT_OK;
}
static world *g_gate_world;
static volt_status gate_epoch_start(void *self, volt_trainer *t) {   /* a tuner call from inside fit */
    (void)self;
    g_inner_st = volt_trainer_lr_find(t, &mlp_ops, &g_gate_world->m, g_gate_world->l, NULL, &g_inner_lr);
    snprintf(g_inner_msg, sizeof g_inner_msg, "%s", volt_trainer_errmsg(t));
    return VOLT_OK;
}
static const volt_callback_ops gate_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Gate", .state_dict = gate_state,
                                            .load_state_dict = gate_load, .on_after_backward = gate_after_backward,
                                            .teardown = gate_teardown };
static int hidden_files(const char *root) {
    int n = 0;
    DIR *d = opendir(root);
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}
static void test_tuner_failures(void) {
    world w;
    make(&w, "tuner_failures", 100, 2);
    char root[512];
    snprintf(root, sizeof root, "%s/tuner_failures", vtest_tmpdir());
    g_limit = -1;
    CHECK_OK(volt_trainer_add_callback(w.t, &gate_ops, NULL));
    volt_lr_find_config lc;
    volt_lr_find_config_init(&lc);
    lc.num_training = 4;
    volt_lr_find_result r;
    /* the state to come back to cannot be saved: refused before any step, no file left */
    g_gate_save = 1;
    volt_status st = volt_trainer_lr_find(w.t, &mlp_ops, &w.m, w.l, &lc, &r);
    CHECK(st < 0 && strstr(volt_trainer_errmsg(w.t), "Gate") && hidden_files(root) == 0,
          "an unsavable state: %s (%s), %d hidden files", volt_status_str(st), volt_trainer_errmsg(w.t), hidden_files(root));
    g_gate_save = 0;
    /* it cannot be loaded back: the file with the weights from before stays, named */
    float before[4096], after[4096];
    weights(&w.m, before);
    g_gate_load = 1;
    st = volt_trainer_lr_find(w.t, &mlp_ops, &w.m, w.l, &lc, &r);
    g_gate_load = 0;
    const char *msg = volt_trainer_errmsg(w.t), *at = strstr(msg, "stays in ");
    char kept[1024] = "";
    if (at) sscanf(at + 9, "%1023[^:]", kept);
    CHECK(st == VOLT_ERR_CORRUPT && at && hidden_files(root) == 1 && kept[0] && access(kept, R_OK) == 0,
          "a state that will not load back: %s (%s), %d hidden files", volt_status_str(st), msg, hidden_files(root));
    if (kept[0]) {   /* and it holds them: a validate with it as ckpt_path loads the weights from before */
        CHECK_OK(volt_trainer_validate(w.t, &mlp_ops, &w.m, w.l, kept));
        weights(&w.m, after);
        CHECK(!memcmp(before, after, sizeof(float) * (size_t)n_weights()), "the kept file holds the weights from before lr_find");
        volt_checkpoint_remove(kept);
    }
    /* a step that fails after its backward, inside a window of 2: no grads left behind */
    g_gate_after_backward = 1;
    st = volt_trainer_lr_find(w.t, &mlp_ops, &w.m, w.l, &lc, &r);
    CHECK(st == VOLT_ERR_NUMERIC && g_gate_after_backward == 3, "a failing step: %s (%s), hook calls %d", volt_status_str(st),
          volt_trainer_errmsg(w.t), g_gate_after_backward - 1);
    g_gate_after_backward = 0;
    CHECK(grads_clean(w.m.w1) == VOLT_OK && grads_clean(w.m.b2) == VOLT_OK, "lr_find left the failed window's grads");
    /* a failing teardown after the search: the loader goes back to its size */
    CHECK_OK(volt_loader_set_batch_size(w.l, 7));
    g_gate_teardown = 1;
    volt_batch_size_config bc;
    volt_batch_size_config_init(&bc);
    volt_batch_size_result br;
    st = volt_trainer_scale_batch_size(w.t, &mlp_ops, &w.m, w.l, &bc, &br);
    g_gate_teardown = 0;
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(w.t), "teardown") && volt_loader_batch_size(w.l) == 7 && br.batch_size == 0,
          "a failing teardown: %s (%s), the loader at %lld (was 7)", volt_status_str(st), volt_trainer_errmsg(w.t),
          (long long)volt_loader_batch_size(w.l));
    /* from inside fit: refused, and the fit goes on */
    const volt_callback_ops inner = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Inner", .on_train_epoch_start = gate_epoch_start };
    CHECK_OK(volt_trainer_add_callback(w.t, &inner, NULL));
    g_gate_world = &w;
    CHECK_OK(volt_trainer_fit(w.t, &mlp_ops, &w.m, w.l, NULL, NULL));
    CHECK(g_inner_st == VOLT_ERR_STATE && strstr(g_inner_msg, "not inside fit"), "lr_find inside fit: %s (%s)",
          volt_status_str(g_inner_st), g_inner_msg);
    /* a max_lr a float cannot hold */
    lc.max_lr = 1e39;
    CHECK(volt_trainer_lr_find(w.t, &mlp_ops, &w.m, w.l, &lc, &r) == VOLT_ERR_INVALID_ARG, "max_lr 1e39 accepted");
    drop(&w);
    g_limit = 40;
}


/* ---- LearningRateFinder / BatchSizeFinder: the tuner as callbacks, inside fit ---------------- */
static void make_val(world *w, const char *name, int64_t n, volt_loader **val) {
    make(w, name, n, 1);
    *val = vtest_loader(w->ds, 7, false);
}

/* LearningRateFinder in fit = lr_find before fit with the module's lr set to the suggestion:
 * the same suggestion and, the same optimizer steps after, the same weights; fit's optimizer
 * has the suggestion; a resumed fit applies the checkpoint's without a search. */
static void test_lr_finder(void) {
    g_limit = -1;
    world a, b;
    make(&a, "lrf_tuner", 200, 1);
    make(&b, "lrf_callback", 200, 1);
    volt_lr_find_config lc;
    volt_lr_find_config_init(&lc);
    lc.num_training = 30;
    lc.early_stop_threshold = 0;   /* every step: the points compare one for one */
    /* a: the Tuner's call, then fit with the suggestion */
    g_lr = 1e-2f;
    volt_lr_find_result r;
    CHECK_OK(volt_trainer_lr_find(a.t, &mlp_ops, &a.m, a.l, &lc, &r));
    CHECK(r.n == 30 && isfinite(r.suggestion), "lr_find: %lld points, suggestion %g", (long long)r.n, r.suggestion);
    g_lr = (float)r.suggestion;
    CHECK_OK(volt_trainer_fit(a.t, &mlp_ops, &a.m, a.l, NULL, NULL));
    /* b: the callback does both in one fit */
    g_lr = 1e-2f;
    volt_lr_finder_config fc;
    volt_lr_finder_config_init(&fc);
    fc.find = lc;
    fc.set_lr = set_lr;
    CHECK(volt_lr_finder_result(b.t) == NULL, "a result before any fit");
    CHECK_OK(volt_add_lr_finder(b.t, &fc));
    g_train_calls = 0;
    CHECK_OK(volt_trainer_fit(b.t, &mlp_ops, &b.m, b.l, NULL, NULL));
    const volt_lr_find_result *cr = volt_lr_finder_result(b.t);
    CHECK(cr && cr->n == r.n && cr->suggestion == r.suggestion && !memcmp(cr->losses, r.losses, sizeof(double) * (size_t)r.n),
          "the callback's sweep: %lld points, suggestion %g (the Tuner's: %lld, %g)", cr ? (long long)cr->n : -1LL,
          cr ? cr->suggestion : NAN, (long long)r.n, r.suggestion);
    CHECK(g_train_calls == 30 + 3, "fit with the finder ran %lld training steps, want 30 + 3", (long long)g_train_calls);
    CHECK(g_lr == (float)r.suggestion && volt_optimizer_base_lr(volt_trainer_optimizer(b.t)) == (float)r.suggestion,
          "set_lr got %g, fit's optimizer has %g, want %g", g_lr, volt_optimizer_base_lr(volt_trainer_optimizer(b.t)), r.suggestion);
    float wa[4096], wb[4096];
    weights(&a.m, wa);
    weights(&b.m, wb);
    CHECK(!memcmp(wa, wb, sizeof(float) * (size_t)n_weights()) && volt_trainer_global_step(b.t) == 3,
          "the fit after the callback's sweep differs from the Tuner's (global_step %lld)", (long long)volt_trainer_global_step(b.t));
    /* resume: no sweep, the checkpoint's learning rate set before the optimizer is made */
    char ck[600];
    snprintf(ck, sizeof ck, "%s/lrf_callback/saved.safetensors", vtest_tmpdir());
    CHECK_OK(volt_trainer_save_checkpoint(b.t, ck));
    world c;
    make(&c, "lrf_resume", 200, 1);
    CHECK_OK(volt_add_lr_finder(c.t, &fc));
    g_lr = 1e-2f;
    g_train_calls = 0;
    CHECK_OK(volt_trainer_fit(c.t, &mlp_ops, &c.m, c.l, NULL, ck));   /* max_epochs 1 is met: no step */
    cr = volt_lr_finder_result(c.t);
    CHECK(g_train_calls == 0 && g_lr == (float)r.suggestion && cr && cr->n == 0 && cr->suggestion == r.suggestion,
          "resumed: %lld steps, set_lr %g, result %g (%lld points); want none, %g", (long long)g_train_calls, g_lr,
          cr ? cr->suggestion : NAN, cr ? (long long)cr->n : -1LL, r.suggestion);
    volt_lr_find_result_free(&r);
    drop(&a);
    drop(&b);
    drop(&c);
    g_lr = 1e-2f;
    g_limit = 40;
}

/* BatchSizeFinder in fit: the Tuner's search, fit's train and val loaders at the size found;
 * a resumed fit sets them from the checkpoint without trials; fast_dev_run skips it. */
static void test_batch_size_finder_callback(void) {
    world w;
    volt_loader *val;
    make_val(&w, "bsf", 500, &val);
    g_limit = 40;
    volt_batch_size_finder_config fc;
    volt_batch_size_finder_config_init(&fc);
    fc.find.mode = VOLT_BATCH_SCALE_BINSEARCH;
    fc.find.steps_per_trial = 1;
    CHECK_OK(volt_add_batch_size_finder(w.t, &fc));
    g_max_seen = 0;
    CHECK_OK(volt_trainer_fit(w.t, &mlp_ops, &w.m, w.l, val, NULL));
    const volt_batch_size_result *r = volt_batch_size_finder_result(w.t);
    const int64_t want[] = { 2, 4, 8, 16, 32, -64, -48, 40, -44, -42, -41 };
    CHECK(r && r->batch_size == 40, "BatchSizeFinder found %lld, want 40", r ? (long long)r->batch_size : -1LL);
    if (r) expect_trials(r, want, 11, "BatchSizeFinder");
    CHECK(volt_loader_batch_size(w.l) == 40 && volt_loader_batch_size(val) == 40 && volt_trainer_global_step(w.t) == 3,
          "after fit: train %lld, val %lld, global_step %lld", (long long)volt_loader_batch_size(w.l),
          (long long)volt_loader_batch_size(val), (long long)volt_trainer_global_step(w.t));
    char ck[600];
    snprintf(ck, sizeof ck, "%s/bsf/saved.safetensors", vtest_tmpdir());
    CHECK_OK(volt_trainer_save_checkpoint(w.t, ck));
    /* resumed: the loaders from 7 to 40, no trial */
    world c;
    volt_loader *cval;
    make_val(&c, "bsf_resume", 500, &cval);
    CHECK_OK(volt_add_batch_size_finder(c.t, &fc));
    g_train_calls = 0;
    CHECK_OK(volt_trainer_fit(c.t, &mlp_ops, &c.m, c.l, cval, ck));
    r = volt_batch_size_finder_result(c.t);
    CHECK(g_train_calls == 0 && volt_loader_batch_size(c.l) == 40 && volt_loader_batch_size(cval) == 40 && r &&
          r->batch_size == 40 && r->n_trials == 0, "resumed: %lld steps, loaders at %lld / %lld", (long long)g_train_calls,
          (long long)volt_loader_batch_size(c.l), (long long)volt_loader_batch_size(cval));
    /* a checkpoint without its state: the loaders stay */
    world d;
    make(&d, "bsf_nostate", 500, 1);
    CHECK_OK(volt_trainer_fit(d.t, &mlp_ops, &d.m, d.l, NULL, NULL));
    snprintf(ck, sizeof ck, "%s/bsf_nostate/saved.safetensors", vtest_tmpdir());
    CHECK_OK(volt_trainer_save_checkpoint(d.t, ck));
    world e;
    make(&e, "bsf_nostate2", 500, 1);
    CHECK_OK(volt_add_batch_size_finder(e.t, &fc));
    CHECK_OK(volt_trainer_fit(e.t, &mlp_ops, &e.m, e.l, NULL, ck));
    CHECK(volt_loader_batch_size(e.l) == 7 && volt_batch_size_finder_result(e.t) == NULL, "no state: the loader at %lld",
          (long long)volt_loader_batch_size(e.l));
    /* fast_dev_run: skipped */
    world f;
    make(&f, "bsf_fast", 500, 1);
    volt_trainer_config fcfg;
    char root[512];
    snprintf(root, sizeof root, "%s/bsf_fast", vtest_tmpdir());
    vtest_quiet_config(&fcfg, root);
    fcfg.fast_dev_run = 1;
    volt_trainer_destroy(f.t);
    CHECK_OK(volt_trainer_create(&fcfg, &f.t));
    CHECK_OK(volt_add_batch_size_finder(f.t, &fc));
    g_train_calls = 0;
    CHECK_OK(volt_trainer_fit(f.t, &mlp_ops, &f.m, f.l, NULL, NULL));
    CHECK(g_train_calls == 1 && volt_loader_batch_size(f.l) == 7 && volt_batch_size_finder_result(f.t) == NULL,
          "fast_dev_run: %lld steps, loader at %lld", (long long)g_train_calls, (long long)volt_loader_batch_size(f.l));
    volt_loader_destroy(val);
    volt_loader_destroy(cval);
    drop(&w);
    drop(&c);
    drop(&d);
    drop(&e);
    drop(&f);
}

/* BatchSizeFinder in validate, test and predict (Lightning's on_validation_start, ...): the
 * evaluation step runs out above 20, so power from 2 gives 2, 4, 8, 16 ran, 32 did not: 16, the
 * call's loader at 16 after it; no hook sees the trials (the batch-end hooks count the call's
 * batches alone), predict hands out every sample once; a step that fails otherwise fails the
 * call, named. */
static int64_t g_eval_limit = -1, g_eval_steps, g_eval_batch_ends;
static bool g_eval_bad, g_in_loop;
static volt_status mlp_eval(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    g_eval_steps++;
    VOLT_TRY(mlp_val(self, s, b, i));
    /* 1 from the call's loop, 1000 from a trial: the epoch's mean says whether a trial's got in */
    VOLT_TRY(volt_log_value(s, "probe", g_in_loop ? 1.0 : 1000.0, VOLT_LOG_EPOCH));
    if (g_eval_bad) return volt_step_fail(s, VOLT_ERR_NUMERIC, "test: a bad batch");
    if (g_eval_limit >= 0 && b->size > g_eval_limit)
        return volt_step_fail(s, VOLT_ERR_NOMEM, "test: out of memory at batch size %lld", (long long)b->size);
    return VOLT_OK;
}
static volt_status mlp_pred(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    VOLT_TRY(mlp_eval(self, s, b, i));
    *out = volt_batch_y(b);
    return VOLT_OK;
}
static volt_status count_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)t; (void)b; (void)i;
    g_eval_batch_ends++;
    return VOLT_OK;
}
static volt_status loop_starts(void *self, volt_trainer *t) { (void)self; (void)t; g_in_loop = true; return VOLT_OK; }
static volt_status count_pred_end(void *self, volt_trainer *t, const volt_tensor *p, const volt_batch *b, int64_t i) {
    (void)p;
    return count_end(self, t, b, i);
}
static volt_status count_rows(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    (void)pred;
    *(int64_t *)ctx += b->size;
    return VOLT_OK;
}
static void test_eval_batch_size_finder(void) {
    world w;
    make(&w, "bsf_eval", 500, 1);
    volt_batch_size_finder_config fc;
    volt_batch_size_finder_config_init(&fc);
    fc.find.steps_per_trial = 1;
    CHECK_OK(volt_add_batch_size_finder(w.t, &fc));
    const volt_callback_ops counter = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Ends", .on_validation_batch_end = count_end,
                                        .on_test_batch_end = count_end, .on_predict_batch_end = count_pred_end,
                                        .on_validation_epoch_start = loop_starts, .on_test_epoch_start = loop_starts,
                                        .on_predict_epoch_start = loop_starts };
    CHECK_OK(volt_trainer_add_callback(w.t, &counter, NULL));
    volt_module_ops ops = mlp_ops;
    ops.validation_step = ops.test_step = mlp_eval;
    ops.predict_step = mlp_pred;
    /* fit first: power finds 32 (the training step runs out above 40), its checkpoint state */
    g_limit = 40;
    CHECK_OK(volt_trainer_fit(w.t, &mlp_ops, &w.m, w.l, NULL, NULL));
    CHECK(volt_batch_size_finder_result(w.t) && volt_batch_size_finder_result(w.t)->batch_size == 32, "fit's search");
    g_eval_limit = 20;
    const int64_t want[] = { 2, 4, 8, 16, -32 };
    for (int stage = 0; stage < 3; stage++) {
        static const char *const what[] = { "validate", "test", "predict" };
        volt_loader *l = vtest_loader(w.ds, 7, false);
        g_eval_steps = g_eval_batch_ends = 0;
        g_in_loop = false;
        int64_t rows = 0;
        volt_status st = stage == 0 ? volt_trainer_validate(w.t, &ops, &w.m, l, NULL)
                       : stage == 1 ? volt_trainer_test(w.t, &ops, &w.m, l, NULL)
                       : volt_trainer_predict(w.t, &ops, &w.m, l, NULL, count_rows, &rows);
        CHECK_OK(st);
        const volt_batch_size_result *r = volt_batch_size_finder_result(w.t);
        CHECK(r && r->batch_size == 16 && volt_loader_batch_size(l) == 16, "%s: found %lld, the loader at %lld", what[stage],
              r ? (long long)r->batch_size : -1LL, (long long)volt_loader_batch_size(l));
        if (r) expect_trials(r, want, 5, what[stage]);
        const int64_t batches = (500 + 15) / 16;
        CHECK(g_eval_batch_ends == batches && g_eval_steps == 5 + batches && (stage < 2 || rows == 500),
              "%s: %lld batch ends, %lld steps (want %lld, %lld), %lld rows", what[stage], (long long)g_eval_batch_ends,
              (long long)g_eval_steps, (long long)batches, (long long)(5 + batches), (long long)rows);
        double probe = 0;
        CHECK(stage == 2 || (volt_trainer_metric(w.t, "probe", &probe) && probe == 1.0),
              "%s: the logged mean %g (a trial's value got in unless 1)", what[stage], probe);
        volt_loader_destroy(l);
    }
    /* the checkpoint's state is still fit's 32 (a resumed fit trains at it, not at a test's 16) */
    char ck[600];
    snprintf(ck, sizeof ck, "%s/bsf_eval/saved.safetensors", vtest_tmpdir());
    CHECK_OK(volt_trainer_save_checkpoint(w.t, ck));
    volt_st_file *f = NULL;
    char err[300];
    CHECK_OK(volt_st_open(ck, &f, err, sizeof err));
    const char *cbs = f ? volt_st_meta(f, "volt.callbacks") : NULL;
    CHECK(cbs && strstr(cbs, "\"BatchSizeFinder\":{\"batch_size\":32}"), "the saved state: %s", cbs ? cbs : "(none)");
    volt_st_close(f);
    /* another failure: the call fails naming it, the loader as it was */
    volt_loader *l = vtest_loader(w.ds, 7, false);
    g_eval_bad = true;
    volt_status st = volt_trainer_test(w.t, &ops, &w.m, l, NULL);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(volt_trainer_errmsg(w.t), "BatchSizeFinder: ") &&
          strstr(volt_trainer_errmsg(w.t), "test: a bad batch") && volt_loader_batch_size(l) == 7,
          "a failing test step in the search: %s (%s), the loader at %lld", volt_status_str(st), volt_trainer_errmsg(w.t),
          (long long)volt_loader_batch_size(l));
    g_eval_bad = false;
    g_eval_limit = -1;
    volt_loader_destroy(l);
    drop(&w);
}

/* A state that is no finder's, written by a callback of the same name: the resumed fit names it */
static char *bad_state(void *self) {
    (void)self;
    return strdup("{\"lr\":-1}");
}

static void test_finder_failures(void) {
    world w;
    make(&w, "finder_bad", 100, 1);
    g_limit = -1;
    volt_lr_finder_config lc;
    volt_lr_finder_config_init(&lc);
    lc.version = 0;
    CHECK(volt_add_lr_finder(w.t, &lc) == VOLT_ERR_VERSION, "LearningRateFinder version 0 accepted");
    volt_lr_finder_config_init(&lc);
    lc.find.min_lr = 0;
    CHECK(volt_add_lr_finder(w.t, &lc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(w.t), "min_lr"),
          "min_lr 0: %s", volt_trainer_errmsg(w.t));
    volt_batch_size_finder_config bc;
    volt_batch_size_finder_config_init(&bc);
    bc.find.steps_per_trial = 0;
    CHECK(volt_add_batch_size_finder(w.t, &bc) == VOLT_ERR_INVALID_ARG, "steps_per_trial 0 accepted");
    CHECK_OK(volt_add_batch_size_finder(w.t, NULL));
    CHECK(volt_add_batch_size_finder(w.t, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(w.t), "one already"),
          "a second BatchSizeFinder: %s", volt_trainer_errmsg(w.t));
    CHECK(volt_trainer_num_callbacks(w.t) == 1, "refused finders were added: %d callbacks", volt_trainer_num_callbacks(w.t));
    /* a damaged state in the checkpoint: the resumed fit fails naming it, before any step */
    const volt_callback_ops fake = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LearningRateFinder", .state_dict = bad_state,
                                     .destroy = NULL };
    world a;
    make(&a, "finder_bad_state", 100, 1);
    CHECK_OK(volt_trainer_add_callback(a.t, &fake, NULL));
    CHECK_OK(volt_trainer_fit(a.t, &mlp_ops, &a.m, a.l, NULL, NULL));
    char ck[600];
    snprintf(ck, sizeof ck, "%s/finder_bad_state/saved.safetensors", vtest_tmpdir());
    CHECK_OK(volt_trainer_save_checkpoint(a.t, ck));
    world b;
    make(&b, "finder_bad_state2", 100, 1);
    volt_lr_finder_config_init(&lc);
    lc.set_lr = set_lr;
    CHECK_OK(volt_add_lr_finder(b.t, &lc));
    g_train_calls = 0;
    volt_status st = volt_trainer_fit(b.t, &mlp_ops, &b.m, b.l, NULL, ck);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(volt_trainer_errmsg(b.t), "LearningRateFinder's state is damaged") && g_train_calls == 0,
          "a damaged finder state: %s (%s)", volt_status_str(st), volt_trainer_errmsg(b.t));
    /* a failing search fails the fit: a step that runs out of memory at every size */
    world c;
    make(&c, "finder_oom", 100, 1);
    g_limit = 0;
    CHECK_OK(volt_add_batch_size_finder(c.t, NULL));
    st = volt_trainer_fit(c.t, &mlp_ops, &c.m, c.l, NULL, NULL);
    CHECK(st == VOLT_ERR_NOMEM && strstr(volt_trainer_errmsg(c.t), "no batch size ran") && volt_trainer_global_step(c.t) == 0 &&
          volt_loader_batch_size(c.l) == 7, "a search where nothing runs: %s (%s)", volt_status_str(st), volt_trainer_errmsg(c.t));
    drop(&w);
    drop(&a);
    drop(&b);
    drop(&c);
    g_limit = 40;
    g_lr = 1e-2f;
}

/* real allocations (cpu-strict's reserve): no LIMIT; a wide hidden layer makes the step's
 * memory grow with the batch */
/* the simulated GPU frees stream-ordered on a thread of its own, so what it counts as in use at
 * an allocation depends on timing: a size at the edge runs in one run and not the next there */
static bool g_fit_after = true;
static void test_memory(void) {
    g_limit = -1;
    g_steps_per_trial = 2;   /* the first step grows the arena in blocks, the second runs in the regrown one:
                              * with 1, a size whose first step fits can fail in fit's second */
    g_hidden = 2048;
    const char *only = getenv("TEST_BSF_MODE");
    for (int mode = 0; mode < 2; mode++) {
        if (only && atoi(only) != mode) continue;
        world w;
        make(&w, mode ? "memory_bin" : "memory_power", 8192, 1);
        volt_batch_size_result r;
        const int64_t found = search(&w, mode ? VOLT_BATCH_SCALE_BINSEARCH : VOLT_BATCH_SCALE_POWER, 2, 25, &r);
        char got[512] = "";
        for (int i = 0; i < r.n_trials && i < VOLT_BATCH_SIZE_TRIALS_MAX; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %lld%s", (long long)r.sizes[i], r.ran[i] ? "" : "x");
        printf("memory %s: found %lld; trials%s\n", mode ? "binsearch" : "power", (long long)found, got);
        bool ran_found = false, failed_above = false;
        for (int i = 0; i < r.n_trials; i++) {
            if (r.sizes[i] == found && r.ran[i]) ran_found = true;
            if (!r.ran[i] && r.sizes[i] == (mode ? found + 1 : 2 * found)) failed_above = true;
        }
        CHECK(found >= 2 && found < 8192 && ran_found && failed_above,
              "memory %s: found %lld; it ran and %s did not (trials%s)", mode ? "binsearch" : "power", (long long)found,
              mode ? "found + 1" : "2 x found", got);
        /* the memory the failed sizes took came back: a fit at power's size runs (it has up to 2x
         * room; binsearch's is the edge itself, where a fit's other order of allocations, e.g. the
         * optimizer made after the step, may still run out) */
        if (mode == 0 && g_fit_after) {
            g_max_seen = 0;
            const volt_status fst = volt_trainer_fit(w.t, &mlp_ops, &w.m, w.l, NULL, NULL);
            CHECK(fst == VOLT_OK, "memory: fit at the size found: %s", volt_trainer_errmsg(w.t));
            CHECK(g_max_seen == found, "memory: fit ran batches of %lld, want %lld", (long long)g_max_seen, (long long)found);
        }
        drop(&w);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "cuda")) {   /* the simulator's capped device (tests/gpu_sim.cmake) */
        const volt_backend *be = volt__backend_find("cuda");
        if (!be || be->device_count() == 0) { printf("SKIP: no cuda device (the simulator build runs this)\n"); return 77; }
        g_fit_after = false;
        test_memory();
    } else if (argc > 1 && !strcmp(argv[1], "memory")) {
        test_memory();
    } else {
        test_power();
        test_binsearch();
        test_limits();
        test_accumulate();
        test_grads_after_failure();
        test_tuner_failures();
        test_lr_finder();
        test_batch_size_finder_callback();
        test_eval_batch_size_finder();
        test_finder_failures();
    }
    free(X);
    free(Y);
    return vtest_finish();
}
