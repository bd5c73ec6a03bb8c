/* compile = true and deferred index checks, without a GPU (docs/CUDA.md, "compile").
 *
 * The test registers "cpu-graph": the cpu backend's table with the version-3 entries a
 * GPU backend has — an error word, and graph capture that records instead of capturing:
 * while "capturing" the cpu kernels still run (so the capture step trains, as the eager
 * step would), H2D copies are recorded and re-done by each launch (an H2D_SNAPSHOT from the
 * bytes its source held at capture, as core/cuda/graph.c does), and an allocation, a
 * free, a device->host read or a synchronize is refused and named by graph_end, as the
 * cuda backend does. A launch runs no kernel: it re-does the recorded copies and logs what
 * the graph would read — the batch at the address captured and the step's RNG offset in
 * device memory — which the test compares with what the loader gave and the offsets an
 * eager run would use. Its embedding and cross_entropy kernels report a bad index through
 * the error word (volt__step_defer), like cuda's, so core/deferred.c runs here too.
 *
 * Checked: the trainer keys and their errors (compile on a backend without capture,
 * matmul_precision on cpu, what a captured step cannot do); replay happens (training_step
 * runs only for the eager and capture steps), with each batch's inputs at the captured
 * address and each step's RNG offset; the shorter last batch gets its own graph; a host
 * read, a host-valued metric and an on_after_backward callback fail compile naming the
 * culprit; with gradient accumulation (k 2 and 3, epochs whose batch count is not a multiple
 * of k) each kind of micro-step — ends a window or not, grads cleared or not — launches its own
 * graph with the right batch and RNG offset, both kinds are replayed, and global_step and the
 * optimizer hooks count one per window, as eagerly; deferred errors give the CPU's message (first position, first op) at
 * volt_step_check and at volt_step_end, and the word resets. The user's host data in a
 * captured step (from_host, copy_from_host, a seed grad) is a snapshot: a launch delivers
 * the capture-time bytes after the buffers were overwritten; the RNG offset is re-read. */
#include "vtest.h"
#include "core/internal.h"
#include "volt/volt.h"
#include "volt/trainer.h"

/* ---- the recording backend ------------------------------------------------------------------ */
/* snap: H2D_SNAPSHOT's copy of the source bytes at capture (malloc'd, the graph's), else NULL */
typedef struct rec_copy { void *dst; const void *src; size_t n; volt_copy_kind kind; unsigned char *snap; } rec_copy;
#define MAX_COPIES 64
struct volt_device_graph { rec_copy h2d[MAX_COPIES]; int n_h2d; };
static void free_snaps(rec_copy *r, int n) {
    for (int i = 0; i < n; i++) free(r[i].snap);
}

static const volt_backend *g_cpu;
static volt_backend g_be;
static volt_kernel g_kernels[VOLT_OP_COUNT];
static uint64_t g_word = UINT64_MAX;   /* the error word: cpu device memory is host memory */
static struct {
    bool capturing;
    char refused[256];
    rec_copy h2d[MAX_COPIES];
    int n_h2d, begins, ends, launches;
} g_cap;
/* what each launch saw: the first feature of the batch's first row, the RNG offset */
static const float *g_batch_x;         /* set by the module's training_step: the captured address */
static const volt_step *g_step;
static double g_launch_x[64];
static uint64_t g_launch_rng[64];
static const volt_device_graph *g_launch_g[64];   /* which graph each launch ran */

static void refuse(volt_device *d, const char *what) {
    if (g_cap.refused[0]) return;
    snprintf(g_cap.refused, sizeof g_cap.refused, "%s%s%s%s", what, d->capture_note ? " (in " : "",
             d->capture_note ? d->capture_note : "", d->capture_note ? ")" : "");
}
static void *rb_alloc(volt_device *d, size_t n) {
    if (g_cap.capturing) { refuse(d, "allocated device memory"); return NULL; }
    return g_cpu->alloc(d, n);
}
static void rb_free(volt_device *d, void *p) {
    if (g_cap.capturing && p) refuse(d, "freed device memory");
    g_cpu->free(d, p);
}
static void rb_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k) {
    if (g_cap.capturing && (k == VOLT_COPY_H2D || k == VOLT_COPY_H2D_SNAPSHOT) && g_cap.n_h2d < MAX_COPIES) {
        rec_copy r = { dst, src, n, k, NULL };
        if (k == VOLT_COPY_H2D_SNAPSHOT) {
            CHECK((r.snap = malloc(n ? n : 1)) != NULL, "out of memory for a snapshot");
            if (r.snap) memcpy(r.snap, src, n);
        }
        g_cap.h2d[g_cap.n_h2d++] = r;
    }
    if (g_cap.capturing && k == VOLT_COPY_D2H) refuse(d, "read device memory on the host");
    g_cpu->copy(d, dst, src, n, k);   /* the cpu kernels run during "capture": keep the data right */
}
static void rb_sync(volt_device *d) {
    if (g_cap.capturing) refuse(d, "synchronized");
    g_cpu->synchronize(d);
}
static uint64_t *rb_error_word(volt_device *d) { (void)d; return &g_word; }
static volt_status rb_begin(volt_device *d, char *err, size_t n) {
    (void)d;
    if (g_cap.capturing) { snprintf(err, n, "already capturing"); return VOLT_ERR_STATE; }
    g_cap.capturing = true;
    g_cap.refused[0] = 0;
    g_cap.n_h2d = 0;
    g_cap.begins++;
    return VOLT_OK;
}
static volt_status rb_end(volt_device *d, volt_device_graph **out, char *err, size_t n) {
    (void)d;
    *out = NULL;
    g_cap.capturing = false;
    g_cap.ends++;
    volt_device_graph *g = g_cap.refused[0] ? NULL : calloc(1, sizeof *g);
    if (!g) {
        free_snaps(g_cap.h2d, g_cap.n_h2d);
        g_cap.n_h2d = 0;
        if (!g_cap.refused[0]) return VOLT_ERR_NOMEM;
        snprintf(err, n, "the captured step %s", g_cap.refused);
        return VOLT_ERR_UNSUPPORTED;
    }
    memcpy(g->h2d, g_cap.h2d, sizeof g->h2d);
    g->n_h2d = g_cap.n_h2d;
    *out = g;
    return VOLT_OK;
}
static volt_status rb_launch(volt_device *d, volt_device_graph *g, char *err, size_t n) {
    (void)d; (void)err; (void)n;
    for (int i = 0; i < g->n_h2d; i++) memcpy(g->h2d[i].dst, g->h2d[i].snap ? g->h2d[i].snap : g->h2d[i].src, g->h2d[i].n);
    if (g_cap.launches < 64) {
        g_launch_x[g_cap.launches] = g_batch_x ? g_batch_x[0] : -1;
        g_launch_rng[g_cap.launches] = g_step ? *g_step->rng_dev : UINT64_MAX;
        g_launch_g[g_cap.launches] = g;
    }
    g_cap.launches++;
    return VOLT_OK;
}
static void rb_destroy(volt_device *d, volt_device_graph *g) {
    (void)d;
    if (g) free_snaps(g->h2d, g->n_h2d);
    free(g);
}

/* embedding and cross_entropy as cuda runs them: a bad index is folded into the error word
 * (slot << 40 | first bad position) and the op carries on */
static int64_t idx_at(const volt_tensor *t, int64_t i) {
    return t->dtype == VOLT_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}
static void fold(uint64_t key) { if (key < g_word) g_word = key; }
static volt_status emb_fwd(volt_step *s, volt_node *n) {
    const volt_attr_embedding *at = &n->attr.embedding;
    uint64_t key;
    VOLT_TRY(volt__step_defer(s, VOLT_OP_EMBEDDING, n->in[0], at->num, &key));
    for (int64_t p = 0; p < at->n; p++) {
        int64_t id = idx_at(n->in[0], p);
        if (id < 0 || id >= at->num) {
            fold(key | (uint64_t)p);
            memset(n->out->data, 0, volt_tensor_bytes(n->out));
            return VOLT_OK;
        }
    }
    return g_cpu->kernels[VOLT_OP_EMBEDDING].forward(s, n);
}
static volt_status xent_fwd(volt_step *s, volt_node *n) {
    const volt_attr_cross_entropy *at = &n->attr.cross_entropy;
    uint64_t key;
    VOLT_TRY(volt__step_defer(s, VOLT_OP_CROSS_ENTROPY, n->in[1], at->classes, &key));
    for (int64_t r = 0; r < at->n; r++) {
        int64_t t = idx_at(n->in[1], r);
        if (t != at->ignore_index && (t < 0 || t >= at->classes)) {
            fold(key | (uint64_t)r);
            ((float *)n->out->data)[0] = NAN;
            n->attr.cross_entropy.count = 0;
            return VOLT_OK;
        }
    }
    return g_cpu->kernels[VOLT_OP_CROSS_ENTROPY].forward(s, n);
}
/* after a flagged forward the backward has nothing valid to do (the step is failing) */
static volt_status flagged_bwd(volt_step *s, volt_node *n) {
    if (g_word != UINT64_MAX) return VOLT_OK;
    return g_cpu->kernels[n->op].backward(s, n);
}

static void register_backend(void) {
    g_cpu = volt__backend_find("cpu");
    memcpy(g_kernels, g_cpu->kernels, sizeof g_kernels);
    g_kernels[VOLT_OP_EMBEDDING].forward = emb_fwd;
    g_kernels[VOLT_OP_EMBEDDING].backward = flagged_bwd;
    g_kernels[VOLT_OP_CROSS_ENTROPY].forward = xent_fwd;
    g_kernels[VOLT_OP_CROSS_ENTROPY].backward = flagged_bwd;
    g_be = *g_cpu;
    g_be.version = VOLT_BACKEND_VERSION;
    g_be.name = "cpu-graph";
    g_be.description = "test: cpu with recorded graph capture and an error word";
    g_be.alloc = rb_alloc;
    g_be.free = rb_free;
    g_be.copy = rb_copy;
    g_be.synchronize = rb_sync;
    g_be.kernels = g_kernels;
    g_be.error_word = rb_error_word;
    g_be.graph_begin = rb_begin;
    g_be.graph_end = rb_end;
    g_be.graph_launch = rb_launch;
    g_be.graph_destroy = rb_destroy;
    char err[256] = "";
    CHECK_OK(volt__backend_register(&g_be, err, sizeof err));
    /* half a graph table is refused */
    volt_backend half = g_be;
    half.name = "half-graph";
    half.graph_launch = NULL;
    CHECK(volt__backend_register(&half, err, sizeof err) == VOLT_ERR_INVALID_ARG && strstr(err, "graph_launch"), "%s", err);
}

/* ---- deferred index checks ------------------------------------------------------------------- */
typedef volt_tensor *(*build)(volt_step *s, volt_tensor *ids, volt_tensor *tab, volt_tensor *tg);
static volt_tensor *b_emb(volt_step *s, volt_tensor *ids, volt_tensor *tab, volt_tensor *tg) {
    (void)tg;
    return volt_sum(s, volt_embedding(s, ids, tab));
}
static volt_tensor *b_emb_xent(volt_step *s, volt_tensor *ids, volt_tensor *tab, volt_tensor *tg) {
    return volt_cross_entropy(s, volt_embedding(s, ids, tab), tg);
}

/* Runs fn on backend be; *msg = the error reported (at the op on cpu, at volt_step_check on
 * cpu-graph), "" when none. at_end: skip the check, read the status after volt_step_end. */
static void run_ids(const char *be, build fn, const int64_t *ids, volt_shape ids_sh, const int64_t *tg, char *msg,
                    size_t n, bool at_end) {
    volt_step_config c;
    volt_step_config_init(&c);
    c.backend = be;
    volt_step *s = NULL;
    CHECK_OK(volt_step_create(&c, &s));
    volt_step_begin(s, true, 0);
    float tab[5 * 3];
    for (int i = 0; i < 15; i++) tab[i] = 0.1f * (float)i;
    volt_tensor *ti = volt_tensor_from_host(s, VOLT_I64, ids_sh, ids);
    volt_tensor *tb = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(5, 3), tab));
    volt_tensor *ty = tg ? volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(volt_shape_numel(ids_sh)), tg) : NULL;
    volt_tensor *y = fn(s, ti, tb, ty);
    if (y) volt_step_backward(s, y);   /* runs before the check, as in the trainer */
    if (!at_end) volt_step_check(s);
    volt_step_end(s);
    snprintf(msg, n, "%s", volt_step_status(s) < 0 ? volt_step_errmsg(s) : "");
    volt_step_destroy(s);
}

static void test_deferred(void) {
    char want[512], got[512];
    /* several bad ids: the first position, as the cpu names it */
    const int64_t ids[6] = { 0, 7, 2, -1, 10, 4 };
    run_ids("cpu", b_emb, ids, VOLT_SHAPE(3, 2), NULL, want, sizeof want, false);
    run_ids("cpu-graph", b_emb, ids, VOLT_SHAPE(3, 2), NULL, got, sizeof got, false);
    CHECK(want[0] && !strcmp(want, got), "first bad id: got \"%s\", want \"%s\"", got, want);
    CHECK(strstr(got, "ids[0, 1] = 7"), "%s", got);
    CHECK(g_word == UINT64_MAX, "the word is reset after it was read");
    /* the error surfaces at volt_step_end without an explicit check */
    run_ids("cpu-graph", b_emb, ids, VOLT_SHAPE(3, 2), NULL, got, sizeof got, true);
    CHECK(!strcmp(want, got), "at step end: got \"%s\", want \"%s\"", got, want);
    /* the second op of the step is the bad one */
    const int64_t ok_ids[4] = { 0, 4, 2, 1 }, bad_ids[4] = { 0, 5, 2, 1 }, bad_tg[4] = { 0, 2, 1, 3 }, ok_tg[4] = { 0, 2, 1, 1 };
    run_ids("cpu", b_emb_xent, ok_ids, VOLT_SHAPE(4), bad_tg, want, sizeof want, false);
    run_ids("cpu-graph", b_emb_xent, ok_ids, VOLT_SHAPE(4), bad_tg, got, sizeof got, false);
    CHECK(strstr(want, "cross_entropy: target[3] = 3") && !strcmp(want, got), "second op: got \"%s\", want \"%s\"", got, want);
    /* both bad: the first op in program order */
    run_ids("cpu", b_emb_xent, bad_ids, VOLT_SHAPE(4), bad_tg, want, sizeof want, false);
    run_ids("cpu-graph", b_emb_xent, bad_ids, VOLT_SHAPE(4), bad_tg, got, sizeof got, false);
    CHECK(strstr(want, "embedding") && !strcmp(want, got), "both bad: got \"%s\", want \"%s\"", got, want);
    /* and good data passes afterwards */
    run_ids("cpu-graph", b_emb_xent, ok_ids, VOLT_SHAPE(4), ok_tg, got, sizeof got, false);
    CHECK(!got[0], "good data after errors: \"%s\"", got);
}

/* ---- the user's host data in a captured step: a snapshot ----------------------------------- */
/* A step captured by hand: from_host, copy_from_host into a tensor the step made, backward
 * with a seed grad, each from a host buffer the "user" overwrites once the capture is done.
 * A launch must deliver the capture-time bytes (the graph's copy), and still re-read the
 * library's own input at its fixed address (the RNG offset, which the trainer rewrites). */
static void test_snapshot(void) {
    volt_step_config c;
    volt_step_config_init(&c);
    c.backend = "cpu-graph";
    volt_step *s = NULL;
    CHECK_OK(volt_step_create(&c, &s));
    if (!s) return;
    volt_device *d = s->dev;
    char err[256] = "";
    float u[4], v[4], seed[4], want[3][4];
    const void *srcs[3] = { u, v, seed };
    void *dst[2] = { NULL, NULL };
    volt_device_graph *g = NULL;
    memset(&g_cap, 0, sizeof g_cap);
    g_step = s;   /* rb_launch's log reads this step's RNG offset */
    g_batch_x = NULL;
    for (int pass = 0; pass < 2; pass++) {   /* eager (the step's memory warms up), then captured */
        for (int i = 0; i < 4; i++) {
            u[i] = (float)(1 + i + 10 * pass);
            v[i] = -(float)(1 + i + 10 * pass);
            seed[i] = 0.5f * (float)(i + 1) + (float)pass;
        }
        memcpy(want[0], u, sizeof u);
        memcpy(want[1], v, sizeof v);
        memcpy(want[2], seed, sizeof seed);
        if (pass) CHECK(volt__dev_graph_begin(d, err, sizeof err) == VOLT_OK, "graph_begin: %s", err);
        volt_step_begin(s, true, 3);
        volt_tensor *a = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), u);
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(4)));
        CHECK(a && x && volt_tensor_copy_from_host(x, v) == VOLT_OK, "%s", volt_step_errmsg(s));
        volt_tensor *y = volt_mul(s, x, a);
        CHECK(y && volt_step_backward_grad(s, y, seed) == VOLT_OK, "%s", volt_step_errmsg(s));
        if (a && x) { dst[0] = a->data; dst[1] = x->data; }
        volt_step_end(s);
        if (pass) CHECK(volt__dev_graph_end(d, &g, err, sizeof err) == VOLT_OK, "graph_end: %s", err);
    }
    if (!g) { volt_step_destroy(s); g_step = NULL; return; }
    /* the user's buffers are theirs again; the trainer writes the next step's RNG offset */
    for (int i = 0; i < 4; i++) u[i] = v[i] = seed[i] = 99.f;
    s->rng_offset = 77;
    CHECK(d->be->graph_launch(d, g, err, sizeof err) == VOLT_OK, "graph_launch: %s", err);
    int found[3] = { 0, 0, 0 }, rng = 0;
    for (int i = 0; i < g->n_h2d; i++) {
        const rec_copy *r = &g->h2d[i];
        if (r->src == &s->rng_offset) {
            rng++;
            CHECK(r->kind == VOLT_COPY_H2D, "the RNG offset's copy is a snapshot (kind %d): a replay would freeze it",
                  (int)r->kind);
        }
        for (int k = 0; k < 3; k++) {
            if (r->src != srcs[k]) continue;
            static const char *what[3] = { "volt_tensor_from_host", "volt_tensor_copy_from_host", "backward's seed grad" };
            found[k]++;
            CHECK(r->kind == VOLT_COPY_H2D_SNAPSHOT && r->n == sizeof u, "%s: recorded as kind %d, %zu bytes (want an "
                  "H2D_SNAPSHOT of %zu)", what[k], (int)r->kind, r->n, sizeof u);
            float got[4] = { 0 };
            memcpy(got, r->dst, r->n < sizeof got ? r->n : sizeof got);
            CHECK(!memcmp(got, want[k], sizeof got), "%s: the launch delivered %g %g %g %g (want the capture's %g %g %g %g)",
                  what[k], got[0], got[1], got[2], got[3], want[k][0], want[k][1], want[k][2], want[k][3]);
            if (k < 2) CHECK(r->dst == dst[k], "%s: copied to %p, not the tensor's data %p", what[k], r->dst, dst[k]);
        }
    }
    CHECK(found[0] == 1 && found[1] == 1 && found[2] == 1, "recorded user copies: from_host %d, copy_from_host %d, "
          "seed %d (want 1 each)", found[0], found[1], found[2]);
    CHECK(rng == 1 && *s->rng_dev == 77, "the RNG offset: %d copies, %llu after the launch (want 1, 77: re-read)", rng,
          (unsigned long long)*s->rng_dev);
    d->be->graph_destroy(d, g);
    volt_step_destroy(s);
    g_step = NULL;
}

/* ---- a small module ------------------------------------------------------------------------- */
enum { NS = 10, IN = 4, NC = 3, BS = 4 };
static float X[NS * IN];
static int64_t Y[NS];
typedef enum { M_PLAIN, M_HOST_READ, M_HOST_VALUE } mode;
typedef struct { volt_tensor *w, *b; int64_t steps_run; mode mode; } lin;

static volt_status lin_setup(void *self, volt_params *ps) {
    lin *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(NC, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(NC), VOLT_INIT_ZEROS, &m->b);
}
static volt_status lin_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    (void)i;
    m->steps_run++;
    g_batch_x = b->fields[0].data;   /* the device batch: what a graph reads */
    g_step = s;
    volt_tensor *h = volt_dropout(s, volt_batch_x(b), 0.25f);
    volt_tensor *loss = volt_cross_entropy(s, volt_linear(s, h, m->w, m->b), volt_batch_y(b));
    if (m->mode == M_HOST_READ) (void)volt_tensor_item(loss);
    if (m->mode == M_HOST_VALUE) volt_log_value(s, "rows", (double)b->size, VOLT_LOG_STEP);
    volt_log(s, "train_loss", loss, VOLT_LOG_STEP);
    return volt_step_set_loss(s, loss);
}
static volt_status lin_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    return VOLT_OK;
}
static const volt_module_ops lin_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                         .configure_optimizers = lin_opt, .training_step = lin_train };

/* a validation step that logs 600 values: the log staging grows (4096 -> 8192 bytes) after
 * the first graph was captured, so that graph's addresses are stale */
static volt_status lin_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    (void)i;
    volt_tensor *loss = volt_cross_entropy(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
    for (int k = 0; k < 600; k++) VOLT_TRY(volt_log(s, "val_loss", loss, 0));
    return VOLT_OK;
}
static const volt_module_ops lin_val_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                             .configure_optimizers = lin_opt, .training_step = lin_train,
                                             .validation_step = lin_val };

static volt_status after_bwd(void *self, volt_trainer *t) { (void)self; (void)t; return VOLT_OK; }
static const volt_callback_ops after_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "GradPeek",
                                             .on_after_backward = after_bwd, .destroy = free };
static const volt_callback_ops zero_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ZeroPeek",
                                            .on_before_zero_grad = after_bwd, .destroy = free };
static const volt_callback_ops *g_peek_ops = &after_ops;

static void trainer_cfg(volt_trainer_config *c, const char *acc) {
    volt_trainer_config_init(c);
    c->max_epochs = 3;
    c->enable_checkpointing = c->enable_logger = c->enable_progress_bar = c->enable_model_summary = false;
    c->default_root_dir = getenv("VOLT_TEST_TMP") ? getenv("VOLT_TEST_TMP") : ".";
    c->accelerator = acc;
    c->compile = true;
    c->seed = 5;
}

static volt_loader *loader(volt_dataset *ds) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BS;   /* 4, 4, 2: the last batch is shorter */
    lc.shuffle = false;
    lc.num_workers = 2;   /* batch slots rotate: the step must read its copy, not the slot */
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &l));
    return l;
}

/* config errors: one message each, naming the problem */
static void expect_create_err(volt_trainer_config *c, const char *want) {
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(c, &t);
    CHECK(st < 0 && t && strstr(volt_trainer_errmsg(t), want), "create: %s: \"%s\" (want \"%s\")", volt_status_str(st),
          t ? volt_trainer_errmsg(t) : "", want);
    volt_trainer_destroy(t);
}

static void test_config_errors(void) {
    volt_trainer_config c;
    trainer_cfg(&c, "cpu");
    expect_create_err(&c, "compile needs a backend with graph capture: 'cpu' has none");
    trainer_cfg(&c, "cpu");
    c.compile = false;
    c.matmul_precision = "high";
    expect_create_err(&c, "matmul_precision=\"high\" allows TF32 GEMMs, which backend 'cpu' has none");
    c.matmul_precision = "medium";
    expect_create_err(&c, "backend 'cpu' has none");
    c.matmul_precision = "fast";
    expect_create_err(&c, "matmul_precision must be \"highest\", \"high\" or \"medium\", got \"fast\"");
    c.matmul_precision = "highest";
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_trainer_destroy(t);
    trainer_cfg(&c, "cpu-graph");
    c.accumulate_grad_batches = 2;   /* a graph per kind of micro-step: capturable */
    CHECK(volt_trainer_create(&c, &t) == VOLT_OK, "compile with accumulate_grad_batches 2: %s",
          t ? volt_trainer_errmsg(t) : "no trainer");
    volt_trainer_destroy(t);
    trainer_cfg(&c, "cpu-graph");
    c.precision = "16-mixed";   /* its inf/NaN skip is decided on the device: capturable */
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_trainer_destroy(t);
    trainer_cfg(&c, "cpu-graph");
    c.gradient_clip_val = 1.0f;
    c.gradient_clip_algorithm = "value";   /* clipping by value is device work: capturable */
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_trainer_destroy(t);
}

/* compile on cpu-graph: what ran eagerly, what was captured, what each replay read */
static void test_replay(volt_dataset *ds, float clip_norm, const char *precision) {
    volt_trainer_config c;
    trainer_cfg(&c, "cpu-graph");
    c.gradient_clip_val = clip_norm;   /* > 0: by norm, on the device in the captured step (no host read) */
    c.precision = precision;           /* 16-mixed: unscale and the inf/NaN skip with no host read either */
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    lin m = { 0 };
    volt_loader *l = loader(ds);
    memset(&g_cap, 0, sizeof g_cap);
    volt_status st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "fit: %s", volt_trainer_errmsg(t));
    int64_t eager = -1, captured = -1, replayed = -1;
    volt_trainer_compile_stats(t, &eager, &captured, &replayed);
    /* epoch 1: 4 rows eager, captured; 2 rows eager. epoch 2: replay x2, 2 rows captured.
     * epoch 3: replay x3 */
    CHECK(eager == 2 && captured == 2 && replayed == 5, "eager %lld captured %lld replayed %lld (want 2, 2, 5)",
          (long long)eager, (long long)captured, (long long)replayed);
    CHECK(m.steps_run == 4, "training_step ran %lld times (want 4: two eager, two captures; replays run none)",
          (long long)m.steps_run);
    CHECK(g_cap.begins == 2 && g_cap.ends == 2 && g_cap.launches == 7, "begins %d ends %d launches %d (want 2, 2, 7)",
          g_cap.begins, g_cap.ends, g_cap.launches);
    CHECK(volt_trainer_global_step(t) == 9, "global_step %lld (want 9)", (long long)volt_trainer_global_step(t));
    /* launches: step 1 (batch rows 4..), epoch 2: 0.., 4.., 8.. (the short batch's capture),
     * epoch 3: 0.., 4.., 8.. — X[row * IN] = row */
    const double want_x[7] = { 4, 0, 4, 8, 0, 4, 8 };
    const uint64_t want_rng[7] = { 1, 3, 4, 5, 6, 7, 8 };   /* the eager run's offsets: one per step */
    for (int i = 0; i < 7 && i < g_cap.launches; i++) {
        CHECK(g_launch_x[i] == want_x[i], "launch %d read batch row %g at the captured address (want %g)", i, g_launch_x[i],
              want_x[i]);
        CHECK(g_launch_rng[i] == want_rng[i], "launch %d: RNG offset %llu (want %llu)", i,
              (unsigned long long)g_launch_rng[i], (unsigned long long)want_rng[i]);
    }
    /* no capture is open (core/profile.c skips its synchronize while one is), and the
     * replays' hooks left no capture note behind */
    volt_device *dev = NULL;
    char derr[128];
    CHECK_OK(volt__device_get("cpu-graph", 0, &dev, derr, sizeof derr));
    CHECK(dev && !dev->capturing && !dev->capture_note, "after fit the device is %scapturing, note '%s' (want neither)",
          dev && dev->capturing ? "" : "not ", dev && dev->capture_note ? dev->capture_note : "");
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* the step's memory moves (validation grows the log staging): every graph is dropped and
 * shapes start again with an eager step, instead of replaying into freed memory */
static void test_memory_moved(volt_dataset *ds) {
    volt_trainer_config c;
    trainer_cfg(&c, "cpu-graph");
    c.num_sanity_val_steps = 0;
    c.limit_val_batches = 1;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    lin m = { 0 };
    volt_loader *l = loader(ds), *v = loader(ds);
    memset(&g_cap, 0, sizeof g_cap);
    volt_status st = volt_trainer_fit(t, &lin_val_ops, &m, l, v, NULL);
    CHECK(st == VOLT_OK, "fit: %s", volt_trainer_errmsg(t));
    int64_t eager = -1, captured = -1, replayed = -1;
    volt_trainer_compile_stats(t, &eager, &captured, &replayed);
    /* epoch 1: eager, capture, eager; validation grows the staging. epoch 2: the graph is
     * stale: eager, capture, eager (B's entry was dropped too). epoch 3: replay x2, capture */
    CHECK(eager == 4 && captured == 3 && replayed == 2 && g_cap.launches == 5,
          "eager %lld captured %lld replayed %lld launches %d (want 4, 3, 2, 5)", (long long)eager, (long long)captured,
          (long long)replayed, g_cap.launches);
    CHECK(volt_trainer_global_step(t) == 9, "global_step %lld (want 9)", (long long)volt_trainer_global_step(t));
    volt_loader_destroy(l);
    volt_loader_destroy(v);
    volt_trainer_destroy(t);
}

/* ---- gradient accumulation: a graph per kind of micro-step ------------------------------------ */
/* Each batch, after its step: which launch (if any) ran it, and whether that is what the eager
 * run would have done. The kind of a micro-step is (ends a window, grads start cleared): the
 * graph launched for a kind is always the same one, and kinds never share a graph. */
typedef struct {
    int64_t k, micro, launches, hooks, per_kind[4];   /* per_kind: launches of each kind */
    bool prev_boundary;                               /* the micro-step before ended a window */
    const volt_device_graph *graph_of[4];
    int64_t n_batches, bs;
} accum_watch;
static volt_status watch_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t idx) {
    accum_watch *w = self;
    (void)t; (void)b;
    const bool boundary = (idx + 1) % w->k == 0 || idx + 1 == w->n_batches;
    const bool cleared = w->prev_boundary;   /* the first micro-step of a fit: grads never cleared */
    const int kind = 2 * boundary + cleared;
    const int64_t n = g_cap.launches - w->launches;
    CHECK(n == 0 || n == 1, "micro-step %lld: %lld launches", (long long)w->micro, (long long)n);
    if (n == 1 && w->launches < 64) {
        const int64_t i = w->launches;
        CHECK(g_launch_x[i] == (double)(idx * w->bs), "micro-step %lld (batch %lld): the launch read batch row %g at the "
              "captured address (want %lld)", (long long)w->micro, (long long)idx, g_launch_x[i], (long long)(idx * w->bs));
        CHECK(g_launch_rng[i] == (uint64_t)w->micro, "micro-step %lld: the launch's RNG offset is %llu (the eager run's: %lld)",
              (long long)w->micro, (unsigned long long)g_launch_rng[i], (long long)w->micro);
        if (!w->graph_of[kind]) {
            for (int o = 0; o < 4; o++)
                CHECK(w->graph_of[o] != g_launch_g[i], "micro-step %lld (boundary %d, cleared %d) launched the graph of "
                      "kind %d", (long long)w->micro, boundary, cleared, o);
            w->graph_of[kind] = g_launch_g[i];
        }
        CHECK(w->graph_of[kind] == g_launch_g[i], "micro-step %lld (boundary %d, cleared %d) launched another graph than "
              "its kind's", (long long)w->micro, boundary, cleared);
        w->per_kind[kind]++;
    }
    w->launches = g_cap.launches;
    w->prev_boundary = boundary;
    w->micro++;
    return VOLT_OK;
}
static volt_status watch_before_step(void *self, volt_trainer *t) {
    (void)t;
    ((accum_watch *)self)->hooks++;
    return VOLT_OK;
}
static const volt_callback_ops watch_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "AccumWatch",
                                             .on_train_batch_end = watch_batch,
                                             .on_before_optimizer_step = watch_before_step };

/* k micro-steps per window over batches of bs rows (NS = 10: 5 of 2, or 4, 4, 2), 3 epochs */
static void test_accum(volt_dataset *ds, int64_t bs, int64_t k, float clip_norm, const char *precision, int64_t want_eager,
                       int64_t want_captured, int64_t want_replayed) {
    volt_trainer_config c;
    trainer_cfg(&c, "cpu-graph");
    c.accumulate_grad_batches = k;
    c.gradient_clip_val = clip_norm;
    c.precision = precision;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    const int64_t nb = (NS + bs - 1) / bs, windows = 3 * ((nb + k - 1) / k);
    accum_watch w = { .k = k, .n_batches = nb, .bs = bs };
    CHECK_OK(volt_trainer_add_callback(t, &watch_ops, &w));
    lin m = { 0 };
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = bs;
    lc.shuffle = false;
    lc.num_workers = 2;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &l));
    memset(&g_cap, 0, sizeof g_cap);
    volt_status st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "fit: %s", volt_trainer_errmsg(t));
    int64_t eager = -1, captured = -1, replayed = -1;
    volt_trainer_compile_stats(t, &eager, &captured, &replayed);
    char what[96];
    snprintf(what, sizeof what, "batches of %lld, accumulate_grad_batches %lld, %s, clip %g", (long long)bs, (long long)k,
             precision, (double)clip_norm);
    CHECK(eager == want_eager && captured == want_captured && replayed == want_replayed,
          "%s: eager %lld captured %lld replayed %lld (want %lld, %lld, %lld)", what, (long long)eager, (long long)captured,
          (long long)replayed, (long long)want_eager, (long long)want_captured, (long long)want_replayed);
    CHECK(m.steps_run == eager + captured, "%s: training_step ran %lld times (want %lld: eager and captured steps only)",
          what, (long long)m.steps_run, (long long)(eager + captured));
    CHECK(w.micro == 3 * nb && g_cap.launches == captured + replayed, "%s: %lld micro-steps, %d launches", what,
          (long long)w.micro, g_cap.launches);
    /* the eager run's optimizer steps: one per window, the shorter last one of each epoch too */
    CHECK(volt_trainer_global_step(t) == windows && w.hooks == windows, "%s: global_step %lld, on_before_optimizer_step "
          "ran %lld times (want %lld each)", what, (long long)volt_trainer_global_step(t), (long long)w.hooks, (long long)windows);
    /* both kinds of micro-step were replayed: inside a window and at its end */
    CHECK(w.per_kind[0] + w.per_kind[1] > 0 && w.per_kind[2] + w.per_kind[3] > 0, "%s: launches per kind (within, "
          "within cleared, end, end cleared): %lld %lld %lld %lld", what, (long long)w.per_kind[0], (long long)w.per_kind[1],
          (long long)w.per_kind[2], (long long)w.per_kind[3]);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

static const volt_module_ops *g_fit_ops = &lin_ops;   /* what expect_fit_err trains */
static volt_status clip_hook(void *self, volt_trainer *t, float val, const char *algo) {
    return volt_trainer_clip_gradients(t, val, algo);
}

static void expect_fit_err(volt_dataset *ds, mode md, bool peek, const char *want) {
    volt_trainer_config c;
    trainer_cfg(&c, "cpu-graph");
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (peek) {
        int *self = calloc(1, sizeof *self);
        CHECK_OK(volt_trainer_add_callback(t, g_peek_ops, self));
    }
    lin m = { .mode = md };
    volt_loader *l = loader(ds);
    volt_status st = volt_trainer_fit(t, g_fit_ops, &m, l, NULL, NULL);
    CHECK(st < 0 && strstr(volt_trainer_errmsg(t), want), "fit: %s: \"%s\" (want \"%s\")", volt_status_str(st),
          volt_trainer_errmsg(t), want);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

int main(void) {
    register_backend();
    for (int i = 0; i < NS; i++) {
        Y[i] = i % NC;
        for (int k = 0; k < IN; k++) X[i * IN + k] = k ? sinf((float)(i + k)) : (float)i;
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { X, Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &ds));
    test_deferred();
    test_snapshot();
    test_config_errors();
    test_replay(ds, 0.f, "32-true");
    test_replay(ds, 0.5f, "32-true");
    test_replay(ds, 0.f, "16-mixed");
    test_replay(ds, 0.5f, "16-mixed");
    test_memory_moved(ds);
    /* 5 batches of 2: k 2 windows [0 1] [2 3] [4]: the first micro-step eager (grads never
     * cleared), the first boundary eager; then captures of "first" (cleared), "last", "alone"
     * (cleared and last); 2 more epochs replay all 5 */
    test_accum(ds, 2, 2, 0.f, "32-true", 2, 3, 10);
    test_accum(ds, 2, 2, 0.5f, "32-true", 2, 3, 10);
    test_accum(ds, 2, 2, 0.5f, "16-mixed", 2, 3, 10);
    /* k 3, windows [0 1 2] [3 4]: "middle" (written) captured at batch 1, "first" at 3, "last" at 4 */
    test_accum(ds, 2, 3, 0.f, "32-true", 2, 3, 10);
    /* 4, 4, 2 with k 2: windows [0 1] [2]; the short batch its own shape, alone in its window */
    test_accum(ds, 4, 2, 0.f, "32-true", 3, 3, 3);
    expect_fit_err(ds, M_HOST_READ, false,
                   "compile: the training step cannot be captured: the captured step read device memory on the host (in training_step)");
    expect_fit_err(ds, M_HOST_VALUE, false, "metric 'rows' was logged from a host value");
    expect_fit_err(ds, M_PLAIN, true, "callback 'GradPeek' has on_after_backward");
    /* the module's own (its table's version 2) */
    volt_module_ops peek_ops = lin_ops;
    peek_ops.on_after_backward = after_bwd;
    g_fit_ops = &peek_ops;
    expect_fit_err(ds, M_PLAIN, false, "module 'lin' has on_after_backward");
    /* on_before_zero_grad (callback table 6, module table 5): inside the captured boundary */
    g_fit_ops = &lin_ops;
    g_peek_ops = &zero_ops;
    expect_fit_err(ds, M_PLAIN, true, "callback 'ZeroPeek' has on_before_zero_grad");
    volt_module_ops zero_mops = lin_ops;
    zero_mops.on_before_zero_grad = after_bwd;
    g_fit_ops = &zero_mops;
    expect_fit_err(ds, M_PLAIN, false, "module 'lin' has on_before_zero_grad");
    /* configure_gradient_clipping (module table 6): inside the captured boundary too */
    volt_module_ops clip_mops = lin_ops;
    clip_mops.configure_gradient_clipping = clip_hook;
    g_fit_ops = &clip_mops;
    expect_fit_err(ds, M_PLAIN, false, "module 'lin' has configure_gradient_clipping");
    g_fit_ops = &lin_ops;
    volt_dataset_destroy(ds);
    return vtest_finish();
}
