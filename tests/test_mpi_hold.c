/* The hold of an uneven evaluation under fsdp is given back when the loop ends (trainer/eval_loop.c
 * hold_if_uneven / drop_hold, strategies/parallel/fsdp.c volt__fsdp_hold).
 *
 *   mpirun -np N test_mpi_hold hold S      S = fsdp or fsdp_shard_grad_op
 *
 * An MLP of three units (W x W, W x W, 4 x W; W = 256, $VOLT_TEST_HOLD_WIDTH) so each unit spans
 * many pages (or simulated VMM granules). Two trainers run the same fit, 4 steps with a sanity
 * check and a validation after step 2, then standalone validate / test / predict, then a second
 * fit of 2 steps and an even validate:
 *   A: every evaluation uneven across ranks (rank r runs 1 + r batches: the loops hold the
 *      parameters gathered), B: every evaluation even (2 batches per rank: no hold).
 * Checked, per rank, from the memory report (held_param_bytes: the resident pages of the unit
 * value buffers; on cuda the mapped granules):
 *   - after each of A's evaluations (at the next training batch's start inside fit, after the
 *     call standalone): no more than after B's even one in the same place (+ the edge pages);
 *   - FULL_SHARD: no more than the owned slices (+ edges) after every one of them; SHARD_GRAD_OP:
 *     the same after the sanity check and the validation between steps 2 and 3 (what the hold
 *     gathered is given back; before them, after set-up or the step, nothing was gathered), and
 *     what it had gathered before a loop (every unit, at the end of fit) stays: as much as after
 *     the even loop;
 *   - the training losses of every step, both fits, the final parameters (gathered) and the even
 *     validation's val_loss at the end: bitwise A = B (evaluation changes no parameter, and a unit
 *     given back is gathered again from the owners' slices).
 * Without the give-back (the hold only cleared) A holds every unit after each uneven loop: the
 * bounds fail.
 *
 * A test_mpi_ program: registered only with its launches (tests/mpi_hold.cmake,
 * tests/gpu_sim_nccl.cmake). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"
#include "trainer/trainer_internal.h"
#include "strategies/parallel/parallel.h"

enum { NC = 4, BS = 2 /* per rank */, NB = 4 /* training batches per rank */, MAXL = 16 };

static int g_rank, g_world;
static int64_t g_w = 256;

typedef struct hmlp {
    volt_tensor *w[3], *b[3];
    float losses[MAXL];
    int n_losses;
    int64_t held_at[2];          /* held_param_bytes at the start of training batches 0 and 2 of the first fit */
    bool second;                 /* the second fit: record nothing */
} hmlp;

static volt_status h_setup(void *self, volt_params *ps) {
    hmlp *m = self;
    const int64_t dims[4] = { g_w, g_w, g_w, NC };
    for (int l = 0; l < 3; l++) {
        char u[16], w[32], b[32];
        snprintf(u, sizeof u, "l%d", l);
        snprintf(w, sizeof w, "l%d.weight", l);
        snprintf(b, sizeof b, "l%d.bias", l);
        VOLT_TRY(volt_params_unit(ps, u));
        VOLT_TRY(volt_param_new(ps, w, VOLT_SHAPE(dims[l + 1], dims[l]), VOLT_INIT_TORCH_LINEAR, &m->w[l]));
        VOLT_TRY(volt_param_new(ps, b, VOLT_SHAPE(dims[l + 1]), VOLT_INIT_ZEROS, &m->b[l]));
    }
    return VOLT_OK;
}
static volt_tensor *h_fwd(hmlp *m, volt_step *s, const volt_batch *b) {
    volt_tensor *h = volt_batch_x(b);
    for (int l = 0; l < 3; l++) {
        h = volt_linear(s, h, m->w[l], m->b[l]);
        if (l < 2) h = volt_relu(s, h);
    }
    return h;
}
static volt_status h_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    volt_tensor *loss = volt_cross_entropy(s, h_fwd(self, s, b), volt_batch_y(b));
    VOLT_TRY(volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_SYNC));
    return volt_step_set_loss(s, loss);
}
static volt_status h_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "val_loss", volt_cross_entropy(s, h_fwd(self, s, b), volt_batch_y(b)), VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status h_test(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "test_loss", volt_cross_entropy(s, h_fwd(self, s, b), volt_batch_y(b)), VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status h_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    (void)i;
    *out = h_fwd(self, s, b);
    return *out ? VOLT_OK : volt_step_status(s);
}
static volt_status h_out(void *ctx, const volt_batch *b, const volt_tensor *pred) { (void)ctx; (void)b; (void)pred; return VOLT_OK; }
static volt_status h_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    return VOLT_OK;
}
static const volt_module_ops h_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "hmlp", .setup = h_setup,
                                       .training_step = h_train, .validation_step = h_val, .test_step = h_test,
                                       .predict_step = h_predict, .configure_optimizers = h_opt };

static int64_t held_params(volt_trainer *t) {
    volt_memory_report r;
    CHECK_OK(volt_trainer_memory_report(t, &r));
    return r.held_param_bytes;
}
static volt_status cb_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    hmlp *m = self;
    if (!m->second && (i == 0 || i == 2)) m->held_at[i / 2] = held_params(t);
    return VOLT_OK;
}
static volt_status cb_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    (void)i;
    hmlp *m = self;
    double v = NAN;
    if (volt_trainer_metric(t, "train_loss", &v) && m->n_losses < MAXL) m->losses[m->n_losses++] = (float)v;
    return VOLT_OK;
}
static const volt_callback_ops cb_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "HoldProbe",
                                          .on_train_batch_start = cb_batch_start, .on_train_batch_end = cb_batch_end };

/* n batches of BS rows on this rank after the distributed sampler's split (world x BS x n rows) */
static volt_dataset *rows(int64_t n, int salt) {
    const int64_t k = g_world * BS * n;
    float *x = malloc(sizeof(float) * (size_t)(k * g_w));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)k);
    volt_dataset *ds = NULL;
    CHECK(x && y, "out of memory");
    if (x && y) {
        for (int64_t i = 0; i < k; i++) {
            y[i] = (i + salt) % NC;
            for (int64_t c = 0; c < g_w; c++) x[i * g_w + c] = sinf(0.01f * (float)(i * g_w + c) + (float)salt);
        }
        volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(g_w) }, { "y", VOLT_I64, VOLT_SCALAR } };
        const void *d[2] = { x, y };
        CHECK_OK(volt_dataset_from_arrays(2, f, d, k, &ds));
    }
    free(x);
    free(y);
    return ds;
}

typedef struct run {
    hmlp m;
    volt_trainer *t;
    int64_t held_eval[3];        /* after the standalone validate, test, predict */
    double val_loss;             /* the even validate at the end */
    float *params;               /* every unit gathered, f32 */
    int64_t n_params;
} run;

/* Each run its own loaders (the shuffle's state starts alike). */
static void one_run_on(run *r, const char *name, const char *root, volt_loader *train, volt_loader *val, volt_loader *even);
static void one_run(run *r, const char *name, const char *root, volt_dataset *tds, volt_dataset *vds, volt_dataset *eds) {
    volt_loader *tl = vtest_loader(tds, BS, true), *vl = vtest_loader(vds, BS, false), *el = vtest_loader(eds, BS, false);
    if (tl && vl && el) one_run_on(r, name, root, tl, vl, el);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_loader_destroy(el);
}
static void one_run_on(run *r, const char *name, const char *root, volt_loader *train, volt_loader *val, volt_loader *even) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.strategy = name;
    c.max_steps = NB;
    c.num_sanity_val_steps = 2;
    c.val_check_interval = 2;    /* after steps 2 and 4 */
    CHECK_OK(volt_trainer_create(&c, &r->t));
    if (!r->t) return;
    CHECK_OK(volt_trainer_add_callback(r->t, &cb_ops, &r->m));
    volt_status st = volt_trainer_fit(r->t, &h_ops, &r->m, train, val, NULL);
    CHECK(st == VOLT_OK, "%s: rank %d: fit: %s", name, g_rank, volt_trainer_errmsg(r->t));
    if (st < 0) return;
    if (g_rank == 0) {
        volt_comm *cm = volt__dist_comm(r->t->strategy);
        if (cm && cm->dev) printf("comm %s on device %s\n", cm->ops->name, cm->dev->be->name);
    }
    for (int k = 0; k < 3; k++) {
        st = k == 0 ? volt_trainer_validate(r->t, &h_ops, &r->m, val, NULL)
           : k == 1 ? volt_trainer_test(r->t, &h_ops, &r->m, val, NULL)
                    : volt_trainer_predict(r->t, &h_ops, &r->m, val, NULL, h_out, NULL);
        CHECK(st == VOLT_OK, "%s: rank %d: evaluation %d: %s", name, g_rank, k, volt_trainer_errmsg(r->t));
        r->held_eval[k] = held_params(r->t);
    }
    /* fit again from these weights (same module: the store stays), no validation: the units the
     * loops gave back are gathered again by the training forwards */
    r->m.second = true;
    st = volt_trainer_fit(r->t, &h_ops, &r->m, train, NULL, NULL);
    CHECK(st == VOLT_OK, "%s: rank %d: second fit: %s", name, g_rank, volt_trainer_errmsg(r->t));
    st = volt_trainer_validate(r->t, &h_ops, &r->m, even, NULL);
    CHECK(st == VOLT_OK && volt_trainer_metric(r->t, "val_loss", &r->val_loss), "%s: rank %d: even validate: %s", name, g_rank,
          volt_trainer_errmsg(r->t));
    volt_params *ps = volt_trainer_params(r->t);
    for (int u = 0; ps && u < volt_params_unit_count(ps); u++) r->n_params += volt_unit_numel(volt_params_unit_at(ps, u));
    r->params = calloc((size_t)r->n_params + 1, sizeof(float));
    CHECK(r->params != NULL, "out of memory");
    for (int u = 0, off = 0; ps && r->params && u < volt_params_unit_count(ps); u++) {   /* collective, unit by unit */
        CHECK_OK(volt__strategy_gather_unit(r->t->strategy, u, r->params + off));
        off += (int)volt_unit_numel(volt_params_unit_at(ps, u));
    }
}

static void check_hold(const char *name) {
    const char *ew = getenv("VOLT_TEST_HOLD_WIDTH"), *eg = getenv("VOLT_TEST_MEM_GRANULE");
    if (ew && atoll(ew) > 0) g_w = atoll(ew);
    char root[512];
    snprintf(root, sizeof root, "%s/hold_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *tds = rows(NB, 0), *uds = rows(1 + g_rank, 1), *eds = rows(2, 2);
    run a = { 0 }, b = { 0 };
    one_run(&a, name, root, tds, uds, eds);   /* every evaluation uneven: held */
    one_run(&b, name, root, tds, eds, eds);   /* every evaluation even */
    if (a.t && b.t && a.params && b.params) {
        volt_params *ps = volt_trainer_params(a.t);
        const int U = volt_params_unit_count(ps);
        const int64_t N = g_world, pg = sysconf(_SC_PAGESIZE);
        /* the partial pages (granules) at each unit's slice edges, as test_strategies memory */
        const int64_t full = 4 * a.n_params, shard = full / N, slack = eg && atoll(eg) > 0 ? 2 * atoll(eg) * U : 4 * pg * U;
        const bool full_shard = volt__strategy_has(a.t->strategy, VOLT_STRAT_FREES_AFTER_FORWARD);
        static const char *const after_fit[2] = { "the sanity check", "the validation after step 2" };
        for (int k = 0; k < 2; k++) {
            CHECK(a.m.held_at[k] <= b.m.held_at[k] + slack, "%s: rank %d: after %s (uneven) %lld bytes of params resident, after "
                  "the even one %lld", name, g_rank, after_fit[k], (long long)a.m.held_at[k], (long long)b.m.held_at[k]);
            /* SHARD_GRAD_OP keeps what it had gathered before a loop: before the sanity check
             * nothing (set-up leaves each rank its shard), after step 2 nothing either */
            CHECK(a.m.held_at[k] <= shard + slack, "%s: rank %d: after %s (uneven) %lld bytes of params resident, the owned "
                  "slices %lld (+ %lld)", name, g_rank, after_fit[k], (long long)a.m.held_at[k], (long long)shard, (long long)slack);
        }
        static const char *const what[3] = { "validate", "test", "predict" };
        for (int k = 0; k < 3; k++) {
            CHECK(a.held_eval[k] <= b.held_eval[k] + slack, "%s: rank %d: after an uneven %s %lld bytes of params resident, after "
                  "an even one %lld", name, g_rank, what[k], (long long)a.held_eval[k], (long long)b.held_eval[k]);
            if (full_shard)
                CHECK(a.held_eval[k] <= shard + slack, "%s: rank %d: after an uneven %s %lld bytes of params resident, the owned "
                      "slices %lld (+ %lld)", name, g_rank, what[k], (long long)a.held_eval[k], (long long)shard, (long long)slack);
            else   /* SHARD_GRAD_OP: every unit gathered at the end of fit stays, as after an even loop */
                CHECK(a.held_eval[k] >= b.held_eval[k] - slack, "%s: rank %d: after an uneven %s %lld bytes of params resident, "
                      "after an even one %lld: the units gathered before the loop were given back", name, g_rank, what[k],
                      (long long)a.held_eval[k], (long long)b.held_eval[k]);
        }
        CHECK(a.m.n_losses == 2 * NB && b.m.n_losses == 2 * NB && !memcmp(a.m.losses, b.m.losses, sizeof a.m.losses),
              "%s: rank %d: training losses (%d, %d steps) differ with uneven evaluations between them", name, g_rank, a.m.n_losses,
              b.m.n_losses);
        CHECK(a.n_params == b.n_params && !memcmp(a.params, b.params, sizeof(float) * (size_t)a.n_params),
              "%s: rank %d: final parameters differ with uneven evaluations", name, g_rank);
        CHECK(!memcmp(&a.val_loss, &b.val_loss, sizeof a.val_loss), "%s: rank %d: val_loss %.17g after uneven evaluations, %.17g "
              "without", name, g_rank, a.val_loss, b.val_loss);
        if (g_rank == 0)
            printf("%s np%d: rank 0 MiB of params resident (owned %.3f, full %.3f), uneven / even: after the sanity check %.3f / "
                   "%.3f, after the validation in fit %.3f / %.3f, after validate %.3f / %.3f, test %.3f / %.3f, predict %.3f / "
                   "%.3f; %d losses, %lld params and val_loss %.9g the same\n", name, g_world, shard / 1048576.0,
                   full / 1048576.0, a.m.held_at[0] / 1048576.0, b.m.held_at[0] / 1048576.0, a.m.held_at[1] / 1048576.0,
                   b.m.held_at[1] / 1048576.0, a.held_eval[0] / 1048576.0, b.held_eval[0] / 1048576.0,
                   a.held_eval[1] / 1048576.0, b.held_eval[1] / 1048576.0, a.held_eval[2] / 1048576.0,
                   b.held_eval[2] / 1048576.0, a.m.n_losses, (long long)a.n_params, a.val_loss);
    }
    volt_trainer_destroy(a.t);
    volt_trainer_destroy(b.t);
    free(a.params);
    free(b.params);
    volt_dataset_destroy(tds);
    volt_dataset_destroy(uds);
    volt_dataset_destroy(eds);
}

/* ---- load: a checkpoint load leaves each rank its shard (volt__strategy_release_unit) ---------- */
typedef struct probe {
    int64_t held_first;          /* held_param_bytes at the first batch's start (before its forward) */
    bool seen;
    const char *save;            /* saved here after the second training batch (step 2), mid-epoch */
} probe;
static volt_status probe_first(probe *p, volt_trainer *t) {
    if (!p->seen) p->held_first = held_params(t);
    p->seen = true;
    return VOLT_OK;
}
static volt_status pb_train(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { (void)b; (void)i; return probe_first(self, t); }
static volt_status pb_val(void *self, volt_trainer *t, const volt_batch *b, int64_t i) { (void)b; (void)i; return probe_first(self, t); }
static volt_status pb_train_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    probe *p = self;
    if (!p->save || i != 1) return VOLT_OK;
    volt_status st = volt_trainer_save_checkpoint(t, p->save);   /* collective */
    CHECK(st == VOLT_OK, "rank %d: save: %s", g_rank, volt_trainer_errmsg(t));
    return st;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LoadProbe",
                                             .on_train_batch_start = pb_train, .on_train_batch_end = pb_train_end,
                                             .on_validation_batch_start = pb_val };

static volt_trainer *load_trainer(const char *name, const char *root, int64_t steps, probe *p) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.strategy = name;
    c.max_steps = steps;
    c.num_sanity_val_steps = 0;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (t && p) CHECK_OK(volt_trainer_add_callback(t, &probe_ops, p));
    return t;
}
/* every unit gathered (collective), f32 */
static float *all_params(volt_trainer *t, int64_t *n) {
    volt_params *ps = volt_trainer_params(t);
    *n = 0;
    for (int u = 0; ps && u < volt_params_unit_count(ps); u++) *n += volt_unit_numel(volt_params_unit_at(ps, u));
    float *v = calloc((size_t)*n + 1, sizeof(float));
    CHECK(v != NULL, "out of memory");
    for (int64_t u = 0, off = 0; ps && v && u < volt_params_unit_count(ps); u++) {
        CHECK_OK(volt__strategy_gather_unit(t->strategy, (int)u, v + off));
        off += volt_unit_numel(volt_params_unit_at(ps, (int)u));
    }
    return v;
}

/*   mpirun -np N test_mpi_hold load S      S = fsdp or fsdp_shard_grad_op
 * A fits 2 steps and saves; D fits NB steps and saves after step 2. A fresh trainer's
 * validate(A's file) and a fresh trainer's fit resumed from D's (to NB steps) each start their first batch with no more than this rank's shard
 * resident (+ the edge pages; before the change: the whole model, every unit written whole by
 * the load); the validate's val_loss is bitwise A's on the same weights, and the resumed fit's
 * final parameters are bitwise those of an uninterrupted NB-step fit (the units given back are
 * gathered from the owners' slices, which hold the file's values). */
static void check_load(const char *name) {
    char root[512], path[600], mid[600];
    snprintf(root, sizeof root, "%s/load_%s_np%d", vtest_tmpdir(), name, g_world);
    snprintf(path, sizeof path, "%s/after2.safetensors", root);
    snprintf(mid, sizeof mid, "%s/mid.safetensors", root);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *tds = rows(NB, 0), *eds = rows(2, 2);
    volt_loader *tl = vtest_loader(tds, BS, false), *el = vtest_loader(eds, BS, false);
    hmlp ma = { 0 }, mb = { 0 }, mc = { 0 }, md = { 0 };
    probe pb = { 0 }, pc = { 0 }, pd = { .save = mid };
    volt_trainer *a = load_trainer(name, root, 2, NULL), *b = load_trainer(name, root, NB, &pb);
    volt_trainer *c = load_trainer(name, root, NB, &pc), *d = load_trainer(name, root, NB, &pd);
    double va = NAN, vb = NAN;
    float *pcv = NULL, *pdv = NULL;
    int64_t nc = 0, nd = 0;
    if (!(tl && el && a && b && c && d)) goto out;
    /* A: 2 steps, saved, then validated on the weights it holds */
    volt_status st = volt_trainer_fit(a, &h_ops, &ma, tl, NULL, NULL);
    CHECK(st == VOLT_OK, "%s: rank %d: fit: %s", name, g_rank, volt_trainer_errmsg(a));
    st = st < 0 ? st : volt_trainer_save_checkpoint(a, path);
    CHECK(st == VOLT_OK, "%s: rank %d: save: %s", name, g_rank, volt_trainer_errmsg(a));
    st = st < 0 ? st : volt_trainer_validate(a, &h_ops, &ma, el, NULL);
    CHECK(st == VOLT_OK && volt_trainer_metric(a, "val_loss", &va), "%s: rank %d: validate: %s", name, g_rank, volt_trainer_errmsg(a));
    if (st < 0) goto out;
    if (g_rank == 0) {
        volt_comm *cm = volt__dist_comm(a->strategy);
        if (cm && cm->dev) printf("comm %s on device %s\n", cm->ops->name, cm->dev->be->name);
    }
    /* B: a fresh trainer validates the file */
    st = volt_trainer_validate(b, &h_ops, &mb, el, path);
    CHECK(st == VOLT_OK && volt_trainer_metric(b, "val_loss", &vb), "%s: rank %d: validate(ckpt): %s", name, g_rank,
          volt_trainer_errmsg(b));
    /* D: NB steps uninterrupted, saved after step 2 (mid-epoch); C: a fresh trainer resumes from there */
    st = volt_trainer_fit(d, &h_ops, &md, tl, NULL, NULL);
    CHECK(st == VOLT_OK, "%s: rank %d: fit: %s", name, g_rank, volt_trainer_errmsg(d));
    st = volt_trainer_fit(c, &h_ops, &mc, tl, NULL, mid);
    CHECK(st == VOLT_OK, "%s: rank %d: resumed fit: %s", name, g_rank, volt_trainer_errmsg(c));
    pcv = all_params(c, &nc);
    pdv = all_params(d, &nd);
    volt_params *ps = volt_trainer_params(b);
    if (!ps || !pcv || !pdv) goto out;
    const int U = volt_params_unit_count(ps);
    const char *eg = getenv("VOLT_TEST_MEM_GRANULE");   /* the simulated GPU's VMM granule (tests/gpu_sim_nccl.cmake) */
    const int64_t full = 4 * nc, shard = full / g_world;
    const int64_t slack = eg && atoll(eg) > 0 ? 2 * atoll(eg) * U : 4 * sysconf(_SC_PAGESIZE) * U;
    CHECK(pb.seen && pb.held_first <= shard + slack, "%s: rank %d: validate(ckpt): %lld bytes of params resident after the "
          "load, the owned slices %lld (+ %lld; the whole model %lld)", name, g_rank, (long long)pb.held_first,
          (long long)shard, (long long)slack, (long long)full);
    CHECK(pc.seen && pc.held_first <= shard + slack, "%s: rank %d: fit(ckpt): %lld bytes of params resident after the load, "
          "the owned slices %lld (+ %lld; the whole model %lld)", name, g_rank, (long long)pc.held_first, (long long)shard,
          (long long)slack, (long long)full);
    CHECK(!memcmp(&va, &vb, sizeof va), "%s: rank %d: val_loss %.17g from the loaded file, %.17g on the saved weights", name,
          g_rank, vb, va);
    CHECK(nc == nd && !memcmp(pcv, pdv, sizeof(float) * (size_t)nc), "%s: rank %d: the resumed fit's final parameters differ "
          "from the uninterrupted fit's", name, g_rank);
    if (g_rank == 0)
        printf("%s np%d load: rank 0 KiB of params resident after the load (owned %.1f, full %.1f): validate %.1f, resumed fit "
               "%.1f; val_loss %.9g both ways, %lld final params the same\n", name, g_world, shard / 1024.0, full / 1024.0,
               pb.held_first / 1024.0, pc.held_first / 1024.0, vb, (long long)nc);
out:
    free(pcv);
    free(pdv);
    volt_trainer_destroy(a);
    volt_trainer_destroy(b);
    volt_trainer_destroy(c);
    volt_trainer_destroy(d);
    volt_loader_destroy(tl);
    volt_loader_destroy(el);
    volt_dataset_destroy(tds);
    volt_dataset_destroy(eds);
}

/* ---- setup: set-up leaves each rank its shard (volt__dist_setup_units) -------------------------- */
typedef struct sprobe {
    int64_t fit_start, val_first, train_first;   /* held_param_bytes there (-1: not seen) */
    float loss0;                                   /* the first training loss (before any step) */
    bool have_loss;
} sprobe;
static volt_status sp_fit_start(void *self, volt_trainer *t) { ((sprobe *)self)->fit_start = held_params(t); return VOLT_OK; }
static volt_status sp_val(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    sprobe *p = self;
    if (p->val_first < 0) p->val_first = held_params(t);
    return VOLT_OK;
}
static volt_status sp_train(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    sprobe *p = self;
    if (p->train_first < 0) p->train_first = held_params(t);
    return VOLT_OK;
}
static volt_status sp_train_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    sprobe *p = self;
    double v = NAN;
    if (!p->have_loss && volt_trainer_metric(t, "train_loss", &v)) { p->loss0 = (float)v; p->have_loss = true; }
    return VOLT_OK;
}
static const volt_callback_ops sprobe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SetupProbe",
                                              .on_fit_start = sp_fit_start, .on_validation_batch_start = sp_val,
                                              .on_train_batch_start = sp_train, .on_train_batch_end = sp_train_end };

/* A fresh trainer's validate (no fit, no checkpoint): its first batch's start, and a fresh fit
 * with a sanity check: on_fit_start, the sanity check's first batch and the first training
 * batch's start; per rank no more than its shard resident (+ the edge pages; before: the whole
 * model, every unit broadcast whole from rank 0 and kept until the first step). */
static void setup_run(const char *name, const char *root, bool fit, volt_loader *tl, volt_loader *el, sprobe *p,
                      double *val_loss, int64_t *n_params) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.strategy = name;
    c.max_steps = 1;
    c.num_sanity_val_steps = 2;
    hmlp m = { 0 };
    volt_trainer *t = NULL;
    *p = (sprobe){ .fit_start = -1, .val_first = -1, .train_first = -1 };
    CHECK_OK(volt_trainer_create(&c, &t));
    if (!t) return;
    CHECK_OK(volt_trainer_add_callback(t, &sprobe_ops, p));
    volt_status st = fit ? volt_trainer_fit(t, &h_ops, &m, tl, el, NULL) : volt_trainer_validate(t, &h_ops, &m, el, NULL);
    CHECK(st == VOLT_OK, "%s: rank %d: %s: %s", name, g_rank, fit ? "fit" : "validate", volt_trainer_errmsg(t));
    if (st == VOLT_OK && !fit)
        CHECK(volt_trainer_metric(t, "val_loss", val_loss), "%s: rank %d: no val_loss", name, g_rank);
    if (st == VOLT_OK && g_rank == 0 && !fit) {
        volt_comm *cm = volt__dist_comm(t->strategy);
        if (cm && cm->dev) printf("comm %s on device %s\n", cm->ops->name, cm->dev->be->name);
    }
    volt_params *ps = volt_trainer_params(t);
    *n_params = 0;
    for (int u = 0; ps && u < volt_params_unit_count(ps); u++) *n_params += volt_unit_numel(volt_params_unit_at(ps, u));
    volt_trainer_destroy(t);
}

/*   mpirun -np N test_mpi_hold setup S      S = fsdp or fsdp_shard_grad_op
 * The resident bounds above, and the same bits as ddp, whose ranks keep rank 0's values whole:
 * the fresh validate's val_loss and the first training loss (before any step). */
static void check_setup(const char *name) {
    char root[512];
    snprintf(root, sizeof root, "%s/setup_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *tds = rows(NB, 0), *eds = rows(2, 2);
    volt_loader *tl = vtest_loader(tds, BS, false), *el = vtest_loader(eds, BS, false);
    if (tl && el) {
        sprobe v, f, vr, fr;
        double vl = NAN, vlr = NAN, unused = NAN;
        int64_t n = 0, nr = 0;
        setup_run(name, root, false, tl, el, &v, &vl, &n);
        setup_run(name, root, true, tl, el, &f, &unused, &n);
        setup_run("ddp", root, false, tl, el, &vr, &vlr, &nr);
        setup_run("ddp", root, true, tl, el, &fr, &unused, &nr);
        const char *eg = getenv("VOLT_TEST_MEM_GRANULE");   /* the simulated GPU's VMM granule (tests/gpu_sim_nccl.cmake) */
        const int64_t U = 3, full = 4 * n, shard = full / g_world;
        const int64_t slack = eg && atoll(eg) > 0 ? 2 * atoll(eg) * U : 4 * sysconf(_SC_PAGESIZE) * U;
        const int64_t big = 4 * (g_w * g_w + g_w) * (g_world - 1) / g_world;   /* l0's (l1's) part outside a slice */
        const struct { const char *what; int64_t held; } at[3] = {
            { "a fresh validate's first batch", v.val_first }, { "on_fit_start", f.fit_start },
            { "the sanity check's first batch", f.val_first } };
        for (int k = 0; k < 3; k++)
            CHECK(at[k].held >= 0 && at[k].held <= shard + slack, "%s: rank %d: at %s %lld bytes of params resident after "
                  "set-up, the owned slices %lld (+ %lld; the whole model %lld)", name, g_rank, at[k].what,
                  (long long)at[k].held, (long long)shard, (long long)slack, (long long)full);
        /* FULL_SHARD: the sanity check (even) leaves at most the last unit it used gathered;
         * SHARD_GRAD_OP keeps every unit its forwards gathered until the first step, by design */
        if (!strcmp(name, "fsdp"))
            CHECK(f.train_first >= 0 && f.train_first <= shard + big + slack, "%s: rank %d: at the first training batch %lld "
                  "bytes of params resident, the owned slices %lld + one unit's part outside them %lld (+ %lld; the whole model %lld)", name, g_rank,
                  (long long)f.train_first, (long long)shard, (long long)big, (long long)slack, (long long)full);
        CHECK(!memcmp(&vl, &vlr, sizeof vl), "%s: rank %d: a fresh validate's val_loss %.17g, ddp's %.17g", name, g_rank, vl, vlr);
        CHECK(f.have_loss && fr.have_loss && !memcmp(&f.loss0, &fr.loss0, sizeof f.loss0), "%s: rank %d: the first training "
              "loss %.9g, ddp's %.9g", name, g_rank, f.loss0, fr.loss0);
        if (g_rank == 0)
            printf("%s np%d setup: rank 0 KiB of params resident (owned %.1f, full %.1f; ddp %.1f): fresh validate %.1f, "
                   "on_fit_start %.1f, sanity check %.1f, first training batch %.1f; val_loss %.9g and first loss %.9g as ddp's\n",
                   name, g_world, shard / 1024.0, full / 1024.0, vr.val_first / 1024.0, v.val_first / 1024.0,
                   f.fit_start / 1024.0, f.val_first / 1024.0, f.train_first / 1024.0, vl, f.loss0);
    }
    volt_loader_destroy(tl);
    volt_loader_destroy(el);
    volt_dataset_destroy(tds);
    volt_dataset_destroy(eds);
}

#endif /* VOLT_HAVE_MPI */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifndef VOLT_HAVE_MPI
    (void)argc;
    (void)argv;
    VTEST_SKIP("built without MPI (apt-get install libopenmpi-dev openmpi-bin)");
#else
    if (argc < 3 || (strcmp(argv[1], "hold") && strcmp(argv[1], "load") && strcmp(argv[1], "setup"))) {
        fprintf(stderr, "usage: mpirun -np N test_mpi_hold hold|load|setup fsdp|fsdp_shard_grad_op\n");
        return 2;
    }
    const int skip = vtest_mpi_start(&argc, &argv, &g_rank, &g_world);
    if (skip) return skip;
    if (!strcmp(argv[1], "load")) check_load(argv[2]);
    else if (!strcmp(argv[1], "setup")) check_setup(argv[2]);
    else check_hold(argv[2]);
    return vtest_mpi_finish();
#endif
}
