/* Strategies: distributed parity with `single`, memory report formulas, comm-backend
 * collectives, overlap and hook order, faults (timeouts instead of hangs), resharding
 * checkpoints.
 *
 *   test_strategies                         local checks (no MPI): unit padding, bad names
 *   mpirun -np N test_strategies comm       comm backend collectives (in place, avg, f64, timeouts)
 *   mpirun -np N test_strategies parity S   S in ddp, zero1, zero2, fsdp, fsdp_shard_grad_op
 *   mpirun -np N test_strategies reduce16 S S with strategy_reduce_dtype bf16 vs fp32: close, not equal
 *   mpirun -np N test_strategies fault S [B] rank 1 leaves (before any collective, or at batch B):
 *                                           the others get VOLT_ERR_TIMEOUT
 *   mpirun -np N test_strategies fault_exit rank 1 dies mid-fit (the job must end, not hang)
 *   mpirun -np N test_strategies reshard_save S PATH     fit, save mid-epoch at step 3, stop
 *   [mpirun -np N] test_strategies reshard_resume S PATH resume, finish, compare with single
 *   mpirun -np N test_strategies zero_ckpt S    S in zero1, zero2: a checkpoint saved right after a
 *                                           step, with the all-gathers still in flight
 *
 * The reference `single` run is computed inside each rank's process (no MPI) on the global
 * batch; the distributed run gets each rank's shard through the loader. */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "trainer/trainer_internal.h"
#include "ref_mlp.h"
#include "strategies/comm/comm.h"
#include "core/device.h"
#include "core/safetensors_internal.h"   /* volt__st_deferred_read_bytes; cJSON */
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"
#include "strategies/parallel/parallel.h"
#endif

/* ---- the model: an MLP with odd sizes ---------------------------------------------------------- */
enum { IN = 11, H1 = 37, H2 = 53, NC = 5, GB = 12 /* global batch */, ACC = 2, STEPS = 5 };
enum { NS = GB * ACC * STEPS, MAX_LOSSES = 64 };
enum { NPARAM = H1 * IN + H1 + H2 * H1 + H2 + NC * H2 + NC };

typedef struct {
    volt_tensor *w1, *b1, *w2, *b2, *w3, *b3;
    float losses[MAX_LOSSES];
    int n_losses;
    /* each micro-step's batch as this rank saw it (rows of x, y), for the double reference */
    float xr[MAX_LOSSES][GB * IN];
    int64_t yr[MAX_LOSSES][GB];
    int rows;
    float *theta0;   /* non-NULL (single only): the initial parameters, copied at the first step */
} mlp;

static bool g_freeze;   /* fc2.bias frozen, fc1.weight until the third window (test_freeze_dist) */

static volt_status mlp_setup(void *self, volt_params *ps) {
    mlp *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(H1, IN), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(H1), VOLT_INIT_UNIFORM(-0.1f, 0.1f), &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(H2, H1), VOLT_INIT_TORCH_LINEAR, &m->w2));
    VOLT_TRY(volt_param_new(ps, "fc2.bias", VOLT_SHAPE(H2), VOLT_INIT_UNIFORM(-0.1f, 0.1f), &m->b2));
    VOLT_TRY(volt_params_unit(ps, "fc3"));
    VOLT_TRY(volt_param_new(ps, "fc3.weight", VOLT_SHAPE(NC, H2), VOLT_INIT_TORCH_LINEAR, &m->w3));
    VOLT_TRY(volt_param_new(ps, "fc3.bias", VOLT_SHAPE(NC), VOLT_INIT_ZEROS, &m->b3));
    if (g_freeze) {   /* set up frozen, as a module freezing its backbone before fit */
        volt_param_set_requires_grad(m->w1, false);
        volt_param_set_requires_grad(m->b2, false);
    }
    return VOLT_OK;
}

static volt_tensor *mlp_fwd(mlp *m, volt_step *s, const volt_batch *b) {
    volt_tensor *h = volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    h = volt_relu(s, volt_linear(s, h, m->w2, m->b2));
    return volt_linear(s, h, m->w3, m->b3);
}

static volt_status mlp_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    mlp *m = self;
    if (m->n_losses < MAX_LOSSES && b->size <= GB) {
        m->rows = (int)b->size;
        volt_tensor_to_host(volt_batch_x(b), m->xr[m->n_losses]);
        volt_tensor_to_host(volt_batch_y(b), m->yr[m->n_losses]);
    }
    if (m->theta0 && m->n_losses == 0) {
        float *d = m->theta0;
        volt_tensor *ps[6] = { m->w1, m->b1, m->w2, m->b2, m->w3, m->b3 };
        for (int k = 0; k < 6; k++) {
            /* 16-bit storage (bf16-true) reads back as f32 */
            vtest_f32(ps[k], d);
            d += volt_tensor_numel(ps[k]);
        }
    }
    volt_tensor *loss = volt_cross_entropy(s, mlp_fwd(m, s, b), volt_batch_y(b));
    if (loss && m->n_losses < MAX_LOSSES) m->losses[m->n_losses++] = (float)volt_tensor_item(loss);
    VOLT_TRY(volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_SYNC));
    return volt_step_set_loss(s, loss);
}

static volt_status mlp_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return volt_log(s, "val_loss", volt_cross_entropy(s, mlp_fwd(self, s, b), volt_batch_y(b)), VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}

static bool g_groups;   /* mlp_opt adds parameter groups (test_groups_dist) */
static bool g_ema;      /* make_trainer adds EMA weight averaging (test_ema_dist) */
static int g_max_steps; /* make_trainer's max_steps when set, else STEPS */
static bool g_backbone; /* make_trainer adds BackboneFinetuning (fc1.*, from epoch 1) over 3 epochs (test_backbone_dist) */

static volt_status mlp_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    o->optimizer.weight_decay = 0.01f;
    if (g_groups) {   /* biases: lr x3, no decay; fc3.weight: decay x10 */
        o->optimizer.n_groups = 2;
        o->optimizer.groups[0] = (volt_optim_group){ .params = "*.bias", .lr = 3e-2f, .weight_decay = 0.f };
        o->optimizer.groups[1] = (volt_optim_group){ .params = "fc3.weight", .lr = NAN, .weight_decay = 0.1f };
    }
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_LINEAR;
    o->scheduler.warmup_steps = 2;
    o->scheduler.total_steps = 20;
    return VOLT_OK;
}

/* g_freeze: fc1.weight thaws at the third window's first micro-step (Lightning's BackboneFinetuning
 * unfreezes from a hook between steps the same way) */
static volt_status mlp_thaw(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)t; (void)b;
    if (g_freeze && i == 2 * ACC) volt_param_set_requires_grad(((mlp *)self)->w1, true);
    return VOLT_OK;
}

static const volt_module_ops mlp_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = mlp_setup, .configure_optimizers = mlp_opt,
    .training_step = mlp_train, .validation_step = mlp_val, .on_train_batch_start = mlp_thaw,
};

/* ---- data ------------------------------------------------------------------------------------------ */
static float X[NS * IN];
static int64_t Y[NS];

static volt_dataset *make_data(void) {
    for (int i = 0; i < NS; i++) {
        Y[i] = (i * 7 + i / 5) % NC;
        for (int k = 0; k < IN; k++) X[i * IN + k] = sinf(0.37f * (float)(i * IN + k)) + (k % NC == Y[i] ? 0.8f : 0.f);
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { X, Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &ds));
    return ds;
}

static volt_loader *make_loader_ex(volt_dataset *ds, int64_t bs, bool shuffle) { return vtest_loader(ds, bs, shuffle); }
static volt_loader *make_loader(volt_dataset *ds, int64_t bs) { return make_loader_ex(ds, bs, true); }

static const char *g_precision = "32-true";
static const char *g_reduce_dtype;   /* NULL: the default (fp32) */

static volt_trainer *make_trainer(const char *strategy, const char *root) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.precision = g_precision;
    c.max_epochs = g_backbone ? 3 : 1;
    c.max_steps = g_backbone ? -1 : g_max_steps ? g_max_steps : STEPS;
    c.accumulate_grad_batches = ACC;
    c.gradient_clip_val = 0.05f;        /* small: clipping is active every step */
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = root;
    c.strategy = strategy;
    if (g_reduce_dtype) c.strategy_reduce_dtype = g_reduce_dtype;
    c.seed = 7;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", strategy, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) { volt_trainer_destroy(t); return NULL; }
    if (g_ema) {
        volt_weight_averaging_config wc;
        volt_weight_averaging_config_init(&wc);
        wc.decay = 0.7f;
        CHECK_OK(volt_add_weight_averaging(t, &wc));
    }
    if (g_backbone) {
        volt_backbone_finetuning_config bc;
        volt_backbone_finetuning_config_init(&bc);
        bc.backbone = "fc1.*";
        bc.unfreeze_backbone_at_epoch = 1;
        CHECK_OK(volt_add_backbone_finetuning(t, &bc));
    }
    return t;
}

/* Uninterrupted single run on the global batch; params copied to ref (numel floats). */
static int64_t total_numel(volt_params *ps) { return volt_params_numel(ps); }

static void copy_params(volt_params *ps, float *dst) {   /* as f32 whatever the storage */
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        vtest_f32(p, dst);
        dst += volt_tensor_numel(p);
    }
}

typedef struct {
    float *params; int64_t n; float losses[MAX_LOSSES]; int n_losses; double train_loss, val_loss;
    float theta0[NPARAM];   /* the initial parameters (the same on every rank: same seed) */
    float xr[MAX_LOSSES][GB * IN];   /* the micro-batches single saw */
    int64_t yr[MAX_LOSSES][GB];
} ref_run;

static void run_single(volt_dataset *ds, ref_run *r) {
    memset(r, 0, sizeof *r);
    static mlp m;
    memset(&m, 0, sizeof m);
    m.theta0 = r->theta0;
    volt_trainer *t = make_trainer("single", vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB), *vl = make_loader_ex(ds, GB, false);
    if (!t || !l) return;
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL);
    CHECK(st == VOLT_OK, "single fit: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_metric(t, "train_loss", &r->train_loss) && volt_trainer_metric(t, "val_loss", &r->val_loss),
          "single: metrics");
    volt_loader_destroy(vl);
    r->n = total_numel(volt_trainer_params(t));
    r->params = malloc(sizeof(float) * (size_t)r->n);
    copy_params(volt_trainer_params(t), r->params);
    memcpy(r->losses, m.losses, sizeof m.losses);
    r->n_losses = m.n_losses;
    memcpy(r->xr, m.xr, sizeof m.xr);
    memcpy(r->yr, m.yr, sizeof m.yr);
    CHECK(m.rows == GB, "single: %d rows per micro-batch", m.rows);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* Elementwise |a-b| <= RTOL*|b| + ATOL, as the fraction of that tolerance used (<= 1 passes).
 * ATOL is 1e-6 of the weights' scale (~0.1) and only matters for weights near 0, where one
 * rounding of the Adam update is all the difference there is. */
#define RTOL 1e-5
#define ATOL 1e-7
static double tol_used(const float *a, const float *b, int64_t n, double *max_rel_big) {
    double worst = 0, rel = 0;
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]), e = d / (RTOL * fabs((double)b[i]) + ATOL);
        if (!(e <= worst)) { worst = e; wi = i; }   /* NaN propagates */
        if (fabs((double)b[i]) >= 1e-3 && !(d / fabs((double)b[i]) <= rel)) rel = d / fabs((double)b[i]);
    }
    if (getenv("VOLT_TEST_DEBUG")) fprintf(stderr, "worst at %lld: %.9g vs %.9g\n", (long long)wi, a[wi], b[wi]);
    if (max_rel_big) *max_rel_big = rel;
    return worst;
}

/* ---- the independent reference (tests/ref_mlp.h) -------------------------------------------------
 * The whole run (STEPS AdamW steps of ACC micro-steps, clipping, schedule) recomputed in double
 * from theta0 and the micro-batches the run saw (xs[j], ys[j]: GB rows each), against the
 * run's final params and per-micro-step global losses. A kernel, optimizer, clipping or
 * schedule bug that `single` shares with the strategies cannot hide here. f32 vs double over
 * 5 steps: ~1e-8 in practice; the tolerance is 1e-5 relative + 1e-7 absolute, as for parity. */
static double check_vs_reference(const char *who, const float *theta0, const float *params, const float *losses,
                                 const float (*xs)[GB * IN], const int64_t (*ys)[GB], bool quiet) {
    const ref_mlp_cfg c = { .in = IN, .h1 = H1, .h2 = H2, .nc = NC, .rows = GB, .acc = ACC, .steps = STEPS,
                            .lr = 1e-2f, .wd = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                            .clip = 0.05f, .warmup = 2, .total = 20 };
    CHECK(ref_mlp_numel(&c) == NPARAM, "reference size");
    double *th = malloc(sizeof(double) * NPARAM), rl[ACC * STEPS];
    const float *xp[ACC * STEPS];
    const int64_t *yp[ACC * STEPS];
    for (int j = 0; j < ACC * STEPS; j++) { xp[j] = xs[j]; yp[j] = ys[j]; }
    for (int k = 0; k < NPARAM; k++) th[k] = theta0[k];
    ref_mlp_train(&c, th, xp, yp, rl);
    double worst = 0, worst_loss = 0;
    int wi = 0;
    for (int k = 0; k < NPARAM; k++) {
        const double e = fabs(params[k] - th[k]) / (1e-5 * fabs(th[k]) + 1e-7);
        if (!(e <= worst)) { worst = e; wi = k; }
    }
    for (int j = 0; j < ACC * STEPS; j++) {
        const double e = fabs(losses[j] - rl[j]) / fabs(rl[j]);
        if (!(e <= worst_loss)) worst_loss = e;
    }
    CHECK(worst <= 1, "%s: params differ from the double reference: %.3g of the 1e-5 rel + 1e-7 abs tolerance at [%d]: "
          "%.9g vs %.9g", who, worst, wi, params[wi], th[wi]);
    CHECK(worst_loss <= 1e-5, "%s: losses differ from the double reference by %.3g relative", who, worst_loss);
    if (!quiet) printf("reference %-18s vs double-precision MLP/AdamW/clipping: loss rel err %.2e; params %.1f%% of the tolerance\n",
           who, worst_loss, 100 * worst);
    free(th);
    return worst;
}

/* single against the reference: no MPI needed */
static void test_single_reference(volt_dataset *ds) {
    static ref_run r;
    run_single(ds, &r);
    if (!r.params) return;
    check_vs_reference("single", r.theta0, r.params, r.losses, (const float (*)[GB * IN])r.xr,
                       (const int64_t (*)[GB])r.yr, false);
    free(r.params);
}

/* ---- local checks (no MPI) ----------------------------------------------------------------------- */
static void test_unit_padding(void) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    for (int w = 1; w <= 5; w++) {
        volt_params *ps = NULL;
        CHECK_OK(volt_params_create(&pc, &ps));
        mlp m = { 0 };
        CHECK_OK(volt_params_set_unit_padding(ps, w));
        CHECK_OK(mlp_setup(&m, ps));
        CHECK(volt_params_set_unit_padding(ps, 0) == VOLT_ERR_INVALID_ARG, "multiple 0 rejected");
        CHECK_OK(volt_params_finalize(ps));
        CHECK(volt_params_set_unit_padding(ps, 2) == VOLT_ERR_STATE, "padding after finalize rejected");
        int64_t padded = 0;
        for (int u = 0; u < volt_params_unit_count(ps); u++) {
            volt_unit *un = volt_params_unit_at(ps, u);
            int64_t n = volt_unit_numel(un), plain = 0;
            for (int i = 0; i < volt_unit_param_count(un); i++)
                plain += (volt_tensor_numel(volt_unit_param(un, i)) + 15) / 16 * 16;
            CHECK(n % (16 * w) == 0 && n >= plain && n - plain < 16 * w, "unit %d: %lld floats for %lld at w=%d",
                  u, (long long)n, (long long)plain, w);
            float *hv = malloc(sizeof(float) * (size_t)n), *hg = malloc(sizeof(float) * (size_t)n);
            volt__dev_d2h(ps->dev, hv, volt_unit_data(un), sizeof(float) * (size_t)n);   /* device memory: copies */
            volt__dev_d2h(ps->dev, hg, volt_unit_grad(un), sizeof(float) * (size_t)n);
            for (int64_t k = plain; k < n; k++)
                CHECK(hv[k] == 0.f && hg[k] == 0.f, "padding is zero");
            free(hv);
            free(hg);
            padded += n;
        }
        /* offsets do not move: fc1.bias right after fc1.weight rounded to 16 */
        CHECK(volt_param_offset(m.b1) == (H1 * IN + 15) / 16 * 16, "bias offset %lld", (long long)volt_param_offset(m.b1));
        volt_optimizer_config oc;
        volt_optimizer_config_init(&oc);
        volt_optimizer *opt = NULL;
        CHECK_OK(volt_optimizer_create(&oc, ps, &opt));
        int64_t lo, hi;
        CHECK_OK(volt_optimizer_range(opt, 1, &lo, &hi));
        CHECK(lo == 0 && hi == volt_unit_numel(volt_params_unit_at(ps, 1)), "optimizer covers the padded unit");
        volt_optimizer_destroy(opt);
        CHECK(padded - volt_params_numel(ps) < 3 * 16 + 3 * 16 * w, "padding bounded");
        volt_params_destroy(ps);
    }
}

static void test_bad_name(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.strategy = "dpp";
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    const char *m = t ? volt_trainer_errmsg(t) : "";
    CHECK(st == VOLT_ERR_UNSUPPORTED, "bad strategy name: %s", volt_status_str(st));
    const char *names[] = { "'dpp'", "single", "ddp", "deepspeed_stage_1", "zero1", "deepspeed_stage_2", "zero2",
                            "fsdp", "fsdp_shard_grad_op" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(strstr(m, names[i]) != NULL, "message names %s: %s", names[i], m);
    volt_trainer_destroy(t);
    /* single on more than one device is refused with the distributed names */
    volt_trainer_config_init(&c);
    c.strategy = "single";   /* the default, "auto", is ddp at devices 2 */
    c.devices = 2;
    st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "ddp"), "single with devices=2: %s",
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
#ifndef VOLT_HAVE_MPI
    volt_trainer_config_init(&c);
    c.strategy = "fsdp";
    c.accelerator = "cpu";
    st = volt_trainer_create(&c, &t);
    /* without NCCL the rows have no ops; with it (cuda only) the cpu finds no comm */
    CHECK(st == VOLT_ERR_UNSUPPORTED && (strstr(volt_trainer_errmsg(t), "need MPI") || strstr(volt_trainer_errmsg(t), "built without MPI")),
          "fsdp without MPI: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
#endif
}

/* The registry: every name and alias finds its row, the help text lists them all, the flags
 * are consistent, "single" has no ops at all (every default lives in strategy.c), and the
 * comm registry knows mpi as a host-buffer backend. */
static void test_registry(void) {
    const char *help = volt__strategy_names();
    CHECK(volt__strategy_count() >= 6, "rows: %d", volt__strategy_count());
    for (int i = 0; i < volt__strategy_count(); i++) {
        const volt_strategy_row *r = volt__strategy_at(i);
        CHECK(volt__strategy_find(r->name) == r && strstr(help, r->name), "row '%s' found and listed (%s)", r->name, help);
        CHECK(r->description && r->description[0], "row '%s' has a description", r->name);
        for (int a = 0; r->aliases[a]; a++)
            CHECK(volt__strategy_find(r->aliases[a]) == r && strstr(help, r->aliases[a]),
                  "alias '%s' of '%s'", r->aliases[a], r->name);
        const unsigned f = r->flags;
        CHECK(!(f & VOLT_STRAT_SHARDS_GRADS) || (f & VOLT_STRAT_SHARDS_OPTIM), "%s: shards_grads implies shards_optim", r->name);
        CHECK(!(f & VOLT_STRAT_SHARDS_PARAMS) || (f & VOLT_STRAT_SHARDS_GRADS), "%s: shards_params implies shards_grads", r->name);
        CHECK(!(f & VOLT_STRAT_FREES_AFTER_FORWARD) || (f & VOLT_STRAT_SHARDS_PARAMS), "%s: frees_after_forward implies shards_params", r->name);
        CHECK((f & VOLT_STRAT_MULTI_PROCESS) || f == 0, "%s: one process shards nothing", r->name);
#if defined(VOLT_HAVE_MPI) || defined(VOLT_HAVE_NCCL)
        CHECK(r->ops != NULL, "%s: built in", r->name);
#else
        CHECK((r->ops != NULL) == !(f & VOLT_STRAT_MULTI_PROCESS), "%s: multi-process rows need MPI", r->name);
#endif
    }
    CHECK(volt__strategy_find("dpp") == NULL && volt__strategy_find("auto") == NULL, "find");
    /* "auto" (Lightning's default word): ddp when the job has several processes, else single */
    char *launched = getenv("OMPI_COMM_WORLD_SIZE") ? strdup(getenv("OMPI_COMM_WORLD_SIZE")) : NULL;
    char *pmi = getenv("PMI_SIZE") ? strdup(getenv("PMI_SIZE")) : NULL;
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    CHECK(!strcmp(volt__strategy_resolve("auto", 1, 1), "single") && !strcmp(volt__strategy_resolve("auto", 2, 1), "ddp") &&
          !strcmp(volt__strategy_resolve("auto", 1, 2), "ddp") && !strcmp(volt__strategy_resolve("fsdp", 1, 1), "fsdp") &&
          volt__strategy_resolve(NULL, 2, 1) == NULL, "auto resolves by devices and nodes");
    if (!getenv("PMIX_RANK") && !getenv("SLURM_STEP_NUM_TASKS")) {   /* srun --mpi=pmix: a Slurm step's tasks */
        setenv("SLURM_STEP_NUM_TASKS", "4", 1);
        CHECK(!strcmp(volt__strategy_resolve("auto", 1, 1), "single"), "auto: a Slurm count without a PMIx task");
        setenv("PMIX_RANK", "0", 1);
        CHECK(!strcmp(volt__strategy_resolve("auto", 1, 1), "ddp") && volt__comm_launched_size() == 4,
              "auto under srun --mpi=pmix's 4 tasks");
        unsetenv("PMIX_RANK");
        unsetenv("SLURM_STEP_NUM_TASKS");
    }
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    CHECK(!strcmp(volt__strategy_resolve("auto", 1, 1), "ddp"), "auto under a launcher's 3 processes");
    if (launched) setenv("OMPI_COMM_WORLD_SIZE", launched, 1); else unsetenv("OMPI_COMM_WORLD_SIZE");
    if (pmi) setenv("PMI_SIZE", pmi, 1);
    free(launched);
    free(pmi);
    CHECK(!strncmp(help, "auto, single", 12) && !strncmp(volt__strategy_choices(), "auto|single", 11), "auto listed first: %s", help);
    const volt_strategy_row *single = volt__strategy_find("single");
    volt_strategy_ops none;
    memset(&none, 0, sizeof none);
    none.version = VOLT_STRATEGY_OPS_VERSION;
    CHECK(single && !memcmp(single->ops, &none, sizeof none), "single: every op NULL (the defaults), no stubs");
    /* the apps' --help and their parse read the same rows: the choices name every row and alias */
    const char *choices = volt__strategy_choices();
    for (int i = 0; i < volt__strategy_count(); i++) {
        const volt_strategy_row *r = volt__strategy_at(i);
        CHECK(strstr(choices, r->name) != NULL, "choices '%s' lack '%s'", choices, r->name);
        for (int a = 0; r->aliases[a]; a++) CHECK(strstr(choices, r->aliases[a]) != NULL, "choices '%s' lack '%s'", choices, r->aliases[a]);
    }
    volt_cli_config cc = { .version = VOLT_CLI_CONFIG_VERSION, .prog = "t" };
    volt_cli *cli = NULL;
    CHECK_OK(volt_cli_create(&cc, &cli));
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    if (cli && f) volt_cli_print_help(cli, f);
    if (f) fclose(f);
    CHECK(txt && strstr(txt, choices), "--help lists the registry's strategies (%s)", choices);
    free(txt);
    volt_cli_destroy(cli);
    const volt_comm_row *mpi = volt__comm_backend_find("mpi");
    CHECK(mpi && mpi->host_buffers && volt__comm_backend_count() >= 1, "comm registry: mpi takes host buffers");
}

static void test_single_memory(volt_dataset *ds) {
    mlp m = { 0 };
    volt_trainer *t = make_trainer("single", vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB);
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    volt_memory_report r;
    volt__strategy_memory_report(t->strategy, &r);
    const int64_t P = r.padded_numel;
    CHECK(r.numel == volt_params_numel(volt_trainer_params(t)), "numel");
    CHECK(r.param_bytes == 4 * P && r.grad_bytes == 4 * P && r.optim_bytes == 8 * P, "single: 16Ψ");
    const char *acc = getenv("VOLT_ACCELERATOR");   /* strict variants: really on cpu-strict */
    volt_device *dev = volt_trainer_params(t)->dev;
    if (acc && *acc) CHECK(!strcmp(dev->be->name, acc), "single: device '%s', asked '%s'", dev->be->name, acc);
    printf("device %s\n", dev->be->name);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

#ifdef VOLT_HAVE_MPI
static int g_rank, g_world;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* every rank has the same value */
static bool same_everywhere(uint64_t v) {
    uint64_t *all = malloc(sizeof(uint64_t) * (size_t)g_world);
    MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    bool ok = true;
    for (int r = 0; r < g_world; r++) ok &= all[r] == v;
    free(all);
    return ok;
}

/* ---- comm backend ------------------------------------------------------------------------------ */
static void test_comm(void) {
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = 30;
    volt_comm *c = NULL;
    char err[512] = "";
    volt_status st = volt__comm_mpi_create(&cc, &c, err, sizeof err);
    CHECK(st == VOLT_OK, "comm create: %s", err);
    if (!c) return;
    const int R = c->rank, W = c->world;
    CHECK(R == g_rank && W == g_world, "rank/world");
    enum { K = 7 };   /* odd chunk */
    float buf[K * 8], sum[K * 8];
    /* all_reduce avg, in place; and out of place sum */
    for (int i = 0; i < K * W; i++) buf[i] = (float)(R + 1) * (float)(i + 1);
    CHECK_OK(volt__comm_all_reduce(c, buf, buf, (size_t)(K * W), VOLT_COMM_F32, VOLT_COMM_AVG, "t1"));
    const float tri = (float)(W * (W + 1) / 2);
    for (int i = 0; i < K * W; i++) CHECK_CLOSE(buf[i], tri / W * (i + 1), 1e-6, 0);
    for (int i = 0; i < K * W; i++) buf[i] = (float)(R + 1);
    CHECK_OK(volt__comm_all_reduce(c, buf, sum, (size_t)(K * W), VOLT_COMM_F32, VOLT_COMM_SUM, "t2"));
    CHECK(sum[0] == tri && sum[K * W - 1] == tri, "out-of-place sum");
    /* reduce_scatter in place: chunk R lands at buf + R*K */
    for (int i = 0; i < K * W; i++) buf[i] = (float)(R + 1) * (float)i;
    CHECK_OK(volt__comm_reduce_scatter(c, buf, buf + R * K, K, VOLT_COMM_F32, VOLT_COMM_AVG, "t3"));
    for (int i = 0; i < K; i++) CHECK_CLOSE(buf[R * K + i], tri / W * (R * K + i), 1e-6, 0);
    /* ... and out of place */
    for (int i = 0; i < K * W; i++) buf[i] = (float)(R + 1) * (float)i;
    float chunk[K];
    CHECK_OK(volt__comm_reduce_scatter(c, buf, chunk, K, VOLT_COMM_F32, VOLT_COMM_SUM, "t4"));
    for (int i = 0; i < K; i++) CHECK_CLOSE(chunk[i], tri * (R * K + i), 1e-6, 0);
    /* all_gather in place and out of place */
    for (int i = 0; i < K * W; i++) buf[i] = i / K == R ? (float)(100 * R + i) : -1.f;
    CHECK_OK(volt__comm_all_gather(c, buf + R * K, buf, K, VOLT_COMM_F32, "t5"));
    for (int i = 0; i < K * W; i++) CHECK(buf[i] == (float)(100 * (i / K) + i), "all_gather in place [%d] = %g", i, buf[i]);
    for (int i = 0; i < K; i++) chunk[i] = (float)(R * 10 + i);
    CHECK_OK(volt__comm_all_gather(c, chunk, buf, K, VOLT_COMM_F32, "t6"));
    for (int i = 0; i < K * W; i++) CHECK(buf[i] == (float)((i / K) * 10 + i % K), "all_gather [%d]", i);
    /* f64 average, byte broadcast, barrier */
    double d[3] = { R, 2.0 * R, 1 };
    CHECK_OK(volt__comm_all_reduce(c, d, d, 3, VOLT_COMM_F64, VOLT_COMM_AVG, "t7"));
    CHECK_CLOSE(d[0], (W - 1) / 2.0, 1e-15, 0);
    CHECK_CLOSE(d[2], 1.0, 0, 0);
    char msg[32] = "";
    if (R == W - 1) snprintf(msg, sizeof msg, "hello %d", R);
    CHECK_OK(volt__comm_broadcast(c, msg, sizeof msg, VOLT_COMM_BYTE, W - 1, "t8"));
    char want[32];
    snprintf(want, sizeof want, "hello %d", W - 1);
    CHECK(!strcmp(msg, want), "broadcast '%s'", msg);
    CHECK_OK(volt__comm_barrier(c, "t9"));
    /* non-blocking: several in flight, test() drives them, waits in another order */
    float a[K], b2[K];
    for (int i = 0; i < K; i++) a[i] = b2[i] = (float)R;
    volt_comm_req *q1 = NULL, *q2 = NULL;
    CHECK_OK(c->ops->all_reduce(c, a, a, K, VOLT_COMM_F32, VOLT_COMM_SUM, "q1", &q1));
    CHECK_OK(c->ops->all_reduce(c, b2, b2, K, VOLT_COMM_F32, VOLT_COMM_AVG, "q2", &q2));
    bool done = false;
    CHECK_OK(c->ops->test(c, q1, &done));
    CHECK_OK(c->ops->wait(c, q2));
    CHECK_OK(c->ops->wait(c, q1));
    CHECK(a[0] == (float)(W * (W - 1) / 2) && b2[K - 1] == (float)(W - 1) / 2.0f, "non-blocking results %g %g", a[0], b2[K - 1]);
    /* bad arguments do not start anything */
    volt_comm_req *q3 = (volt_comm_req *)&q3;
    CHECK(c->ops->broadcast(c, msg, 1, VOLT_COMM_BYTE, W, "bad", &q3) == VOLT_ERR_INVALID_ARG && q3 == NULL, "bad root");
    CHECK(c->ops->all_reduce(c, msg, msg, 1, VOLT_COMM_BYTE, VOLT_COMM_SUM, "bad", &q3) == VOLT_ERR_INVALID_ARG, "byte reduce");
    volt__comm_destroy(c);

    /* a timeout: rank 0 waits on a barrier nobody else joins (on its own comm) */
    cc.timeout_s = 0.5;
    CHECK_OK(volt__comm_mpi_create(&cc, &c, err, sizeof err));
    if (R == 0 && W > 1) {
        double t0 = vtest_now();
        st = volt__comm_barrier(c, "lonely barrier");
        double el = vtest_now() - t0;
        CHECK(st == VOLT_ERR_TIMEOUT, "lonely barrier: %s", volt_status_str(st));
        CHECK(el >= 0.5 && el < 5, "timed out after %.2f s", el);
        CHECK(strstr(volt__comm_errmsg(c), "rank 0: barrier #1 (lonely barrier) timed out after 0.5 s") != NULL,
              "message: %s", volt__comm_errmsg(c));
        st = volt__comm_barrier(c, "again");
        CHECK(st == VOLT_ERR_TIMEOUT && strstr(volt__comm_errmsg(c), "unusable after: rank 0: barrier #1 (lonely barrier) timed out"),
              "a broken comm fails at once, repeating the cause: %s", volt__comm_errmsg(c));
        /* ... and the process makes no new comm (its MPI calls are out of step with the
         * others'), by any door: the MPI backend, the registry, a trainer */
        volt_comm *c2 = (volt_comm *)&c2;
        err[0] = 0;
        st = volt__comm_mpi_create(&cc, &c2, err, sizeof err);
        CHECK(st == VOLT_ERR_STATE && c2 == NULL && strstr(err, "no new communicator in this process") &&
              strstr(err, "barrier #1 (lonely barrier) timed out"), "a new MPI comm after a broken one: %s (%s)",
              volt_status_str(st), err);
        err[0] = 0;
        st = volt__comm_create_for(volt__device_cpu(), &cc, &c2, err, sizeof err);
        CHECK(st == VOLT_ERR_STATE && c2 == NULL && strstr(err, "lonely barrier"), "registry: %s (%s)",
              volt_status_str(st), err);
        volt_trainer_config tc;
        volt_trainer_config_init(&tc);
        tc.strategy = "ddp";
        tc.enable_checkpointing = tc.enable_logger = tc.enable_progress_bar = false;
        volt_trainer *t = NULL;
        st = volt_trainer_create(&tc, &t);
        CHECK(st == VOLT_ERR_STATE && t && strstr(volt_trainer_errmsg(t), "no new communicator in this process") &&
              strstr(volt_trainer_errmsg(t), "relaunch"), "a trainer after a broken comm: %s (%s)", volt_status_str(st),
              t ? volt_trainer_errmsg(t) : "-");
        volt_trainer_destroy(t);
    }
    volt__comm_destroy(c);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- parity, memory, overlap, hook order ------------------------------------------------------------ */
/* The test's own account of each strategy (independent of the registry's flags). */
typedef enum { VOLT_DIST_DDP, VOLT_DIST_ZERO1, VOLT_DIST_ZERO2, VOLT_DIST_FSDP, VOLT_DIST_FSDP_SGO } volt_dist_kind;
static volt_dist_kind kind_of(const char *s) {
    if (!strcmp(s, "ddp")) return VOLT_DIST_DDP;
    if (!strcmp(s, "zero1") || !strcmp(s, "deepspeed_stage_1")) return VOLT_DIST_ZERO1;
    if (!strcmp(s, "zero2") || !strcmp(s, "deepspeed_stage_2")) return VOLT_DIST_ZERO2;
    if (!strcmp(s, "fsdp_shard_grad_op")) return VOLT_DIST_FSDP_SGO;
    return VOLT_DIST_FSDP;
}

static void check_memory(volt_trainer *t, const char *name) {
    volt_memory_report r;
    volt__strategy_memory_report(t->strategy, &r);
    const volt_dist_kind k = kind_of(name);
    const int64_t N = g_world;
    /* the layout computed independently: params rounded to 16 floats, units to 16*N (sharded) */
    volt_params *ps = volt_trainer_params(t);
    int64_t P = 0, U = 0, psi = 0;
    for (int u = 0; u < volt_params_unit_count(ps); u++) {
        volt_unit *un = volt_params_unit_at(ps, u);
        int64_t n = 0;
        for (int i = 0; i < volt_unit_param_count(un); i++) {
            n += (volt_tensor_numel(volt_unit_param(un, i)) + 15) / 16 * 16;
            psi += volt_tensor_numel(volt_unit_param(un, i));
        }
        const int64_t m = k == VOLT_DIST_DDP ? 16 : 16 * N;
        n = (n + m - 1) / m * m;
        P += n;
        if (n > U) U = n;
    }
    CHECK(r.numel == psi && r.padded_numel == P, "%s: numel %lld/%lld padded %lld/%lld", name, (long long)r.numel,
          (long long)psi, (long long)r.padded_numel, (long long)P);
    CHECK(P - psi < 16 * volt_params_count(ps) + 16 * N * volt_params_unit_count(ps), "padding bounded");
    int64_t wp = 0, wg = 0, wo = 0;
    switch (k) {
    case VOLT_DIST_DDP: wp = 4 * P; wg = 4 * P; wo = 8 * P; break;
    case VOLT_DIST_ZERO1: wp = 4 * P; wg = 4 * P; wo = 8 * P / N; break;
    case VOLT_DIST_ZERO2: wp = 4 * P; wg = 4 * P / N; wo = 8 * P / N; break;
    case VOLT_DIST_FSDP: wp = 4 * P / N + 4 * U; wg = 4 * P / N; wo = 8 * P / N; break;
    case VOLT_DIST_FSDP_SGO: wp = 4 * P; wg = 4 * P / N; wo = 8 * P / N; break;
    }
    CHECK(r.param_bytes == wp && r.grad_bytes == wg && r.optim_bytes == wo,
          "%s memory: params %lld (want %lld) grads %lld (%lld) states %lld (%lld)", name, (long long)r.param_bytes,
          (long long)wp, (long long)r.grad_bytes, (long long)wg, (long long)r.optim_bytes, (long long)wo);
    /* what is really held: optimizer states as sharded; params and grads no more than full */
    const int64_t states = k == VOLT_DIST_DDP ? 8 * P : 8 * P / N;
    CHECK(r.held_optim_bytes == states, "%s held optimizer states %lld want %lld", name, (long long)r.held_optim_bytes,
          (long long)states);
    CHECK(r.held_param_bytes <= 4 * P + 4096 * volt_params_unit_count(ps) && r.held_grad_bytes <= 4 * P + 4096 * volt_params_unit_count(ps),
          "%s held params %lld grads %lld", name, (long long)r.held_param_bytes, (long long)r.held_grad_bytes);
    if (g_rank == 0)
        printf("memory %-18s N=%d Ψ=%lld Ψ'=%lld: params %lld grads %lld states %lld (formula total %lld; held %lld/%lld/%lld)\n",
               name, g_world, (long long)psi, (long long)P, (long long)r.param_bytes, (long long)r.grad_bytes,
               (long long)r.optim_bytes, (long long)(r.param_bytes + r.grad_bytes + r.optim_bytes),
               (long long)r.held_param_bytes, (long long)r.held_grad_bytes, (long long)r.held_optim_bytes);
}

/* ZeRO's all-gathers after the step overlap the next forward: the step returns with all of
 * them in flight (step_done before any gather_done), and each unit's gather is waited at its
 * first use, in the order forward reaches the units (use(u) right before gather_done(u), the
 * last unit's gather still running while the first unit computes). The last step's gathers
 * end in the epoch's validation forward. */
static void check_zero_gathers(const char *name, const volt_dist_event *ev, int n, int n_units) {
    int steps = 0, launched = 0, done = 0, waited_at_use = 0, overlapped = 0;
    for (int i = 0; i < n; i++) {
        launched += ev[i].kind == VOLT_EV_GATHER_LAUNCH;
        done += ev[i].kind == VOLT_EV_GATHER_DONE;
        if (ev[i].kind != VOLT_EV_STEP_DONE) continue;
        steps++;
        /* this step's launches: after its backward ended, with no completion among them */
        int launches = 0, dones = 0, j = i - 1;
        for (; j >= 0 && ev[j].kind != VOLT_EV_BACKWARD_END; j--) {
            launches += ev[j].kind == VOLT_EV_GATHER_LAUNCH;
            dones += ev[j].kind == VOLT_EV_GATHER_DONE;
        }
        CHECK(launches == n_units && dones == 0, "%s: step %d returned after %d gather launches and %d completions "
              "(want %d launches, none waited at the boundary)", name, steps, launches, dones, n_units);
        /* after it: each unit's completion comes right after the use that found it in flight */
        int order[64], got = 0, first_done = -1, last_done = -1;
        for (j = i + 1; j < n && got < n_units && got < 64 && ev[j].kind != VOLT_EV_STEP_DONE; j++) {
            if (ev[j].kind != VOLT_EV_GATHER_DONE) continue;
            const bool at_use = ev[j - 1].kind == VOLT_EV_UNIT_USE && ev[j - 1].unit == ev[j].unit && j - 1 > i;
            CHECK(at_use, "%s: after step %d the gather of unit %d completed at event %d (%s), not at its first use", name,
                  steps, ev[j].unit, j, volt__dist_ev_name(ev[j - 1].kind));
            waited_at_use += at_use;
            CHECK(ev[j].t >= ev[i].t, "%s: gather completed before the step returned", name);
            if (first_done < 0) first_done = j;
            last_done = j;
            order[got++] = ev[j].unit;
        }
        CHECK(got == n_units, "%s: after step %d, %d of %d gathers completed before the next step", name, steps, got, n_units);
        for (int q = 0; q < got; q++)   /* forward reads fc1, fc2, fc3: first units first */
            CHECK(order[q] == q, "%s: after step %d, gather #%d to complete was unit %d", name, steps, q, order[q]);
        overlapped += got == n_units && first_done < last_done;
    }
    CHECK(steps == STEPS, "%s: %d steps returned with their gathers in flight, want %d", name, steps, STEPS);
    CHECK(launched == done && launched == STEPS * n_units, "%s: %d gathers launched, %d done, want %d", name, launched, done,
          STEPS * n_units);
    CHECK(waited_at_use == STEPS * n_units, "%s: %d of %d gathers waited at their unit's first use", name, waited_at_use,
          STEPS * n_units);
    if (g_rank == 0)
        printf("gathers %-18s %d/%d steps returned with all %d all-gathers in flight; each waited at its unit's first use\n",
               name, overlapped, steps, n_units);
}

static void check_trace(volt_trainer *t, const char *name) {
    const volt_dist_event *ev = NULL;
    const int n = volt__dist_trace(t->strategy, &ev);
    CHECK(n > 0, "%s: trace has %d events", name, n);
    if (n <= 0) return;
    const volt_dist_kind k = kind_of(name);
    const int n_units = volt_params_unit_count(volt_trainer_params(t));
    /* hook order (without times) identical on every rank */
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        if (ev[i].kind == VOLT_EV_GRAD_DONE) continue;   /* completions are polled: their order is rank-local */
        int v[2] = { (int)ev[i].kind, ev[i].unit };
        h = fnv(h, v, sizeof v);
    }
    CHECK(same_everywhere(h), "%s: the hook/collective sequence differs between ranks", name);
    /* no communication in non-final micro-steps; overlap in the final ones */
    int cycles = 0, overlapped = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].kind != VOLT_EV_BACKWARD_BEGIN) continue;
        int end = i + 1;
        while (end < n && ev[end].kind != VOLT_EV_BACKWARD_BEGIN) end++;
        int launches = 0, first_launch = -1, last_ready = -1, bwd_end = -1;
        for (int j = i + 1; j < end; j++) {
            if (ev[j].kind == VOLT_EV_GRAD_LAUNCH) { launches++; if (first_launch < 0) first_launch = j; }
            if (ev[j].kind == VOLT_EV_GRADS_READY) last_ready = j;
            if (ev[j].kind == VOLT_EV_BACKWARD_END && bwd_end < 0) bwd_end = j;
        }
        if (ev[i].unit == 0) {   /* accumulation micro-step */
            CHECK(launches == 0, "%s: %d grad reductions on a non-final micro-step", name, launches);
            continue;
        }
        cycles++;
        CHECK(launches == n_units, "%s: %d grad reductions for %d units", name, launches, n_units);
        CHECK(bwd_end > 0, "%s: reduce_grads ran", name);
        if (first_launch < 0 || bwd_end < 0) continue;
        if (k == VOLT_DIST_ZERO1) {
            CHECK(first_launch > bwd_end, "zero1 reduce-scatters at the boundary, after backward");
        } else {
            /* the first bucket starts while backward still has units to finish */
            CHECK(first_launch < last_ready && ev[first_launch].t < ev[bwd_end].t,
                  "%s: first bucket launched at event %d, last unit ready at %d, backward ended at %d", name,
                  first_launch, last_ready, bwd_end);
            overlapped += first_launch < last_ready;
        }
    }
    CHECK(cycles == STEPS, "%s: %d accumulation cycles", name, cycles);
    if (k == VOLT_DIST_FSDP || k == VOLT_DIST_FSDP_SGO) {
        int launched = 0, done = 0;
        for (int i = 0; i < n; i++) {
            launched += ev[i].kind == VOLT_EV_GATHER_LAUNCH;
            done += ev[i].kind == VOLT_EV_GATHER_DONE;
        }
        CHECK(launched == done, "%s: %d gathers launched, %d done", name, launched, done);
        if (k == VOLT_DIST_FSDP_SGO) {
            /* every unit gathered by the first forward (set-up left the shards) and again after
             * each of the STEPS updates (the last one at the end of fit) */
            CHECK(launched == (STEPS + 1) * n_units, "%s: %d gathers, want %d", name, launched, (STEPS + 1) * n_units);
        }
        /* inside each backward: FULL_SHARD gathers again every unit forward gave back (all but
         * the last one used); SHARD_GRAD_OP keeps them gathered and gathers nothing */
        for (int i = 0; i < n; i++) {
            if (ev[i].kind != VOLT_EV_BACKWARD_BEGIN) continue;
            int g = 0, ready = 0;   /* backward ends with its n_units-th unit_grads_ready */
            for (int j = i + 1; j < n && ready < n_units; j++) {
                g += ev[j].kind == VOLT_EV_GATHER_LAUNCH;
                ready += ev[j].kind == VOLT_EV_GRADS_READY;
            }
            if (k == VOLT_DIST_FSDP) CHECK(g == n_units - 1, "fsdp: %d gathers in a backward, want %d", g, n_units - 1);
            else CHECK(g == 0, "fsdp_shard_grad_op: %d gathers in a backward", g);
        }
    }
    if (k == VOLT_DIST_ZERO1 || k == VOLT_DIST_ZERO2) check_zero_gathers(name, ev, n, n_units);
    if (g_rank == 0 && k != VOLT_DIST_ZERO1)
        printf("overlap %-18s %d/%d sync backwards launched the first bucket before the last unit was ready\n", name,
               overlapped, cycles);
}

/* The comm serves the device the run asked for ($VOLT_ACCELERATOR: the strict variants say
 * cpu-strict), and stages through preallocated host buffers exactly when that device's memory
 * is not host-addressable. */
static void check_comm_device(volt_trainer *t) {
    volt_comm *c = volt__dist_comm(t->strategy);
    CHECK(c && c->dev, "comm with a device");
    if (!c || !c->dev) return;
    const char *acc = getenv("VOLT_ACCELERATOR");
    if (acc && *acc) CHECK(!strcmp(c->dev->be->name, acc), "comm device '%s', asked '%s'", c->dev->be->name, acc);
    const volt_comm_row *row = volt__comm_backend_find(c->ops->name);   /* nccl takes device memory: never staged */
    CHECK(row && c->staged == (row->host_buffers && !volt__dev_host_addressable(c->dev)),
          "staged iff the comm takes host buffers and the device memory is not host-addressable");
    const dist *d = t->strategy->impl;
    for (int i = 0; i < d->n_units; i++)
        CHECK((d->units[i].h_grad != NULL) == c->staged && (d->units[i].h_vals != NULL) == c->staged, "unit %d staging buffers", i);
    if (g_rank == 0) printf("comm %s on device %s%s\n", c->ops->name, c->dev->be->name, c->staged ? " (staged through host buffers)" : "");
}

static void test_parity(const char *name) {
    volt_dataset *ds = make_data();
    ref_run ref;
    run_single(ds, &ref);
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    CHECK(GB % g_world == 0, "global batch %d not divisible by %d ranks", GB, g_world);
    volt_loader *l = make_loader(ds, GB / g_world), *vl = make_loader_ex(ds, GB / g_world, false);
    if (!t || !l || !ref.params) return;
    CHECK(volt_trainer_world_size(t) == g_world && volt_trainer_rank(t) == g_rank, "rank/world from MPI");
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL);
    CHECK(st == VOLT_OK, "%s fit: %s", name, volt_trainer_errmsg(t));
    check_comm_device(t);
    /* VOLT_LOG_SYNC metrics: the last step's loss and the epoch's validation mean, global */
    double tl = NAN, vloss = NAN;
    CHECK(volt_trainer_metric(t, "train_loss", &tl) && volt_trainer_metric(t, "val_loss", &vloss), "%s: metrics", name);
    CHECK_CLOSE(tl, ref.train_loss, 1e-5, 0);
    CHECK_CLOSE(vloss, ref.val_loss, 1e-5, 0);
    volt_loader_destroy(vl);
    CHECK(volt_trainer_global_step(t) == STEPS, "steps");
    /* losses: the global loss of a micro-step is the mean over ranks of the shard means */
    CHECK(m.n_losses == ACC * STEPS && ref.n_losses == ACC * STEPS, "%d / %d losses", m.n_losses, ref.n_losses);
    float glob[MAX_LOSSES];
    MPI_Allreduce(m.losses, glob, m.n_losses, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double worst_loss = 0;
    for (int i = 0; i < m.n_losses && i < ref.n_losses; i++) {
        double e = fabs(glob[i] / g_world - ref.losses[i]) / fabs(ref.losses[i]);
        if (!(e <= worst_loss)) worst_loss = e;
    }
    CHECK(worst_loss <= 1e-5, "%s: losses differ from single by %.3g relative", name, worst_loss);
    /* params: against single, and bitwise the same on every rank */
    volt_params *ps = volt_trainer_params(t);
    float *mine = malloc(sizeof(float) * (size_t)ref.n), *r0 = malloc(sizeof(float) * (size_t)ref.n);
    copy_params(ps, mine);
    double rel = 0, worst = tol_used(mine, ref.params, ref.n, &rel);
    CHECK(worst <= 1, "%s: params differ from single by more than 1e-5 relative (+1e-7): %.3g of the tolerance", name, worst);
    /* and against the double-precision reference, on the global batches the ranks saw together */
    {
        enum { CNT = MAX_LOSSES * GB * IN, CNTY = MAX_LOSSES * GB };
        const int per = GB / g_world;
        CHECK(m.rows == per, "%s: %d rows per micro-batch, want %d", name, m.rows, per);
        float *allx = malloc(sizeof(float) * (size_t)CNT * (size_t)g_world);
        int64_t *ally = malloc(sizeof(int64_t) * (size_t)CNTY * (size_t)g_world);
        static float gx[MAX_LOSSES][GB * IN];
        static int64_t gy[MAX_LOSSES][GB];
        float gl[MAX_LOSSES];
        MPI_Allgather(m.xr, CNT, MPI_FLOAT, allx, CNT, MPI_FLOAT, MPI_COMM_WORLD);
        MPI_Allgather(m.yr, CNTY, MPI_INT64_T, ally, CNTY, MPI_INT64_T, MPI_COMM_WORLD);
        for (int j = 0; j < ACC * STEPS; j++) {
            for (int r = 0; r < g_world; r++) {
                memcpy(gx[j] + r * per * IN, allx + (size_t)r * CNT + (size_t)j * GB * IN, sizeof(float) * (size_t)(per * IN));
                memcpy(gy[j] + r * per, ally + (size_t)r * CNTY + (size_t)j * GB, sizeof(int64_t) * (size_t)per);
            }
            gl[j] = glob[j] / (float)g_world;
        }
        check_vs_reference(name, ref.theta0, mine, gl, (const float (*)[GB * IN])gx, (const int64_t (*)[GB])gy,
                           g_rank != 0);
        free(allx);
        free(ally);
    }
    memcpy(r0, mine, sizeof(float) * (size_t)ref.n);
    MPI_Bcast(r0, (int)ref.n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, mine, sizeof(float) * (size_t)ref.n), "%s: params differ between ranks", name);
    double both[2] = { worst, rel }, all[2];
    MPI_Allreduce(both, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("parity  %-18s N=%d: loss rel err %.2e; params: rel err %.2e (|w| >= 1e-3), %.0f%% of the 1e-5 rel + 1e-7 abs tolerance\n",
               name, g_world, worst_loss, all[1], 100 * all[0]);
    check_memory(t, name);
    check_trace(t, name);
    free(mine);
    free(r0);
    free(ref.params);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

/* ---- a switch of the model or optimizer under a strategy ---------------------------------------------
 * Single with and without the switch (g_groups, g_freeze), then the strategy with it on this
 * world: equal to single with it (the parity tolerance), the same on every rank, and the switch
 * changed single's result (so a switch the strategy ignored would fail). `check` adds the
 * case's own checks on the run: its trainer, this rank's params, single's run with the switch. */
typedef void (*switch_check)(const char *name, volt_trainer *t, const float *mine, const ref_run *ref);

static void test_switch_dist(const char *name, bool *flag, const char *what, switch_check check) {
    volt_dataset *ds = make_data();
    static ref_run plain, ref;
    *flag = false;
    run_single(ds, &plain);
    *flag = true;
    run_single(ds, &ref);
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world), *vl = make_loader_ex(ds, GB / g_world, false);
    if (!t || !l || !ref.params || !plain.params) return;
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL);
    CHECK(st == VOLT_OK, "%s fit with %s: %s", name, what, volt_trainer_errmsg(t));
    float *mine = malloc(sizeof(float) * (size_t)ref.n), *r0 = malloc(sizeof(float) * (size_t)ref.n);
    copy_params(volt_trainer_params(t), mine);
    check(name, t, mine, &ref);
    double rel = 0, worst = tol_used(mine, ref.params, ref.n, &rel), off = tol_used(ref.params, plain.params, ref.n, NULL);
    CHECK(worst <= 1, "%s with %s: params differ from single's: %.3g of the tolerance", name, what, worst);
    CHECK(off > 100, "%s: %s changed single's params by only %.3g of the tolerance", name, what, off);
    memcpy(r0, mine, sizeof(float) * (size_t)ref.n);
    MPI_Bcast(r0, (int)ref.n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, mine, sizeof(float) * (size_t)ref.n), "%s with %s: params differ between ranks", name, what);
    double all = 0;
    MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("%-18s N=%d with %s: params %.0f%% of the 1e-5 rel + 1e-7 abs tolerance from single with it; without it "
               "%.3g x it\n", name, g_world, what, 100 * all, off);
    *flag = false;
    free(mine);
    free(r0);
    free(ref.params);
    free(plain.params);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
}

/* Parameter groups under a sharding strategy: the optimizer updates each rank's slice [lo, hi)
 * of a unit: with 2 ranks the slices end inside fc1.weight / fc2.weight and hold the biases'
 * group boundary. */
static void groups_check(const char *name, volt_trainer *t, const float *mine, const ref_run *ref) {
    (void)mine; (void)ref;
    volt_optimizer *opt = volt_trainer_optimizer(t);
    CHECK(volt_optimizer_group_count(opt) == 3 && volt_optimizer_group_param_count(opt, 1) == 3, "%s: the groups", name);
    int sliced = 0;   /* a rank's range cuts a unit: the sharding is in effect */
    for (int u = 0; u < volt_params_unit_count(volt_trainer_params(t)); u++) {
        int64_t lo, hi;
        volt_optimizer_range(opt, u, &lo, &hi);
        sliced += hi - lo < volt_unit_numel(volt_params_unit_at(volt_trainer_params(t), u));
    }
    CHECK(g_world == 1 || sliced > 0, "%s: no unit is sharded", name);
}
static void test_groups_dist(const char *name) { test_switch_dist(name, &g_groups, "parameter groups", groups_check); }

/* Frozen parameters under every strategy: fc2.bias frozen throughout and fc1.weight frozen for
 * two of the five steps (then thawed). fc2.bias stays its initial value bit for bit on every rank
 * (AdamW's decay skips it, as torch skips a param without grad). */
static void freeze_check(const char *name, volt_trainer *t, const float *mine, const ref_run *ref) {
    (void)t;
    const int64_t b2_at = H1 * IN + H1 + H2 * H1, w1_n = H1 * IN;   /* fc2.bias's offset in declaration order */
    CHECK(!memcmp(mine + b2_at, ref->theta0 + b2_at, sizeof(float) * H2), "%s: the frozen fc2.bias moved", name);
    CHECK(!memcmp(ref->params + b2_at, ref->theta0 + b2_at, sizeof(float) * H2), "single: the frozen fc2.bias moved");
    CHECK(memcmp(mine, ref->theta0, sizeof(float) * w1_n) != 0, "%s: fc1.weight did not train after it thawed", name);
}
static void test_freeze_dist(const char *name) { test_switch_dist(name, &g_freeze, "frozen parameters", freeze_check); }

/* BackboneFinetuning under sharding: fc1.* frozen in epoch 0, then moved into an added
 * optimizer group (its own lr and Adam step count) on every rank's slice. */
static void backbone_check(const char *name, volt_trainer *t, const float *mine, const ref_run *ref) {
    volt_optimizer *opt = volt_trainer_optimizer(t);
    CHECK(volt_optimizer_group_count(opt) == 2 && volt_optimizer_group_param_count(opt, 1) == 2 &&
          volt_optimizer_group_first_step(opt, 1) == STEPS, "%s: the backbone's group (%d groups, added at %lld)", name,
          volt_optimizer_group_count(opt), (long long)volt_optimizer_group_first_step(opt, 1));
    CHECK(memcmp(mine, ref->theta0, sizeof(float) * H1 * IN) != 0, "%s: fc1.weight did not train after the unfreeze", name);
}
static void test_backbone_dist(const char *name) { test_switch_dist(name, &g_backbone, "BackboneFinetuning", backbone_check); }

/* ---- weight averaging (EMA) under every strategy -------------------------------------------------
 * The fit with EMA on N ranks equals single's on the global batch: the model at the end (the
 * average, copied in at train end) and the validation loss (on the average), with every rank
 * holding the same parameters; each sharded rank's average covers its slice only. */
static void test_ema_dist(const char *name) {
    volt_dataset *ds = make_data();
    static ref_run plain, ref;
    g_ema = false;
    run_single(ds, &plain);
    g_ema = true;
    run_single(ds, &ref);
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world), *vl = make_loader_ex(ds, GB / g_world, false);
    if (!t || !l || !ref.params || !plain.params) return;
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL);
    CHECK(st == VOLT_OK, "%s fit with EMA: %s", name, volt_trainer_errmsg(t));
    volt_optimizer *opt = volt_trainer_optimizer(t);
    CHECK(volt_optimizer_average_mode(opt) == VOLT_OPTIM_AVERAGE_EMA && volt_optimizer_average_count(opt) == STEPS,
          "%s: %lld averages in %d steps", name, (long long)volt_optimizer_average_count(opt), STEPS);
    float *mine = malloc(sizeof(float) * (size_t)ref.n), *r0 = malloc(sizeof(float) * (size_t)ref.n);
    copy_params(volt_trainer_params(t), mine);
    double worst = tol_used(mine, ref.params, ref.n, NULL), off = tol_used(ref.params, plain.params, ref.n, NULL);
    CHECK(worst <= 1, "%s with EMA: params differ from single with EMA: %.3g of the tolerance", name, worst);
    CHECK(off > 100, "%s: EMA changed single's params by only %.3g of the tolerance", name, off);
    double vl_mine = 0;
    CHECK(volt_trainer_metric(t, "val_loss", &vl_mine) && fabs(vl_mine - ref.val_loss) <= 1e-5 * fabs(ref.val_loss) + 1e-7,
          "%s with EMA: val_loss %.9g, single %.9g (validation on the average)", name, vl_mine, ref.val_loss);
    CHECK(fabs(plain.val_loss - ref.val_loss) > 1e-4 * fabs(ref.val_loss), "%s: EMA did not change single's val_loss", name);
    memcpy(r0, mine, sizeof(float) * (size_t)ref.n);
    MPI_Bcast(r0, (int)ref.n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, mine, sizeof(float) * (size_t)ref.n), "%s with EMA: params differ between ranks", name);
    double all = 0;
    MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("ema     %-18s N=%d: params %.0f%% of the tolerance from single with EMA; without EMA %.3g x it\n", name,
               g_world, 100 * all, off);
    g_ema = false;
    free(mine);
    free(r0);
    free(ref.params);
    free(plain.params);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
}

/* A checkpoint with EMA saved mid-fit under the strategy (every rank at the same step: the swap
 * in and out are collective) and the fit resumed from it in a fresh trainer: the same
 * parameters (the average at the end) as the uninterrupted run, bit for bit; single loads it
 * (resharded) and validates on its weights, which are the average of the save's step. */
static const char *g_ema_save;   /* the path the saver writes after step 2 */
static volt_status ema_saver(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    if (g_ema_save && volt_trainer_global_step(t) == 2 && volt_trainer_batch_in_epoch(t) == 2 * ACC)
        return volt_trainer_save_checkpoint(t, g_ema_save);
    return VOLT_OK;
}
static const volt_callback_ops ema_saver_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "EmaSaver",
                                                 .on_train_batch_end = ema_saver };
static void test_ema_resume(const char *name) {
    volt_dataset *ds = make_data();
    char path[4096];
    snprintf(path, sizeof path, "%s/ema_%s.safetensors", vtest_tmpdir(), name);
    static float a[NPARAM], b[NPARAM];
    g_ema = true;
    for (int pass = 0; pass < 2; pass++) {   /* straight with a save after step 2; resumed from it */
        mlp m = { 0 };
        volt_trainer *t = make_trainer(name, vtest_tmpdir());
        volt_loader *l = make_loader(ds, GB / g_world), *vl = make_loader_ex(ds, GB / g_world, false);
        if (!t || !l) return;
        g_ema_save = pass == 0 ? path : NULL;
        CHECK_OK(volt_trainer_add_callback(t, &ema_saver_ops, NULL));
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, pass == 0 ? NULL : path);
        CHECK(st == VOLT_OK, "%s EMA %s: %s", name, pass == 0 ? "fit" : "resume", volt_trainer_errmsg(t));
        copy_params(volt_trainer_params(t), pass == 0 ? a : b);
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
        volt_loader_destroy(vl);
    }
    g_ema = false;
    g_ema_save = NULL;
    CHECK(!memcmp(a, b, sizeof a), "%s EMA: the resumed run's average differs from the uninterrupted run's", name);
    if (g_rank == 0) printf("ema     %-18s N=%d: resumed from a sharded checkpoint, bit for bit\n", name, g_world);
    volt_dataset_destroy(ds);
}

/* ---- gradient reduction in bf16 (strategy_reduce_dtype) ------------------------------------------
 * The same run with fp32 and with bf16 reduction: the grads are rounded to bf16 before the
 * all-reduce / reduce-scatter (relative error <= 2^-9 each), so the bf16 run must move the
 * weights like the fp32 run to within a few percent of how far training moved them, and must
 * differ from it (the setting does something). The comm must have reduced in bf16 (the
 * units' bf16 buckets exist). */
static void fit_params(const char *name, volt_dataset *ds, float *out) {
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world), *vl = make_loader_ex(ds, GB / g_world, false);
    if (!t || !l) return;
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL));
    const dist *d = t->strategy->impl;
    CHECK(d->red_dt == (g_reduce_dtype && !strcmp(g_reduce_dtype, "bf16") ? VOLT_COMM_BF16 : VOLT_COMM_F32), "reduction dtype");
    for (int i = 0; i < d->n_units; i++) CHECK((d->units[i].g16 != NULL) == (d->red_dt == VOLT_COMM_BF16), "unit %d bf16 bucket", i);
    copy_params(volt_trainer_params(t), out);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
}

static void test_reduce16(const char *name) {
    volt_dataset *ds = make_data();
    ref_run ref;
    run_single(ds, &ref);   /* theta0 */
    static float p32[NPARAM], p16[NPARAM];
    g_reduce_dtype = "fp32";
    fit_params(name, ds, p32);
    g_reduce_dtype = "bf16";
    fit_params(name, ds, p16);
    g_reduce_dtype = NULL;
    double moved = 0, diff = 0;
    int ndiff = 0;
    for (int i = 0; i < NPARAM; i++) {
        moved += ((double)p32[i] - ref.theta0[i]) * ((double)p32[i] - ref.theta0[i]);
        diff += ((double)p16[i] - p32[i]) * ((double)p16[i] - p32[i]);
        ndiff += p16[i] != p32[i];
    }
    const double rel = sqrt(diff / (moved > 0 ? moved : 1));
    CHECK(moved > 0, "%s: training moved the weights", name);
    CHECK(ndiff > 0, "%s: bf16 reduction gave exactly the fp32 result (the setting did nothing)", name);
    CHECK(rel <= 0.05, "%s: bf16 reduction moved the weights %.3g of the training step away from fp32 (> 5%%)", name, rel);
    /* the same bits on every rank */
    float *r0 = malloc(sizeof p16);
    memcpy(r0, p16, sizeof p16);
    MPI_Bcast(r0, NPARAM, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, p16, sizeof p16), "%s: bf16-reduced params differ between ranks", name);
    free(r0);
    if (g_rank == 0)
        printf("reduce16 %-18s N=%d: bf16 vs fp32 reduction: %d of %d weights differ, |diff| = %.3g of |training move|\n",
               name, g_world, ndiff, NPARAM, rel);
    free(ref.params);
    volt_dataset_destroy(ds);
}

/* ---- 16-bit parameter storage (bf16-true) under a distributed strategy ----------------------
 * The same run as test_parity with parameters stored in bf16 on every rank. Rounding to bf16
 * after each update can flip the last bit where single and N ranks differ by float
 * summation order, so the weights must agree within 2 bf16 ulps, with few elements off at
 * all; the parameter store must really be bf16 (half the bytes). */
static void test_parity16(const char *name) {
    g_precision = "bf16-true";
    volt_dataset *ds = make_data();
    ref_run ref;
    run_single(ds, &ref);
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world), *vl = make_loader_ex(ds, GB / g_world, false);
    if (!t || !l || !ref.params) return;
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL);
    CHECK(st == VOLT_OK, "%s bf16-true fit: %s", name, volt_trainer_errmsg(t));
    volt_params *ps = volt_trainer_params(t);
    CHECK(volt_params_dtype(ps) == VOLT_BF16, "%s: parameters stored as %s", name, volt_dtype_name(volt_params_dtype(ps)));
    volt_memory_report r;
    CHECK_OK(volt_trainer_memory_report(t, &r));
    CHECK(r.held_param_bytes <= 2 * r.padded_numel + 4096 * volt_params_unit_count(ps), "%s: bf16 params hold %lld bytes for %lld values",
          name, (long long)r.held_param_bytes, (long long)r.padded_numel);
    float glob[MAX_LOSSES];
    MPI_Allreduce(m.losses, glob, m.n_losses, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double worst_loss = 0;
    for (int i = 0; i < m.n_losses && i < ref.n_losses; i++) {
        double e = fabs(glob[i] / g_world - ref.losses[i]) / fabs(ref.losses[i]);
        if (!(e <= worst_loss)) worst_loss = e;
    }
    CHECK(m.n_losses == ref.n_losses && worst_loss <= 2e-3, "%s bf16-true: losses differ by %.3g relative", name, worst_loss);
    float *mine = malloc(sizeof(float) * (size_t)ref.n);
    copy_params(ps, mine);
    int64_t off = 0;
    double worst = 0;
    for (int64_t i = 0; i < ref.n; i++) {
        const double d = fabs((double)mine[i] - ref.params[i]), tol = ldexp(fabs(ref.params[i]), -7) + 1e-6;
        off += d > 0;
        if (d / tol > worst) worst = d / tol;
    }
    CHECK(worst <= 1, "%s bf16-true: params differ from single by more than 2 bf16 ulps (%.3g of it)", name, worst);
    CHECK(off * 20 <= ref.n, "%s bf16-true: %lld of %lld params differ from single at all", name, (long long)off, (long long)ref.n);
    if (g_rank == 0)
        printf("bf16-true %-10s N=%d: loss rel err %.2e; %lld of %lld weights differ from single (within %.0f%% of 2 ulps); params %lld bytes\n",
               name, g_world, worst_loss, (long long)off, (long long)ref.n, 100 * worst, (long long)r.held_param_bytes);
    free(mine);
    free(ref.params);
    volt_loader_destroy(vl);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
    volt_dataset_destroy(ds);
}

/* ---- memory actually held (mincore of the unit buffers) -------------------------------------
 * A wider MLP (three 512x512 units and a small head) so units span many pages. Measured
 * (a) right after forward, inside training_step, (b) in on_before_optimizer_step (grads
 * reduced), (c) at the end of the batch (after the step and zero_grad). Per strategy:
 *   ddp, zero1   grads whole at (b)
 *   zero2, fsdp  grads at (b) <= the owned slices; at (c) nothing
 *   fsdp         params after forward <= owned slices + the last unit used (FULL_SHARD)
 *   fsdp_sgo     params after forward: every unit gathered
 *   fsdp, sgo    params at (c) <= owned slices + the first unit (prefetched for the next step) */
enum { MNC = 4, MGB = 6, MSTEPS = 2 };
/* Width (VOLT_TEST_MEM_WIDTH, default 512) and the device's give-back granule
 * (VOLT_TEST_MEM_GRANULE, default the page): the simulated GPU run uses 4096 and 2 MiB, so
 * its units span many VMM granules (tests/gpu_sim_nccl.cmake). */
static int64_t g_mw = 512;
#define MW g_mw
typedef struct {
    volt_tensor *w[4], *b[4];
    volt_trainer *t;
    volt_memory_report fwd, pre, end;
    volt_status grad_pre, grad_end;   /* volt_tensor_grad_to_host of l0.bias at (b) and (c) */
} wide;

static volt_status wide_setup(void *self, volt_params *ps) {
    wide *m = self;
    const int64_t dims[5] = { MW, MW, MW, MW, MNC };
    for (int l = 0; l < 4; l++) {
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

static volt_status wide_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    wide *m = self;
    volt_tensor *h = volt_batch_x(b);
    for (int l = 0; l < 4; l++) {
        h = volt_linear(s, h, m->w[l], m->b[l]);
        if (l < 3) h = volt_relu(s, h);
    }
    volt_tensor *loss = volt_cross_entropy(s, h, volt_batch_y(b));
    volt_trainer_memory_report(m->t, &m->fwd);
    return volt_step_set_loss(s, loss);
}

static volt_status wide_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-3f;
    return VOLT_OK;
}

static const volt_module_ops wide_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "wide", .setup = wide_setup,
                                          .training_step = wide_train, .configure_optimizers = wide_opt };

static volt_status grad_read(wide *m) {
    float *g = malloc(sizeof(float) * (size_t)MW);
    volt_status st = g ? volt_tensor_grad_to_host(m->b[0], g) : VOLT_ERR_NOMEM;
    free(g);
    return st;
}
static volt_status mem_pre(void *self, volt_trainer *t) {
    wide *m = self;
    m->grad_pre = grad_read(m);
    return volt_trainer_memory_report(t, &m->pre);
}
static volt_status mem_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    wide *m = self;
    m->grad_end = grad_read(m);
    return volt_trainer_memory_report(t, &m->end);
}
static const volt_callback_ops mem_cb = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Mem",
                                          .on_before_optimizer_step = mem_pre, .on_train_batch_end = mem_end };

static void test_memory(void) {
    const char *ew = getenv("VOLT_TEST_MEM_WIDTH"), *eg = getenv("VOLT_TEST_MEM_GRANULE");
    if (ew && atoll(ew) > 0) g_mw = atoll(ew);
    float *x = malloc(sizeof(float) * MGB * MSTEPS * (size_t)MW);
    static int64_t y[MGB * MSTEPS];
    CHECK(x != NULL, "memory: out of memory");
    if (!x) return;
    for (int i = 0; i < MGB * MSTEPS; i++) {
        y[i] = i % MNC;
        for (int k = 0; k < MW; k++) x[i * MW + k] = sinf(0.1f * (float)(i * MW + k));
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(MW) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { x, y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, MGB * MSTEPS, &ds));
    /* the last two under 16-mixed: unscaling must touch only the owned slices too */
    const char *names[] = { "ddp", "zero1", "zero2", "fsdp", "fsdp_shard_grad_op", "zero2", "fsdp" };
    const int64_t N = g_world, pg = sysconf(_SC_PAGESIZE);
    for (int si = 0; si < 7; si++) {
        const char *name = names[si], *prec = si >= 5 ? "16-mixed" : "32-true";
        const volt_dist_kind k = kind_of(name);
        wide m = { 0 };
        volt_trainer_config c;
        volt_trainer_config_init(&c);
        c.max_epochs = 1;
        c.max_steps = MSTEPS;
        c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
        c.num_sanity_val_steps = 0;
        c.gradient_clip_val = 1.0f;
        c.default_root_dir = vtest_tmpdir();
        c.strategy = name;
        c.precision = prec;
        volt_trainer *t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        m.t = t;
        CHECK_OK(volt_trainer_add_callback(t, &mem_cb, &m));
        volt_loader *l = make_loader_ex(ds, MGB / g_world, false);
        volt_status st = volt_trainer_fit(t, &wide_ops, &m, l, NULL, NULL);
        CHECK(st == VOLT_OK, "%s fit: %s", name, volt_trainer_errmsg(t));
        if (si == 0) check_comm_device(t);
        volt_params *ps = volt_trainer_params(t);
        const int U = volt_params_unit_count(ps);
        /* edge pages of each unit's slice; with device granules, the two partial ones per unit */
        const int64_t full = 4 * m.end.padded_numel, slack = eg && atoll(eg) > 0 ? 2 * atoll(eg) * U : 4 * pg * U;
        const int64_t first = 4 * volt_unit_numel(volt_params_unit_at(ps, 0)), last = 4 * volt_unit_numel(volt_params_unit_at(ps, U - 1));
        if (k == VOLT_DIST_DDP || k == VOLT_DIST_ZERO1) {
            CHECK(m.pre.held_grad_bytes >= full - slack, "%s: grads whole before the step (%lld of %lld)", name,
                  (long long)m.pre.held_grad_bytes, (long long)full);
            CHECK(m.grad_pre == VOLT_OK && m.grad_end == VOLT_OK, "%s: a parameter's grad read before the step: %s, "
                  "after it: %s", name, volt_status_str(m.grad_pre), volt_status_str(m.grad_end));
        } else {
            /* a grad the strategy gave back (the rest of the slice, then all) is refused, not read
             * as zeros (on cuda: unmapped granules) */
            CHECK(N == 1 || (m.grad_pre == VOLT_ERR_STATE && m.grad_end == VOLT_ERR_STATE), "%s: a parameter's grad read "
                  "before the step: %s, after it: %s (want state: given back)", name, volt_status_str(m.grad_pre),
                  volt_status_str(m.grad_end));
            CHECK(m.pre.held_grad_bytes <= full / N + slack, "%s: grads held before the step %lld > owned %lld + %lld", name,
                  (long long)m.pre.held_grad_bytes, (long long)(full / N), (long long)slack);
            CHECK(m.end.held_grad_bytes <= slack, "%s: grads held between steps %lld", name, (long long)m.end.held_grad_bytes);
        }
        if (k == VOLT_DIST_FSDP)
            CHECK(m.fwd.held_param_bytes <= full / N + last + slack, "fsdp: params held after forward %lld > owned %lld + last unit %lld + %lld",
                  (long long)m.fwd.held_param_bytes, (long long)(full / N), (long long)last, (long long)slack);
        if (k == VOLT_DIST_FSDP_SGO)
            CHECK(m.fwd.held_param_bytes >= full - slack, "fsdp_shard_grad_op: params after forward %lld of %lld",
                  (long long)m.fwd.held_param_bytes, (long long)full);
        if (k == VOLT_DIST_FSDP || k == VOLT_DIST_FSDP_SGO)
            CHECK(m.end.held_param_bytes <= full / N + first + slack, "%s: params held between steps %lld > owned %lld + first unit %lld",
                  name, (long long)m.end.held_param_bytes, (long long)(full / N), (long long)first);
        else
            CHECK(m.end.held_param_bytes >= full - slack, "%s: params whole (%lld of %lld)", name, (long long)m.end.held_param_bytes, (long long)full);
        CHECK(m.end.held_optim_bytes == m.end.optim_bytes, "%s: optimizer states held %lld, formula %lld", name,
              (long long)m.end.held_optim_bytes, (long long)m.end.optim_bytes);
        /* the registry row's flags say what this strategy does; the resident bytes show it */
        const volt_strategy_row *row = volt__strategy_find(name);
        CHECK(row && row == t->strategy->row, "%s: registry row", name);
        if (row) {
            const bool sg = row->flags & VOLT_STRAT_SHARDS_GRADS, sp = row->flags & VOLT_STRAT_SHARDS_PARAMS;
            const bool ff = row->flags & VOLT_STRAT_FREES_AFTER_FORWARD, so = row->flags & VOLT_STRAT_SHARDS_OPTIM;
            const int64_t rep = (int64_t)volt_optimizer_state_count(t->opt) * full;   /* states, replicated */
            CHECK(sg == (m.pre.held_grad_bytes <= full / N + slack), "%s: shards_grads=%d but grads held before the step %lld of %lld",
                  name, sg, (long long)m.pre.held_grad_bytes, (long long)full);
            CHECK(ff == (m.fwd.held_param_bytes <= full / N + last + slack), "%s: frees_after_forward=%d but params held after "
                  "forward %lld of %lld", name, ff, (long long)m.fwd.held_param_bytes, (long long)full);
            CHECK(sp == (m.end.held_param_bytes <= full / N + first + slack), "%s: shards_params=%d but params held between "
                  "steps %lld of %lld", name, sp, (long long)m.end.held_param_bytes, (long long)full);
            CHECK(so == (m.end.held_optim_bytes * N == rep) && !so == (m.end.held_optim_bytes == rep),
                  "%s: shards_optim=%d but states held %lld (replicated %lld)", name, so, (long long)m.end.held_optim_bytes, (long long)rep);
        }
        if (g_rank == 0)
            printf("held   %-18s %-8s N=%d MiB: params after fwd %.2f, between steps %.2f; grads before step %.2f, between steps %.2f (full %.2f)\n",
                   name, prec, g_world, m.fwd.held_param_bytes / 1048576.0, m.end.held_param_bytes / 1048576.0,
                   m.pre.held_grad_bytes / 1048576.0, m.end.held_grad_bytes / 1048576.0, full / 1048576.0);
        volt_loader_destroy(l);
        volt_trainer_destroy(t);
    }
    volt_dataset_destroy(ds);
    free(x);
}

/* ---- faults ---------------------------------------------------------------------------------------- */
/* Rank 1 leaves the run: before its first collective (at_batch < 0) or when batch at_batch
 * starts (mid-training: the others are then inside forward/backward hooks or the optimizer
 * step). The others must get VOLT_ERR_TIMEOUT within about the configured time, with a
 * message naming the rank, the call, its sequence number and the unit. Rank 1's process stays
 * (it waits in a barrier of MPI_COMM_WORLD that every rank reaches once its fit returned): a
 * process that ended would send its leave notice, and the others would fail 2 s after it
 * instead (test_fault_stepfail_*). */
static volt_status leave_on_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    const int *at = self;
    if (volt_trainer_rank(t) == 1 && i == *at) {
        printf("rank 1: leaving the run at batch %lld\n", (long long)i);
        return volt_trainer_fail(t, VOLT_ERR_STATE, "rank 1 leaves");
    }
    return VOLT_OK;
}
static const volt_callback_ops leave_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Leave",
                                             .on_train_batch_start = leave_on_batch };

static void test_fault(const char *name, int at_batch) {
    const char *to = getenv("VOLT_COMM_TIMEOUT");
    const double timeout = to ? atof(to) : 300;
    CHECK(timeout > 0 && timeout <= 10, "run with a short VOLT_COMM_TIMEOUT (got %s)", to ? to : "unset");
    volt_dataset *ds = make_data();
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world);
    if (t && at_batch >= 0) CHECK_OK(volt_trainer_add_callback(t, &leave_ops, &at_batch));
    if (g_rank == 1 && at_batch < 0) {
        printf("rank 1: leaving before the first collective\n");
        fflush(stdout);
    } else if (g_rank == 1 && t && l) {
        CHECK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL) == VOLT_ERR_STATE, "rank 1 left");
    } else if (t && l) {
        double t0 = vtest_now();
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
        double el = vtest_now() - t0;
        const char *msg = volt_trainer_errmsg(t);
        CHECK(st == VOLT_ERR_TIMEOUT, "rank %d: fit returned %s: %s", g_rank, volt_status_str(st), msg);
        char want[64];
        snprintf(want, sizeof want, "rank %d: ", g_rank);
        CHECK(strstr(msg, want) && strstr(msg, "timed out after") && strstr(msg, " #"), "message names rank, call and "
              "sequence: %s", msg);
        /* and the call site, by its name: before the first batch the ckpt_path agreement that starts a call (its
         * broadcast, or on the root, whose broadcast completes alone, its verdict); later a unit's collective or
         * one of the training loop's votes */
        static const char *const early[] = { "(ckpt_path agreement)", "(verdict flags)", NULL };
        static const char *const late[] = { "(unit '", "(skip epoch vote)", "(stop vote)", NULL };
        bool named = false;
        for (const char *const *n = at_batch < 0 ? early : late; *n; n++) named = named || strstr(msg, *n);
        CHECK(named && (at_batch >= 0 || strstr(msg, "ckpt_path: the ranks could not agree")),
              "message names the call site (%s): %s", at_batch < 0 ? "the ckpt_path agreement" : "a unit or a loop vote", msg);
        /* the first rank to time out does so after `timeout`; one blocked behind it at most twice */
        CHECK(el >= timeout * 0.9 && el < 2 * timeout + 5, "rank %d: failed after %.2f s (timeout %g s)", g_rank, el, timeout);
        printf("rank %d: %s after %.2f s: %s\n", g_rank, volt_status_str(st), el, msg);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);   /* rank 1 stays until the others timed out */
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

static volt_status die_on_batch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    if (volt_trainer_rank(t) == 1 && i == 2) {
        fprintf(stderr, "rank 1: simulated crash (exit without MPI_Finalize)\n");
        _exit(3);
    }
    return VOLT_OK;
}
static const volt_callback_ops die_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Die",
                                           .on_train_batch_start = die_on_batch };

static void test_fault_exit(void) {
    volt_dataset *ds = make_data();
    mlp m = { 0 };
    volt_trainer *t = make_trainer("ddp", vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world);
    if (t) CHECK_OK(volt_trainer_add_callback(t, &die_ops, NULL));
    volt_status st = t && l ? volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL) : VOLT_ERR_STATE;
    /* normally mpirun ends the job before this; if not, the comm timeout must, naming the call
     * (tests/fault_dead_rank.sh reads this line) */
    printf("rank %d: fit returned %s: %s\n", g_rank, volt_status_str(st), t ? volt_trainer_errmsg(t) : "");
    CHECK(st == VOLT_ERR_TIMEOUT && strstr(volt_trainer_errmsg(t), "timed out after"),
          "a dead rank is a VOLT_ERR_TIMEOUT naming the collective, got %s", volt_status_str(st));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}
#endif /* VOLT_HAVE_MPI */

/* ---- resharding ---------------------------------------------------------------------------------------- */
/* Where a save or resume ran: its parameters on $VOLT_ACCELERATOR (when set), and under a
 * distributed strategy the comm that served it (rank 0 prints "comm nccl on device cuda";
 * tests/gpu_sim_nccl.cmake greps these lines, so a run that fell back to another device or
 * comm fails). A checkpoint saved on one device and resumed on another is only a cross-device
 * test if both ends really ran where they were told to. */
static void check_placement(volt_trainer *t) {
    volt_params *ps = t ? volt_trainer_params(t) : NULL;
    const volt_tensor *p = ps && volt_params_count(ps) > 0 ? volt_params_at(ps, 0) : NULL;
    const char *have = p && p->device ? p->device->be->name : "?", *want = getenv("VOLT_ACCELERATOR");
    CHECK(!want || !*want || !strcmp(want, have), "parameters on '%s', VOLT_ACCELERATOR is '%s'", have, want);
    if (t && volt_trainer_rank(t) == 0) printf("params on device %s\n", have);
#ifdef VOLT_HAVE_MPI
    if (t && volt__dist_comm(t->strategy)) check_comm_device(t);
#endif
}

enum { SAVE_AT_BATCH = 5 };   /* after the 3rd optimizer step, mid-epoch (10 batches) */
typedef struct { const char *path; } saver;
static volt_status save_and_stop(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    saver *s = self;
    if (i != SAVE_AT_BATCH && i != SAVE_AT_BATCH - 2) return VOLT_OK;
    /* saved twice to the same path: the second save replaces the first one's shards */
    volt_status st = volt_trainer_save_checkpoint(t, s->path);
    return st < 0 ? st : i == SAVE_AT_BATCH ? VOLT_STOP : VOLT_OK;
}
static const volt_callback_ops saver_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Saver",
                                             .on_train_batch_end = save_and_stop };

/* Shard folders "<base>.shards-*" next to path, and the files in the one the index names. */
static int count_shard_dirs(const char *path) {
    char dir[4096], base[1024];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    snprintf(base, sizeof base, "%s.shards-", slash ? slash + 1 : path);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, base, strlen(base)) == 0;
    if (d) closedir(d);
    return n;
}

static int shard_dir_files(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    char pat[1024];
    snprintf(pat, sizeof pat, "%s.shards-", slash ? slash + 1 : path);
    char parent[4096];
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    DIR *d = opendir(parent);
    dir[0] = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, pat, strlen(pat))) snprintf(dir, n, "%.2000s/%.1000s", parent, e->d_name);
    if (d) closedir(d);
    if (!dir[0]) return -1;
    DIR *s = opendir(dir);
    int files = 0;
    for (struct dirent *e; s && (e = readdir(s));) files += e->d_name[0] != '.';
    if (s) closedir(s);
    return files;
}

static bool copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t k;
    bool ok = a && b;
    while (ok && (k = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

/* A damaged or incomplete sharded checkpoint: a clear error naming the shard, model untouched. */
static void test_reshard_corrupt(const char *path) {
    char dir[4096], cpath[4096], f1[4200], f2[4400], c1[4400];
    const int n = shard_dir_files(path, dir, sizeof dir);
    CHECK(n >= 2, "a sharded checkpoint with at least 2 shards at %s (%d)", path, n);
    if (n < 2) return;
    /* a copy of the checkpoint (index and folder, same names) in another directory */
    snprintf(cpath, sizeof cpath, "%.2000s/%.1000s", vtest_tmpdir(), strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    const char *dbase = strrchr(dir, '/') + 1;
    char want[4200];
    snprintf(want, sizeof want, "%.2000s/%.1000s", vtest_tmpdir(), dbase);
    mkdir(want, 0777);
    CHECK(copy_file(path, cpath), "copy index");
    volt_st_file *idx = NULL;
    char err[512];
    CHECK_OK(volt_st_open(path, &idx, err, sizeof err));
    const char *js = idx ? volt_st_meta(idx, "volt.shards") : NULL;
    CHECK(js && strstr(js, dbase), "the index names its shard folder %s", dbase);
    volt_st_close(idx);
    for (int r = 0; r < n; r++) {
        snprintf(f1, sizeof f1, "%.4000s/rank%05d-of-%05d.safetensors", dir, r, n);
        snprintf(f2, sizeof f2, "%.4150s/rank%05d-of-%05d.safetensors", want, r, n);
        CHECK(copy_file(f1, f2), "copy shard %d", r);
    }
    snprintf(c1, sizeof c1, "%.4150s/rank%05d-of-%05d.safetensors", want, 1, n);
    volt_dataset *ds = make_data();
    for (int round = 0; round < 2; round++) {
        if (round == 0) {   /* flip a byte in the data of shard 1 */
            FILE *fp = fopen(c1, "r+b");
            CHECK(fp != NULL, "open %s", c1);
            if (!fp) break;
            fseek(fp, -5, SEEK_END);
            int ch = fgetc(fp);
            fseek(fp, -5, SEEK_END);
            fputc(ch ^ 0x40, fp);
            fclose(fp);
        } else unlink(c1);   /* a missing shard */
        mlp m = { 0 };
        volt_trainer *t = make_trainer("single", vtest_tmpdir());
        volt_loader *l = make_loader(ds, GB);
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, cpath);
        const char *msg = volt_trainer_errmsg(t);
        CHECK(st == (round == 0 ? VOLT_ERR_CORRUPT : VOLT_ERR_IO), "damaged shard: %s (%s)", volt_status_str(st), msg);
        CHECK(strstr(msg, "rank00001-of-") != NULL, "the message names the shard: %s", msg);
        CHECK(m.n_losses == 0, "no training from a damaged checkpoint");
        printf("damaged shard (%s): %s\n", round == 0 ? "flipped byte" : "missing", msg);
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
    }
    /* an unsharded save over the sharded checkpoint takes its shard folder away too */
    mlp m = { 0 };
    volt_trainer *t = make_trainer("single", vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB);
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t, cpath));
    CHECK(access(want, F_OK) != 0, "the replaced checkpoint's shard folder %s is gone", want);
    volt_st_file *f = NULL;
    CHECK_OK(volt_st_open(cpath, &f, err, sizeof err));
    CHECK(f && !volt_st_meta(f, "volt.shards") && volt_st_count(f) > 0, "an ordinary checkpoint now");
    volt_st_close(f);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

static void test_reshard_save(const char *name, const char *path) {
    volt_dataset *ds = make_data();
    mlp m = { 0 };
    int world = 1;
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    if (t) world = volt_trainer_world_size(t);
    volt_loader *l = make_loader(ds, GB / world);
    saver sv = { path };
    if (volt_trainer_rank(t) == 0) {   /* a clean start: no checkpoint, no shard folders from earlier runs */
        volt_checkpoint_remove(path);
        char dir[4096];
        while (shard_dir_files(path, dir, sizeof dir) >= 0) {
            DIR *d = opendir(dir);
            char f[8200];
            for (struct dirent *e; d && (e = readdir(d));)
                if (e->d_name[0] != '.') { snprintf(f, sizeof f, "%s/%s", dir, e->d_name); unlink(f); }
            if (d) closedir(d);
            if (rmdir(dir) != 0) break;
        }
    }
    if (t) CHECK_OK(volt_trainer_add_callback(t, &saver_ops, &sv));
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "%s fit with save: %s", name, volt_trainer_errmsg(t));
    CHECK(volt_trainer_global_step(t) == 3, "stopped after step %lld", (long long)volt_trainer_global_step(t));
    check_placement(t);
    /* the weights alone, streamed on rank 0: exactly the (gathered) final weights */
    char exp[4096];
    snprintf(exp, sizeof exp, "%s.export.safetensors", path);
    CHECK_OK(volt_trainer_export_full(t, exp));
    if (volt_trainer_rank(t) == 0) {
        CHECK(access(path, R_OK) == 0, "checkpoint %s written", path);
        printf("saved %s under %s on %d ranks at step %lld\n", path, name, world, (long long)volt_trainer_global_step(t));
        const int shards = count_shard_dirs(path);
        if (strcmp(name, "ddp") && strcmp(name, "single") && world > 1) {
            CHECK(shards == 1, "%s: %d shard folders next to %s (the second save must replace the first)", name, shards, path);
            char dir[4096];
            CHECK(shard_dir_files(path, dir, sizeof dir) == world, "%s: shard folder %s holds one file per rank", name, dir);
        } else CHECK(shards == 0, "%s: unsharded checkpoint, %d shard folders", name, shards);
        volt_st_file *f = NULL;
        char err[512];
        CHECK(volt_st_open(exp, &f, err, sizeof err) == VOLT_OK && volt_st_verify_all(f, err, sizeof err) == VOLT_OK, "export: %s", err);
        volt_params *ps = volt_trainer_params(t);
        int same = 0;
        for (int i = 0; f && i < volt_params_count(ps); i++) {
            volt_tensor *p = volt_params_at(ps, i);
            volt_st_info info;
            float *hv = malloc(volt_tensor_bytes(p));
            volt_tensor_to_host(p, hv);
            same += volt_st_find(f, p->name, &info) == VOLT_OK && info.dtype == VOLT_F32 && volt_shape_eq(info.shape, p->shape) &&
                    !memcmp(info.data, hv, info.nbytes);
            free(hv);
        }
        CHECK(f && same == volt_params_count(ps) && volt_st_count(f) == same, "export: %d of %d parameters bitwise equal",
              same, volt_params_count(ps));
        volt_st_close(f);
        /* the shapes from the checkpoint's header alone: the shard index, or the single file */
        int shapes = 0;
        for (int i = 0; i < volt_params_count(ps); i++) {
            volt_shape sh = { 0 };
            shapes += volt_checkpoint_param_shape(path, volt_params_at(ps, i)->name, &sh, err, sizeof err) == VOLT_OK &&
                      volt_shape_eq(sh, volt_params_at(ps, i)->shape);
        }
        CHECK(shapes == volt_params_count(ps), "%s: volt_checkpoint_param_shape right for %d of %d parameters (%s)", name, shapes,
              volt_params_count(ps), err);
        volt_shape sh;
        CHECK(volt_checkpoint_param_shape(path, "no.such", &sh, err, sizeof err) == VOLT_ERR_NOT_FOUND && strstr(err, "no.such"),
              "%s: a missing parameter: %s", name, err);
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

static void test_reshard_resume(const char *name, const char *path) {
    volt_dataset *ds = make_data();
    ref_run ref;
    run_single(ds, &ref);
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    const int world = t ? volt_trainer_world_size(t) : 1;
    volt_loader *l = make_loader(ds, GB / world);
    if (!t || !l || !ref.params) return;
    volt__st_deferred_read_bytes(true);
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path);
    const uint64_t applied = volt__st_deferred_read_bytes(false);
    CHECK(st == VOLT_OK, "%s resume: %s", name, volt_trainer_errmsg(t));
    check_placement(t);
    /* what the load read to apply: every parameter whole (each rank applies the full values),
     * and of the optimizer states only the slices this rank holds (the shards were saved by
     * another world size); the check before read every shard through */
    if (st == VOLT_OK && t->opt) {
        uint64_t owned = 0, saved = 0;   /* state elements this rank holds; the saved units' elements (with padding) */
        for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
            int64_t lo = 0, hi = 0;
            if (volt_optimizer_state_raw(t->opt, u, 0, &lo, &hi)) owned += (uint64_t)(hi - lo);
        }
        volt_st_file *ix = NULL;
        char err[256];
        cJSON *js = volt_st_open(path, &ix, err, sizeof err) == VOLT_OK ? cJSON_Parse(volt_st_meta(ix, "volt.shards")) : NULL;
        const cJSON *un;
        cJSON_ArrayForEach(un, cJSON_GetObjectItemCaseSensitive(js, "units"))
            saved += (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(un, "numel"));
        cJSON_Delete(js);
        volt_st_close(ix);
        const uint64_t K = (uint64_t)volt_optimizer_state_count(t->opt), most = sizeof(float) * (saved + K * owned);
        CHECK(saved > 0 && applied <= most && applied > sizeof(float) * saved,
              "%s on %d: the load read %llu bytes to apply, at most %llu (the %llu saved parameter elements, and of each of "
              "the %llu states the %llu elements this rank holds; all the shards' states: %llu)", name, world,
              (unsigned long long)applied, (unsigned long long)most, (unsigned long long)saved, (unsigned long long)K,
              (unsigned long long)owned, (unsigned long long)(sizeof(float) * (saved + K * saved)));
        if (volt_trainer_rank(t) == 0)
            printf("reshard %s on %d: read %llu bytes to apply, at most %llu (reading every shard's states: %llu)\n", name,
                   world, (unsigned long long)applied, (unsigned long long)most, (unsigned long long)(sizeof(float) * (saved + K * saved)));
    }
    CHECK(volt_trainer_global_step(t) == STEPS, "resumed run ends at step %lld", (long long)volt_trainer_global_step(t));
    CHECK(m.n_losses == ACC * (STEPS - 3), "resumed mid-epoch: %d micro-steps run", m.n_losses);
    float *mine = malloc(sizeof(float) * (size_t)ref.n);
    copy_params(volt_trainer_params(t), mine);
    double rel = 0, worst = tol_used(mine, ref.params, ref.n, &rel);
    CHECK(worst <= 1, "%s on %d: final params differ from the uninterrupted single run: %.3g of the tolerance", name, world, worst);
    if (volt_trainer_rank(t) == 0)
        printf("reshard %s on %d rank(s) from %s: param rel err %.2e, %.0f%% of the tolerance, vs uninterrupted single\n",
               name, world, path, rel, 100 * worst);
    free(mine);
    free(ref.params);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

#ifdef VOLT_HAVE_MPI
/* ---- one verdict: each rank checks only what it applies ------------------------------------------
 * The reshard fixture (fsdp on 3 ranks) resumed under `name` on this many ranks from a copy. A
 * good resume first: each rank checked (read against the crcs) only the tensors it applies, less
 * than the shards hold. Then damage the copy: a flipped byte in an optimizer state that exactly
 * one rank other than 0 applies (only that rank can see it), and a shard cut short (a header
 * every rank reads): every rank fails with the same message, naming the shard file (and the
 * tensor), and no rank's parameters changed. */
static bool verdict_reads(volt_trainer *t, const cJSON *units, const char *uname, int shard, int k) {
    const cJSON *un = NULL, *x;
    cJSON_ArrayForEach(x, units) if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "name")), uname)) un = x;
    const cJSON *rg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(un, "ranges"), shard);
    const int64_t slo = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(rg, 0)), shi = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(rg, 1));
    volt_params *ps = t->ps;
    for (int i = 0; un && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        if (strcmp(volt_unit_name(p->unit), uname)) continue;
        int64_t lo = 0, hi = 0, off = volt_param_offset(p), n = volt_tensor_numel(p);
        if (!volt_optimizer_state_raw(t->opt, volt_unit_index(p->unit), k, &lo, &hi)) continue;
        const int64_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;
        if (a < b && (a > slo ? a : slo) < (b < shi ? b : shi)) return true;   /* the saved layout is the model's */
    }
    return false;
}

/* Flip the byte at `at` of file; the check hook does it on one rank after the check of g_vd_when. */
static void vd_flip(const char *file, long at) {
    FILE *fp = at > 0 ? fopen(file, "r+b") : NULL;
    int ch = fp && fseek(fp, at, SEEK_SET) == 0 ? fgetc(fp) : EOF;
    CHECK(ch != EOF && fseek(fp, at, SEEK_SET) == 0 && fputc(ch ^ 0x40, fp) != EOF, "flip byte %ld of %s", at, file);
    if (fp) fclose(fp);
}
static char g_vd_when[1400], g_vd_file[1400];
static long g_vd_at;
static void verdict_flip(const char *path, void *ctx) {
    (void)ctx;
    if (strcmp(path, g_vd_when)) return;
    vd_flip(g_vd_file, g_vd_at);
    g_vd_when[0] = 0;
}

static void test_verdict(const char *name, const char *path) {
    char dir[4096], cdir[1000], cpath[1200], shard[8][1400], orig[8][4200], err[512];
    const int n = shard_dir_files(path, dir, sizeof dir);
    CHECK(n >= 2 && n <= 8, "a sharded checkpoint with 2 to 8 shards at %s (%d)", path, n);
    if (n < 2 || n > 8) return;
    snprintf(cdir, sizeof cdir, "%.900s/verdict_%.20s_np%d", vtest_tmpdir(), name, g_world);
    snprintf(cpath, sizeof cpath, "%.1000s/%.90s", cdir, strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    char sdir[1200];
    snprintf(sdir, sizeof sdir, "%.1000s/%.90s", cdir, strrchr(dir, '/') + 1);
    for (int r = 0; r < n; r++) {
        snprintf(orig[r], sizeof orig[r], "%.4000s/rank%05d-of-%05d.safetensors", dir, r, n);
        snprintf(shard[r], sizeof shard[r], "%.1200s/rank%05d-of-%05d.safetensors", sdir, r, n);
    }
    if (g_rank == 0) {
        vtest_fresh_dir(cdir);
        mkdir(sdir, 0755);
        CHECK(copy_file(path, cpath), "copy the index");
        for (int r = 0; r < n; r++) CHECK(copy_file(orig[r], shard[r]), "copy shard %d", r);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    volt_st_file *ix = NULL;
    cJSON *js = volt_st_open(path, &ix, err, sizeof err) == VOLT_OK ? cJSON_Parse(volt_st_meta(ix, "volt.shards")) : NULL;
    volt_st_close(ix);
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(js, "units");
    CHECK(units != NULL, "the fixture's shard index");
    /* the shards' tensor bytes: the parameters', and the optimizer states' of each shard */
    uint64_t params_bytes = 0, state_bytes[8] = { 0 }, all = 0;
    for (int r = 0; r < n; r++) {
        volt_st_file *f = NULL;
        CHECK_OK(volt_st_open(orig[r], &f, err, sizeof err));
        for (int i = 0; f && i < volt_st_count(f); i++) {
            volt_st_info info;
            volt_st_find(f, volt_st_name(f, i), &info);
            *(strncmp(volt_st_name(f, i), "params.", 7) ? &state_bytes[r] : &params_bytes) += info.nbytes;
            all += info.nbytes;
        }
        volt_st_close(f);
    }
    volt_dataset *ds = make_data();
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    volt_loader *l = make_loader(ds, GB / g_world);
    if (!t || !l || !units) return;
    volt__st_check_read_bytes(true);
    volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, cpath);
    const uint64_t checked = volt__st_check_read_bytes(false);
    CHECK(st == VOLT_OK, "%s resume from the copy: %s", name, volt_trainer_errmsg(t));
    /* same world: this rank's own shard's states and the parameters; resharding: less than all */
    const bool same = n == g_world && strcmp(name, "ddp");
    CHECK(checked > 0 && checked < all && (!same || checked <= params_bytes + state_bytes[g_rank]),
          "%s on %d: rank %d checked %llu bytes; the shards hold %llu (parameters %llu, its own shard's states %llu)", name,
          g_world, g_rank, (unsigned long long)checked, (unsigned long long)all, (unsigned long long)params_bytes,
          (unsigned long long)state_bytes[g_rank % n]);
    printf("verdict %s np%d: rank %d checked %llu of the shards' %llu bytes\n", name, g_world, g_rank,
           (unsigned long long)checked, (unsigned long long)all);
    /* a state tensor of one shard that exactly one rank applies: rank 1 where one is, else another but 0 */
    char victim_tensor[300] = "";
    int victim = -1, vshard = -1;
    for (int pass = 0; pass < 2 && victim < 0; pass++)
    for (int s = 0; s < n && victim < 0; s++)
        for (int u = 0; u < volt_params_unit_count(t->ps) && victim < 0; u++) {
            const char *un = volt_unit_name(volt_params_unit_at(t->ps, u));
            int mine = verdict_reads(t, units, un, s, 0), readers[64] = { 0 };
            MPI_Allgather(&mine, 1, MPI_INT, readers, 1, MPI_INT, MPI_COMM_WORLD);
            int cnt = 0, who = -1;
            for (int r = 0; r < g_world; r++) if (readers[r]) { cnt++; who = r; }
            if (cnt == 1 && (pass ? who > 0 : who == 1)) {
                victim = who;
                vshard = s;
                snprintf(victim_tensor, sizeof victim_tensor, "optimizer.%s.%.200s", volt_optimizer_state_name(t->opt, 0), un);
            }
        }
    CHECK(victim > 0, "%s on %d: some shard's state is applied by one rank other than 0 alone", name, g_world);
    int64_t n0 = volt_params_numel(volt_trainer_params(t));
    float *before = malloc(sizeof(float) * (size_t)n0), *after = malloc(sizeof(float) * (size_t)n0);
    copy_params(volt_trainer_params(t), before);
    /* the middle byte of the victim's tensor */
    long at = -1;
    if (victim > 0) {
        volt_st_file *f = NULL;
        volt_st_info info;
        if (volt_st_open(shard[vshard], &f, err, sizeof err) == VOLT_OK && volt_st_find(f, victim_tensor, &info) == VOLT_OK)
            at = (long)(f->base + (uint64_t)((const unsigned char *)info.data - f->data) + info.nbytes / 2);
        volt_st_close(f);
    }
    /* rounds: a flipped byte in the victim's tensor; a shard cut short; the victim's tensor
     * changed on the victim's rank after its check (only that rank's apply fails) */
    static const char *what[3] = { "flipped byte", "cut short", "changed after the check" };
    for (int round = 0; victim > 0 && round < 3; round++) {
        const int bad = round == 1 ? 1 : vshard;
        if (round == 2 && g_rank == victim) {
            snprintf(g_vd_when, sizeof g_vd_when, "%s", shard[n - 1]);   /* after the last shard's check */
            snprintf(g_vd_file, sizeof g_vd_file, "%s", shard[bad]);
            g_vd_at = at;
            volt__st_set_check_hook(verdict_flip, NULL);
        }
        if (g_rank == 0 && round < 2) {
            if (round == 0) vd_flip(shard[bad], at);
            else {
                struct stat sb;
                CHECK(stat(shard[bad], &sb) == 0 && truncate(shard[bad], sb.st_size - 16) == 0, "cut shard %d short", bad);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const int losses = m.n_losses;
        st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, cpath);
        volt__st_set_check_hook(NULL, NULL);
        char msg[1024], msg0[1024];
        snprintf(msg, sizeof msg, "%s", volt_trainer_errmsg(t));
        memcpy(msg0, msg, sizeof msg);
        MPI_Bcast(msg0, sizeof msg0, MPI_CHAR, 0, MPI_COMM_WORLD);
        static const char *says[3] = { "crc mismatch", "truncated", "changed after it was checked" };
        CHECK(st == VOLT_ERR_CORRUPT && strstr(msg, shard[bad]) && strstr(msg, says[round]) && (round == 1 || strstr(msg, victim_tensor)),
              "%s np%d rank %d: %s: %s (%s)", name, g_world, g_rank, what[round], msg, volt_status_str(st));
        char found[100];
        snprintf(found, sizeof found, "(rank %d of %d found it; %s)", round == 1 ? 0 : victim, g_world,
                 round < 2 ? "no rank applied anything" : "every rank drops its model");
        CHECK(strstr(msg, found) != NULL, "rank %d: the message says who found it (%s): %s", g_rank, found, msg);
        CHECK(!strcmp(msg, msg0), "rank %d's message is rank 0's:\n  %s\n  %s", g_rank, msg, msg0);
        CHECK(m.n_losses == losses, "rank %d: no training from a damaged checkpoint", g_rank);
        if (round == 2) CHECK(volt_trainer_params(t) == NULL, "rank %d: the half-replaced model is dropped on every rank", g_rank);
        else {
            CHECK(volt_trainer_params(t) != NULL, "rank %d: the model is kept", g_rank);
            if (volt_trainer_params(t)) copy_params(volt_trainer_params(t), after);
            CHECK(!memcmp(before, after, sizeof(float) * (size_t)n0), "rank %d: %s: the parameters are untouched", g_rank, what[round]);
        }
        if (g_rank == 0) {
            printf("verdict %s np%d, %s: %s\n", name, g_world, what[round], msg);
            CHECK(copy_file(orig[bad], shard[bad]), "restore shard %d", bad);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* a single file under the same strategy: the copy's state at step 3 saved unsharded by a
     * single run on rank 0 (that loads it and trains nothing); each rank checks and reads only
     * the optimizer states of its own range, and the resumed run ends bitwise where the resume
     * from the shards did */
    char spath[1300];
    snprintf(spath, sizeof spath, "%.1200s.single", cpath);
    if (g_rank == 0) {
        g_max_steps = 3;
        mlp m1 = { 0 };
        volt_trainer *t1 = make_trainer("single", vtest_tmpdir());
        volt_loader *l1 = make_loader(ds, GB);
        g_max_steps = 0;
        CHECK(t1 && l1 && volt_trainer_fit(t1, &mlp_ops, &m1, l1, NULL, cpath) == VOLT_OK && m1.n_losses == 0,
              "single loads the shards at step 3: %s", t1 ? volt_trainer_errmsg(t1) : "");
        CHECK(t1 && volt_trainer_save_checkpoint(t1, spath) == VOLT_OK, "save %s: %s", spath, t1 ? volt_trainer_errmsg(t1) : "");
        volt_trainer_destroy(t1);
        volt_loader_destroy(l1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t file_bytes = 0;
    volt_st_file *sf = NULL;
    CHECK_OK(volt_st_open(spath, &sf, err, sizeof err));
    for (int i = 0; sf && i < volt_st_count(sf); i++) {
        volt_st_info info;
        volt_st_find(sf, volt_st_name(sf, i), &info);
        file_bytes += info.nbytes;
    }
    volt_st_close(sf);
    mlp m2 = { 0 };
    volt_trainer *t2 = make_trainer(name, vtest_tmpdir());
    volt__st_check_read_bytes(true);
    st = t2 ? volt_trainer_fit(t2, &mlp_ops, &m2, l, NULL, spath) : VOLT_ERR_STATE;
    const uint64_t checked1 = volt__st_check_read_bytes(false);
    CHECK(st == VOLT_OK, "%s resume from the single file: %s", name, t2 ? volt_trainer_errmsg(t2) : "");
    /* a state tensor is per parameter here: a rank whose range touches it checks it whole */
    unsigned long long sum = 0, mine1 = (unsigned long long)checked1;
    MPI_Allreduce(&mine1, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(checked1 > 0 && checked1 <= file_bytes && sum < (unsigned long long)g_world * file_bytes,
          "%s on %d: rank %d checked %llu bytes of the single file's %llu, the ranks %llu of %llu", name, g_world, g_rank,
          mine1, (unsigned long long)file_bytes, sum, (unsigned long long)g_world * file_bytes);
    if (st == VOLT_OK) copy_params(volt_trainer_params(t2), after);
    CHECK(st == VOLT_OK && !memcmp(before, after, sizeof(float) * (size_t)n0),
          "rank %d: resumed from the single file, the run ends bitwise where the resume from the shards did", g_rank);
    printf("verdict %s np%d: from the single file rank %d checked %llu of %llu bytes\n", name, g_world, g_rank,
           (unsigned long long)checked1, (unsigned long long)file_bytes);
    volt_trainer_destroy(t2);
    free(before);
    free(after);
    cJSON_Delete(js);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

/* A rank that stalls inside the load (rank 1 waits in its first check until the others' fits have
 * returned: they time out in the load's verdict): the others fail within the timeout with an error
 * naming the checkpoint, nothing applied, never a hang; rank 1 fails too once it wakes (its
 * verdict times out). Every rank then meets the others in a world barrier once all have printed
 * their results (tests/fault_verdict.sh reads them): the finalize after a broken collective may
 * end a process with status 1 (comm_mpi.c's watchdog), and mpirun then ends the others. The
 * stall ends on the others' files, not after a fixed time: on a loaded machine the others may
 * reach the verdict late. */
static bool g_stall;
static char g_done_fmt[600];   /* "<dir>/verdict_done_%d": a rank's fit has returned */
static void stall_in_check(const char *path, void *ctx) {
    (void)path;
    (void)ctx;
    if (!g_stall) return;
    g_stall = false;
    printf("rank 1: stalling inside the load's check until the others' fits returned\n");
    fflush(stdout);
    const double t0 = vtest_now();
    for (bool all = false; !all && vtest_now() - t0 < 30; usleep(20000)) {
        all = true;
        for (int r = 0; r < g_world; r++) {
            char f[640];
            snprintf(f, sizeof f, g_done_fmt, r);
            if (r != 1 && access(f, F_OK) != 0) all = false;
        }
    }
}

static void test_fault_verdict(const char *name, const char *path) {
    const char *to = getenv("VOLT_COMM_TIMEOUT");
    const double timeout = to ? atof(to) : 300;
    CHECK(timeout > 0 && timeout <= 10, "run with a short VOLT_COMM_TIMEOUT (got %s)", to ? to : "unset");
    snprintf(g_done_fmt, sizeof g_done_fmt, "%s/verdict_done_%%d", vtest_tmpdir());
    char done[640];
    snprintf(done, sizeof done, g_done_fmt, g_rank);
    remove(done);   /* an earlier run's */
    volt_dataset *ds = make_data();
    mlp m = { 0 };
    volt_trainer *t = make_trainer(name, vtest_tmpdir());   /* MPI initialised from here */
    volt_loader *l = make_loader(ds, GB / g_world);
    MPI_Barrier(MPI_COMM_WORLD);   /* every rank's earlier file gone before rank 1 looks for them */
    if (g_rank == 1) {
        g_stall = true;
        volt__st_set_check_hook(stall_in_check, NULL);
    }
    const double t0 = vtest_now();
    volt_status st = t && l ? volt_trainer_fit(t, &mlp_ops, &m, l, NULL, path) : VOLT_ERR_STATE;
    const double el = vtest_now() - t0;
    volt__st_set_check_hook(NULL, NULL);
    if (g_rank != 1) {
        FILE *f = fopen(done, "w");
        CHECK(f != NULL, "writing %s", done);
        if (f) fclose(f);
    }
    const char *msg = t ? volt_trainer_errmsg(t) : "";
    printf("rank %d: fit returned %s after %.2f s: %s\n", g_rank, volt_status_str(st), el, msg);
    fflush(stdout);
    if (g_rank != 1) {
        CHECK(st == VOLT_ERR_TIMEOUT && strstr(msg, "could not agree") && strstr(msg, path),
              "rank %d: a stalled rank during the load is a timeout naming the checkpoint: %s (%s)", g_rank, msg, volt_status_str(st));
        CHECK(el < 2 * timeout + 5, "rank %d: failed after %.2f s (timeout %g s)", g_rank, el, timeout);
    } else CHECK(st < 0, "rank 1: its load failed too: %s", msg);
    CHECK(m.n_losses == 0, "rank %d: no training", g_rank);
    MPI_Barrier(MPI_COMM_WORLD);   /* every rank has printed its results */
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

/* ---- ZeRO: a checkpoint saved right after a step ------------------------------------------------
 * ModelCheckpoint saves from on_train_batch_end, between the step that left ZeRO's all-gathers
 * in flight and the forward that would wait for them. The probe below saves there: the
 * gathers were in flight when it was called, none is after save_checkpoint returned, and the
 * params the rank then holds are whole: bitwise the same on every rank, within parity of
 * single at the same step, and bitwise what the saved (sharded) checkpoint loads back to. */
enum { PROBE_AT_BATCH = 3 };   /* the end of the 2nd accumulation cycle: right after step 2 */
typedef struct {
    const char *path;     /* NULL: only copy the params (the single reference) */
    float vals[NPARAM];   /* every parameter as this rank held it after the save */
    int in_flight_before, in_flight_after, stale_after;
    int params_before, params_after;   /* after step 3: around volt_trainer_params (a callback reading them) */
    bool ran;
} ckpt_probe;
static volt_status probe_after_step(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    ckpt_probe *p = self;
    const dist *d = t->world > 1 ? t->strategy->impl : NULL;
    if (i == PROBE_AT_BATCH + 2) {
        for (int u = 0; d && u < d->n_units; u++) p->params_before += d->units[u].gather_req != NULL;
        (void)volt_trainer_params(t);
        for (int u = 0; d && u < d->n_units; u++) p->params_after += d->units[u].gather_req != NULL || volt__unit_stale(d->units[u].u);
    }
    if (i != PROBE_AT_BATCH) return VOLT_OK;
    p->ran = true;
    for (int u = 0; d && u < d->n_units; u++) p->in_flight_before += d->units[u].gather_req != NULL;
    if (p->path) VOLT_TRY(volt_trainer_save_checkpoint(t, p->path));
    for (int u = 0; d && u < d->n_units; u++) {
        p->in_flight_after += d->units[u].gather_req != NULL;
        p->stale_after += volt__unit_stale(d->units[u].u);
    }
    copy_params(t->ps, p->vals);   /* t->ps, not volt_trainer_params (which waits itself) */
    return VOLT_OK;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "CkptProbe",
                                             .on_train_batch_end = probe_after_step };

static void test_zero_ckpt(const char *name) {
    volt_dataset *ds = make_data();
    static ckpt_probe ref, mine, loaded;
    memset(&ref, 0, sizeof ref);
    memset(&mine, 0, sizeof mine);
    char path[4096];
    snprintf(path, sizeof path, "%s/zero_ckpt_%s.safetensors", vtest_tmpdir(), name);
    mine.path = path;
    for (int pass = 0; pass < 2; pass++) {   /* single on the global batch (no MPI), then the strategy */
        mlp m = { 0 };
        const bool single = pass == 0;
        volt_trainer *t = make_trainer(single ? "single" : name, vtest_tmpdir());
        volt_loader *l = make_loader(ds, single ? GB : GB / g_world);
        if (!t || !l) return;
        CHECK_OK(volt_trainer_add_callback(t, &probe_ops, single ? &ref : &mine));
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
        CHECK(st == VOLT_OK, "%s fit: %s", single ? "single" : name, volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
    }
    CHECK(ref.ran && mine.ran, "the probe ran");
    CHECK(mine.in_flight_before == 3, "%s: %d of 3 gathers in flight when on_train_batch_end ran after the step", name,
          mine.in_flight_before);
    CHECK(mine.in_flight_after == 0 && mine.stale_after == 0, "%s: after save_checkpoint %d gathers in flight, %d units stale",
          name, mine.in_flight_after, mine.stale_after);
    CHECK(mine.params_before == 3 && mine.params_after == 0, "%s: after step 3, %d gathers in flight before volt_trainer_params, "
          "%d in flight or stale after it (want 3, 0)", name, mine.params_before, mine.params_after);
    /* whole params: every rank the same bits (a unit not gathered yet would hold the other
     * ranks' slices from before the step), and single's values at the same step */
    static float r0[NPARAM];
    memcpy(r0, mine.vals, sizeof r0);
    MPI_Bcast(r0, NPARAM, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, mine.vals, sizeof r0), "%s: the params after the save differ between ranks", name);
    double rel = 0, worst = tol_used(mine.vals, ref.vals, NPARAM, &rel);
    CHECK(worst <= 1, "%s: params after step 2 differ from single by %.3g of the tolerance", name, worst);
    /* the checkpoint holds them: loaded back by a single trainer (resharded from N slices) */
    MPI_Barrier(MPI_COMM_WORLD);
    {
        mlp m = { 0 };
        volt_trainer *t = make_trainer("single", vtest_tmpdir());
        volt_loader *vl = make_loader_ex(ds, GB, false);
        if (t && vl) {
            CHECK_OK(volt_trainer_validate(t, &mlp_ops, &m, vl, path));
            memset(&loaded, 0, sizeof loaded);
            copy_params(volt_trainer_params(t), loaded.vals);
            CHECK(!memcmp(loaded.vals, mine.vals, sizeof loaded.vals), "%s: the checkpoint saved after step 2 does not hold "
                  "the params the ranks held", name);
        }
        volt_trainer_destroy(t);
        volt_loader_destroy(vl);
    }
    if (g_rank == 0)
        printf("ckpt    %-18s N=%d: saved right after step 2: gathers in flight %d before the save, %d after; params "
               "after it %.0f%% of the tolerance vs single\n", name, g_world, mine.in_flight_before, mine.in_flight_after,
               100 * worst);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset_destroy(ds);
}

/* ---- ModelCheckpoint's async_save under a sharded strategy ------------------------------------------ */
/* At every epoch's end (3 epochs) the k = 2 most recent and last, saved by every rank's
 * background thread and committed at the next save point or fit's end (rank 0 writes the
 * index). Against the same run with synchronous saves: the same checkpoint names, each loads
 * (single trainer, resharded) to the same bits, no leftover shard folder or .tmp. Then rank
 * 1 cannot write (a file size limit) from epoch 1 on: the fit fails on every rank at the next
 * save point, naming rank 1's shard; epoch 0's checkpoints stay whole and loadable, and the
 * failed save leaves no folder behind. */
static int ac_fail_epoch = -1;   /* this rank's writes fail from this epoch's save on */
static char ac_best_at_1[1024];  /* "best" at epoch 1's end, before its save point */
/* Runs before ModelCheckpoint's save point (checkpointing callbacks run last): "best" waits
 * for the previous save's write (epoch 0's, not committed yet: so no best yet); then this
 * rank may limit its file size. */
static volt_status ac_epoch_end(void *self, volt_trainer *t) {
    (void)self;
    if (volt_trainer_current_epoch(t) == 1) {
        const char *b = volt_trainer_best_model_path(t);
        snprintf(ac_best_at_1, sizeof ac_best_at_1, "%s", b ? b : "(none)");
    }
    if (volt_trainer_current_epoch(t) == ac_fail_epoch) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { 64, RLIM_INFINITY };   /* soft: 64 bytes; the hard limit stays */
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    return VOLT_OK;
}
static const volt_callback_ops ac_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FailWrites",
                                          .on_train_epoch_end = ac_epoch_end };

/* Index files and shard folders of a checkpoint folder; *tmp: files ending in .tmp. */
static void ac_scan(const char *dir, char names[][256], int *n_idx, int *n_shard_dirs, int *n_tmp) {
    *n_idx = *n_shard_dirs = *n_tmp = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t L = strlen(e->d_name);
        if (strstr(e->d_name, ".shards-")) (*n_shard_dirs)++;
        else if (L > 4 && !strcmp(e->d_name + L - 4, ".tmp")) (*n_tmp)++;
        else if (L > 12 && !strcmp(e->d_name + L - 12, ".safetensors") && *n_idx < 8)
            snprintf(names[(*n_idx)++], 256, "%s", e->d_name);
    }
    if (d) closedir(d);
    for (int i = 0; i < *n_idx; i++)   /* sorted, to compare two folders */
        for (int j = i + 1; j < *n_idx; j++)
            if (strcmp(names[i], names[j]) > 0) { char x[256]; memcpy(x, names[i], 256); memcpy(names[i], names[j], 256); memcpy(names[j], x, 256); }
}

static bool probe_printed;
static bool ac_weights_only;   /* ModelCheckpoint's save_weights_only for the next ac_fit */
static volt_status ac_fit(const char *name, const char *dir, bool async, volt_dataset *ds, bool probe, int fail_epoch) {
    volt_trainer_config c;
    vtest_quiet_config(&c, dir);
    c.max_epochs = 3;
    c.strategy = name;
    c.seed = 7;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.save_top_k = 2;   /* no monitor: the 2 most recent */
    cc.save_last = true;
    cc.async_save = async;
    cc.save_weights_only = ac_weights_only;
    if (st >= 0) st = volt_add_model_checkpoint(t, &cc);
    ac_fail_epoch = fail_epoch;
    if (st >= 0 && probe) st = volt_trainer_add_callback(t, &ac_ops, NULL);
    ac_best_at_1[0] = 0;
    volt_loader *l = make_loader(ds, GB / g_world);
    mlp m = { 0 };
    if (st >= 0) st = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL);
    if (st >= 0 && async && !probe_printed) {
        check_comm_device(t);   /* "comm <name> on device <device>" */
        probe_printed = true;
    }
    if (st < 0 && fail_epoch >= 0) {
        const char *e = volt_trainer_errmsg(t);
        if (g_rank == 1)
            CHECK(strstr(e, "rank 1 shard") && strstr(e, "epoch=1"), "%s: rank 1 names its shard of epoch 1: %s", name, e);
        else CHECK(strstr(e, "another rank could not write its shard") && strstr(e, "epoch=1"), "%s: rank %d: %s", name, g_rank, e);
    }
    if (st < 0 && t) {   /* every rank's "best" is again the last committed checkpoint, epoch 0's */
        const char *bp = volt_trainer_best_model_path(t);
        CHECK(bp && strstr(bp, "epoch=0") && access(bp, F_OK) == 0, "%s: rank %d: best after the failed save: %s", name,
              g_rank, bp ? bp : "(none)");
    }
    ac_fail_epoch = -1;
    struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
    setrlimit(RLIMIT_FSIZE, &rl);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    return st;
}

/* Every rank loads path with a single trainer: its params (NPARAM floats), or false. */
static bool ac_load(volt_dataset *ds, const char *path, float *out) {
    mlp m = { 0 };
    volt_trainer *t = make_trainer("single", vtest_tmpdir());
    volt_loader *vl = make_loader_ex(ds, GB, false);
    volt_status st = t && vl ? volt_trainer_validate(t, &mlp_ops, &m, vl, path) : VOLT_ERR_STATE;
    CHECK(st == VOLT_OK, "load '%s': %s", path, t ? volt_trainer_errmsg(t) : "");
    if (st == VOLT_OK) copy_params(volt_trainer_params(t), out);
    volt_trainer_destroy(t);
    volt_loader_destroy(vl);
    return st == VOLT_OK;
}

static void test_async_ckpt(const char *name) {
    volt_dataset *ds = make_data();
    char dir[3][1024], p[3][1400];
    static char names[3][8][256];
    static float a[NPARAM], b[NPARAM];
    int n_idx[3], n_dirs[3], n_tmp[3];
    for (int k = 0; k < 3; k++) {
        snprintf(dir[k], sizeof dir[k], "%s/async_ckpt_%s_np%d_%s", vtest_tmpdir(), name, g_world, k == 0 ? "sync" : k == 1 ? "async" : "fail");
        if (g_rank == 0) { snprintf(p[0], sizeof p[0], "rm -rf '%s'", dir[k]); CHECK(system(p[0]) == 0, "clean"); }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(ac_fit(name, dir[0], false, ds, true, -1) == VOLT_OK, "%s: fit with synchronous saves", name);
    CHECK(strstr(ac_best_at_1, "epoch=0-step=10"), "%s: sync: best at epoch 1's end: %s", name, ac_best_at_1);
    CHECK(ac_fit(name, dir[1], true, ds, true, -1) == VOLT_OK, "%s: fit with async_save", name);
    CHECK(!strcmp(ac_best_at_1, "(none)"), "%s: async: best at epoch 1's end, before epoch 0's commit: %s", name, ac_best_at_1);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < 2; k++) ac_scan(dir[k], names[k], &n_idx[k], &n_dirs[k], &n_tmp[k]);
    CHECK(n_idx[0] == 3 && n_idx[1] == 3, "%s: 2 most recent + last, sync %d, async %d", name, n_idx[0], n_idx[1]);
    CHECK(n_dirs[1] == n_idx[1] && n_tmp[1] == 0, "%s: async: %d shard folders for %d checkpoints, %d .tmp", name, n_dirs[1], n_idx[1],
          n_tmp[1]);
    int same = 0;
    for (int i = 0; i < n_idx[0] && i < n_idx[1]; i++) {
        CHECK(!strcmp(names[0][i], names[1][i]), "%s: checkpoint names: %s vs %s", name, names[0][i], names[1][i]);
        snprintf(p[0], sizeof p[0], "%s/%.255s", dir[0], names[0][i]);
        snprintf(p[1], sizeof p[1], "%s/%.255s", dir[1], names[1][i]);
        if (ac_load(ds, p[0], a) && ac_load(ds, p[1], b)) {
            same += !memcmp(a, b, sizeof a);
            CHECK(!memcmp(a, b, sizeof a), "%s: '%s' async holds other params than sync", name, names[0][i]);
        }
    }
    /* rank 1's writes fail from epoch 1 */
    volt_status st = ac_fit(name, dir[2], true, ds, true, g_rank == 1 ? 1 : -1);
    CHECK(st < 0, "%s: the fit fails when rank 1 cannot write its shard", name);
    MPI_Barrier(MPI_COMM_WORLD);
    ac_scan(dir[2], names[2], &n_idx[2], &n_dirs[2], &n_tmp[2]);
    CHECK(n_idx[2] == 2 && n_dirs[2] == 2 && n_tmp[2] == 0, "%s: after the failure epoch 0's checkpoint and last, "
          "%d files, %d shard folders (want 2 and 2), %d .tmp", name, n_idx[2], n_dirs[2], n_tmp[2]);
    /* both from epoch 0 (step 10), whole: they load, to the same values */
    for (int i = 0; i < n_idx[2]; i++) {
        snprintf(p[2], sizeof p[2], "%s/%.255s", dir[2], names[2][i]);
        CHECK(strstr(names[2][i], "epoch=0") || !strcmp(names[2][i], "last.safetensors"), "%s: kept '%s'", name, names[2][i]);
        volt_st_file *f = NULL;
        char err[512];
        CHECK(volt_st_open(p[2], &f, err, sizeof err) == VOLT_OK && volt_st_meta(f, "volt.global_step") &&
              !strcmp(volt_st_meta(f, "volt.global_step"), "10"), "%s: '%s' is step 10's", name, names[2][i]);
        volt_st_close(f);
        CHECK(ac_load(ds, p[2], i ? b : a), "%s: '%s' loads", name, names[2][i]);
    }
    CHECK(n_idx[2] != 2 || !memcmp(a, b, sizeof a), "%s: epoch 0's checkpoint and last differ", name);

    /* save_weights_only, synchronous and in the background: the index lists no optimizer state
     * and no shard holds one; the weights equal the full run's; a fit cannot resume from it */
    for (int wa = 0; wa < 2; wa++) {
        char wdir[1024], idx[1400];
        snprintf(wdir, sizeof wdir, "%s/async_ckpt_%s_np%d_weights%s", vtest_tmpdir(), name, g_world, wa ? "_async" : "");
        if (g_rank == 0) { snprintf(idx, sizeof idx, "rm -rf '%s'", wdir); CHECK(system(idx) == 0, "clean"); }
        MPI_Barrier(MPI_COMM_WORLD);
        ac_weights_only = true;
        CHECK(ac_fit(name, wdir, wa, ds, false, -1) == VOLT_OK, "%s: fit with save_weights_only (async %d)", name, wa);
        ac_weights_only = false;
        MPI_Barrier(MPI_COMM_WORLD);
        snprintf(idx, sizeof idx, "%s/last.safetensors", wdir);
        volt_st_file *f = NULL;
        char err[512];
        CHECK(volt_st_open(idx, &f, err, sizeof err) == VOLT_OK && volt_st_meta(f, "volt.weights_only"), "%s: weights-only index: %s", name, err);
        volt_st_close(f);
        int opt_tensors = 0, shard_files = 0;
        DIR *d = opendir(wdir);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strstr(e->d_name, "last.safetensors.shards-")) continue;
            char sd[1400];
            snprintf(sd, sizeof sd, "%s/%.300s", wdir, e->d_name);
            DIR *sdd = opendir(sd);
            for (struct dirent *g; sdd && (g = readdir(sdd));) {
                if (!strstr(g->d_name, ".safetensors")) continue;
                char sf[1800];
                snprintf(sf, sizeof sf, "%s/%.300s", sd, g->d_name);
                volt_st_file *h = NULL;
                if (volt_st_open(sf, &h, err, sizeof err) != VOLT_OK) continue;
                shard_files++;
                for (int i = 0; i < volt_st_count(h); i++) opt_tensors += !strncmp(volt_st_name(h, i), "optimizer.", 10);
                volt_st_close(h);
            }
            if (sdd) closedir(sdd);
        }
        if (d) closedir(d);
        CHECK(shard_files == g_world && opt_tensors == 0, "%s: %d shard files (want %d) hold %d optimizer tensors", name, shard_files, g_world,
              opt_tensors);
        snprintf(p[1], sizeof p[1], "%s/last.safetensors", dir[1]);
        if (ac_load(ds, idx, a) && ac_load(ds, p[1], b))
            CHECK(!memcmp(a, b, sizeof a), "%s: the weights-only last holds other weights than the full one", name);
        {
            volt_trainer_config c;
            vtest_quiet_config(&c, wdir);
            c.max_epochs = 4;
            c.strategy = name;
            volt_trainer *t = NULL;
            volt_loader *l = make_loader(ds, GB / g_world);
            mlp m = { 0 };
            CHECK_OK(volt_trainer_create(&c, &t));
            volt_status st2 = volt_trainer_fit(t, &mlp_ops, &m, l, NULL, idx);
            CHECK(st2 == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "holds the weights only"), "%s: rank %d: resume: %s", name,
                  g_rank, volt_trainer_errmsg(t));
            volt_trainer_destroy(t);
            volt_loader_destroy(l);
        }
    }
    if (g_rank == 0)
        printf("async   %-18s N=%d: %d checkpoints written in the background equal the synchronous ones; a failed shard "
               "write fails the fit on every rank and leaves epoch 0's %d checkpoints; save_weights_only leaves the optimizer "
               "out of every shard\n", name, g_world, same, n_idx[2]);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset_destroy(ds);
}

/* ---- lr_find over several ranks ---------------------------------------------------------------------- */
static float g_set_lr = NAN;   /* LearningRateFinder's set_lr */
static void record_lr(void *module, float lr) {
    (void)module;
    g_set_lr = lr;
}

/* The range test under a strategy against single on the global batch: every rank records the
 * same smoothed losses (the mean over ranks), which match single's; the weights come back bit
 * for bit (through a sharded checkpoint under ZeRO / FSDP) and no hidden file stays. The
 * LearningRateFinder callback runs the same sweep inside a fit: the same points and suggestion. */
static void test_lr_find_dist(const char *name) {
    volt_dataset *ds = make_data();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/lrf_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) {   /* a fresh folder: what is in it afterwards is this run's */
        char cmd[1100];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0, "clean %s", dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    static double ref[40], mine[40], r0[40];
    int64_t n_ref = 0, n_mine = 0;
    double sug = NAN;
    for (int pass = 0; pass < 2; pass++) {
        const bool single = pass == 0;
        volt_trainer_config c;
        vtest_quiet_config(&c, dir);
        c.strategy = single ? "single" : name;
        c.seed = 7;
        volt_trainer *t = NULL;
        if (volt_trainer_create(&c, &t) < 0) { CHECK(0, "create: %s", t ? volt_trainer_errmsg(t) : ""); volt_trainer_destroy(t); return; }
        const int64_t bs = single ? GB : GB / g_world;
        volt_loader *l = make_loader(ds, bs), *vl = make_loader_ex(ds, bs, false);
        mlp m = { 0 };
        CHECK_OK(volt_trainer_validate(t, &mlp_ops, &m, vl, NULL));   /* sets the model up */
        double val_before = NAN;
        CHECK(volt_trainer_metric(t, "val_loss", &val_before), "val_loss");
        static float before[NPARAM], after[NPARAM];
        copy_params(volt_trainer_params(t), before);
        volt_lr_find_config lc;
        volt_lr_find_config_init(&lc);
        lc.min_lr = 1e-4;
        lc.max_lr = 10;
        lc.num_training = 40;
        volt_lr_find_result r;
        volt_status st = volt_trainer_lr_find(t, &mlp_ops, &m, l, &lc, &r);
        CHECK(st == VOLT_OK, "%s lr_find: %s", c.strategy, volt_trainer_errmsg(t));
        if (st == VOLT_OK) {
            copy_params(volt_trainer_params(t), after);
            /* fsdp's store holds this rank's slices outside a step: its validation loss says it instead */
            if (strncmp(c.strategy, "fsdp", 4) != 0)
                CHECK(!memcmp(before, after, sizeof before), "%s: lr_find restores the weights", c.strategy);
            double vb = NAN;
            CHECK_OK(volt_trainer_validate(t, &mlp_ops, &m, vl, NULL));
            CHECK(volt_trainer_metric(t, "val_loss", &vb) && vb == val_before && isfinite(vb),
                  "%s: val_loss after lr_find %.9g, before %.9g", c.strategy, vb, val_before);
            memcpy(single ? ref : mine, r.losses, sizeof(double) * (size_t)r.n);
            *(single ? &n_ref : &n_mine) = r.n;
            if (!single) sug = r.suggestion;
            volt_lr_find_result_free(&r);
        }
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
        volt_loader_destroy(vl);
    }
    {   /* LearningRateFinder: the same sweep inside a fit under the strategy (the same points, the
         * suggestion on every rank, handed to set_lr), then the fit trains with it */
        volt_trainer_config c;
        vtest_quiet_config(&c, dir);
        c.strategy = name;
        c.seed = 7;
        c.max_steps = 2;   /* limit_train_batches would cut the sweep's passes too */
        volt_trainer *t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        volt_loader *l = make_loader(ds, GB / g_world);
        mlp m = { 0 };
        volt_lr_finder_config fc;
        volt_lr_finder_config_init(&fc);
        fc.find.min_lr = 1e-4;
        fc.find.max_lr = 10;
        fc.find.num_training = 40;
        fc.set_lr = record_lr;
        CHECK_OK(volt_add_lr_finder(t, &fc));
        g_set_lr = NAN;
        CHECK_OK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL));
        const volt_lr_find_result *r = volt_lr_finder_result(t);
        CHECK(r && r->n == n_mine && r->suggestion == sug && g_set_lr == (float)sug &&
              !memcmp(r->losses, mine, sizeof(double) * (size_t)n_mine) && volt_trainer_global_step(t) == 2,
              "%s: LearningRateFinder in fit: %lld points, suggestion %g, set_lr %g (lr_find's: %lld, %g), step %lld", name,
              r ? (long long)r->n : -1LL, r ? r->suggestion : NAN, g_set_lr, (long long)n_mine, sug,
              (long long)volt_trainer_global_step(t));
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
    }
    memcpy(r0, mine, sizeof r0);
    MPI_Bcast(r0, 40, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, mine, sizeof(double) * (size_t)n_mine), "%s: the ranks recorded different losses", name);
    CHECK(n_mine == n_ref && n_mine >= 12, "%s: %lld steps, single %lld", name, (long long)n_mine, (long long)n_ref);
    double worst = 0;
    for (int64_t i = 0; i < n_mine && i < n_ref; i++) {
        const double rel = fabs(mine[i] - ref[i]) / fmax(fabs(ref[i]), 1e-12);
        worst = rel > worst ? rel : worst;
    }
    CHECK(worst <= 1e-4, "%s: smoothed losses differ from single's by %.3g relative", name, worst);
    CHECK(isfinite(sug), "%s: a suggestion", name);
    MPI_Barrier(MPI_COMM_WORLD);
    int hidden = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) hidden += !strncmp(e->d_name, ".lr_find", 8);
    if (d) closedir(d);
    CHECK(hidden == 0, "%s: %d hidden lr_find files left", name, hidden);
    if (g_rank == 0)
        printf("lr_find %-18s N=%d: %lld steps, losses within %.2g of single's, suggestion %g, weights restored\n", name, g_world,
               (long long)n_mine, worst, sug);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset_destroy(ds);
}
#endif /* VOLT_HAVE_MPI */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "local";
    if (!strcmp(mode, "local")) {
        test_registry();
        test_unit_padding();
        test_bad_name();
        volt_dataset *ds = make_data();
        test_single_memory(ds);
        test_single_reference(ds);
        volt_dataset_destroy(ds);
#ifndef VOLT_HAVE_MPI
        printf("note: built without MPI; the multi-rank tests are skipped (test_strategies_mpi)\n");
#endif
        return vtest_finish();
    }
    if (!strcmp(mode, "reshard_corrupt") && argc > 2) {
        test_reshard_corrupt(argv[2]);
        return vtest_finish();
    }
    if ((!strcmp(mode, "reshard_resume") || !strcmp(mode, "reshard_save")) && argc > 3 && !strcmp(argv[2], "single")) {
        if (!strcmp(mode, "reshard_save")) test_reshard_save(argv[2], argv[3]);
        else test_reshard_resume(argv[2], argv[3]);
        return vtest_finish();
    }
#ifndef VOLT_HAVE_MPI
    VTEST_SKIP("built without MPI (apt-get install libopenmpi-dev openmpi-bin)");
#else
    /* fault modes leave MPI to the library (its MPI_Init_thread and MPI_Finalize at exit) */
    const bool own_mpi = strncmp(mode, "fault", 5) != 0;
    if (own_mpi) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    }
    int init = 0;
    MPI_Initialized(&init);
    if (init) {
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    } else {   /* the library initialises MPI when the trainer is created: ask the env */
        const char *r = getenv("OMPI_COMM_WORLD_RANK"), *w = getenv("OMPI_COMM_WORLD_SIZE");
        g_rank = r ? atoi(r) : 0;
        g_world = w ? atoi(w) : 1;
    }
    if (!strcmp(mode, "comm")) test_comm();
    else if (!strcmp(mode, "parity") && argc > 2) test_parity(argv[2]);
    else if (!strcmp(mode, "groups") && argc > 2) test_groups_dist(argv[2]);
    else if (!strcmp(mode, "freeze") && argc > 2) test_freeze_dist(argv[2]);
    else if (!strcmp(mode, "backbone") && argc > 2) test_backbone_dist(argv[2]);
    else if (!strcmp(mode, "ema") && argc > 2) test_ema_dist(argv[2]);
    else if (!strcmp(mode, "ema_resume") && argc > 2) test_ema_resume(argv[2]);
    else if (!strcmp(mode, "memory")) test_memory();
    else if (!strcmp(mode, "verdict") && argc > 3) test_verdict(argv[2], argv[3]);
    else if (!strcmp(mode, "fault_verdict") && argc > 3) {
        if (g_world < 2) VTEST_SKIP("the fault test needs at least 2 ranks");
        test_fault_verdict(argv[2], argv[3]);
    }
    else if (!strcmp(mode, "parity16") && argc > 2) test_parity16(argv[2]);
    else if (!strcmp(mode, "reduce16") && argc > 2) test_reduce16(argv[2]);
    else if (!strcmp(mode, "fault") && argc > 2) {
        if (g_world < 2) VTEST_SKIP("the fault test needs at least 2 ranks");
        test_fault(argv[2], argc > 3 ? atoi(argv[3]) : -1);
    } else if (!strcmp(mode, "fault_exit")) test_fault_exit();
    else if (!strcmp(mode, "reshard_save") && argc > 3) test_reshard_save(argv[2], argv[3]);
    else if (!strcmp(mode, "zero_ckpt") && argc > 2) test_zero_ckpt(argv[2]);
    else if (!strcmp(mode, "async_ckpt") && argc > 2) test_async_ckpt(argv[2]);
    else if (!strcmp(mode, "lr_find") && argc > 2) test_lr_find_dist(argv[2]);
    else if (!strcmp(mode, "reshard_resume") && argc > 3) test_reshard_resume(argv[2], argv[3]);
    else {
        fprintf(stderr, "usage: test_strategies [comm | parity S | fault S | fault_exit | reshard_save S PATH | "
                        "reshard_resume S PATH]\n");
        return 2;
    }
    if (own_mpi) return vtest_mpi_finish();
    return vtest_finish();
#endif
}
