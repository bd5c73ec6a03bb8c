/* WeightAveraging across ranks: a fit that fails inside a validation (the average swapped into
 * the model) puts the current weights back on every rank with no collective
 * (volt_trainer_swap_back_average: each rank its own slice, the rest gathered from the owners on
 * next use).
 *
 *   mpirun -np N test_mpi_weight_averaging failed_val S   S a distributed strategy (ddp, fsdp,
 *       fsdp_shard_grad_op, deepspeed_stage_2): rank 1 alone gets SIGTERM in its first validation
 *       batch of epoch 1; the eval loop's vote after that batch fails the fit on every rank
 *       (VOLT_ERR_INTERRUPTED) with the average swapped in. Run R without the callback,
 *       run W with EMA WeightAveraging: every rank's fit fails, W's average is no longer swapped
 *       in, W's exported weights (every rank's slice) are R's (the current weights) and not the
 *       average exported inside that validation; under ddp every rank's own tensors are too,
 *       under a sharded strategy a direct read of them is refused (VOLT_ERR_STATE) until the
 *       next use gathers them (under ZeRO they are then the current weights); a
 *       standalone validate gives R's val_loss bit for bit (each rank's forward reads the parts
 *       outside its slice too: gathered again from the owners). A later fit on W starts
 *       (on_train_start, after its sanity check) from those weights and ends (its on_train_end
 *       swaps the average in and back by hand: fit's end still makes every rank's own tensors the
 *       exported weights, the parts the local swap back left to the owners included); no rank waited
 *       for the comm's timeout. WeightAveraging's on_exception starts no strategy collective
 *       (the strategy's trace between two callbacks around it is empty).
 *
 * A test_mpi_ program: registered only with its launches (tests/mpi_weight_averaging.cmake). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/safetensors.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"
#include "trainer/trainer_internal.h"   /* t->strategy */
#include "strategies/parallel/parallel.h"   /* the strategy's trace */

enum { BS = 2 /* per rank */, NB = 4 /* batches per epoch */, EPOCHS = 3, NW = 25 /* 16 + 4 + 4 + 1 */ };

static int g_rank, g_world;
static volt_trainer *g_t;      /* the trainer of the fit running (the validation step asks its epoch) */
static bool g_fail;            /* rank 1 raises SIGTERM in its validation at epoch 1, batch 0 */

typedef vtest_mlp2 mlp;   /* two units: fsdp gives one back while the next one computes */
static volt_status mlp_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_step_set_loss(s, volt_mse(s, vtest_mlp2_forward(self, s, b), volt_batch_y(b)));
}
static volt_status mlp_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    volt_tensor *loss = volt_mse(s, vtest_mlp2_forward(self, s, b), volt_batch_y(b));
    if (!loss) return volt_step_status(s);
    if (g_fail && g_rank == 1 && i == 0 && !volt_trainer_sanity_checking(g_t) && volt_trainer_current_epoch(g_t) == 1)
        raise(SIGTERM);
    return volt_log(s, "val_loss", loss, VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status mlp_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    return VOLT_OK;
}
static const volt_module_ops mlp_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = vtest_mlp2_setup,
                                         .configure_optimizers = mlp_opt, .training_step = mlp_train,
                                         .validation_step = mlp_val };


/* Every parameter, whole, as the model holds it: volt_trainer_export_full (collective: every
 * rank's slice), read back on rank 0 and sent to every rank. */
static const char *const k_names[4] = { "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" };
static const int k_at[4] = { 0, 16, 20, 24 };
static void exported(volt_trainer *t, const char *path, float out[NW]) {
    memset(out, 0, sizeof(float) * NW);
    CHECK(volt_trainer_export_full(t, path) == VOLT_OK, "rank %d: export_full '%s': %s", g_rank, path, volt_trainer_errmsg(t));
    if (g_rank == 0) {
        volt_st_file *f = NULL;
        char err[512] = "";
        CHECK(volt_st_open(path, &f, err, sizeof err) == VOLT_OK, "%s", err);
        for (int k = 0; f && k < 4; k++) {
            volt_st_info info;
            const bool ok = volt_st_find(f, k_names[k], &info) == VOLT_OK && info.dtype == VOLT_F32;
            CHECK(ok, "'%s' lacks %s", path, k_names[k]);
            if (ok) memcpy(out + k_at[k], info.data, info.nbytes);
        }
        volt_st_close(f);
    }
    MPI_Bcast(out, NW, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
/* This rank's own tensors (whole: ddp, or a sharded strategy's units once gathered). */
static void own(mlp *m, float out[NW]) {
    volt_tensor *p[4] = { m->w1, m->b1, m->w2, m->b2 };
    for (int k = 0; k < 4; k++) CHECK_OK(volt_tensor_to_host(p[k], out + k_at[k]));
}

/* Exports the model at chosen points of W's fits: inside the failing validation (after the
 * callback swapped the average in: added after it) and at the start of the later fit. */
typedef struct probe { char dir[512]; float avg[NW], start[NW]; bool got_avg, got_start, later, swapped_back; } probe;
static volt_status probe_val_start(void *self, volt_trainer *t) {
    probe *p = self;
    if (!g_fail || volt_trainer_sanity_checking(t) || volt_trainer_current_epoch(t) != 1 || p->got_avg) return VOLT_OK;
    char path[600];
    snprintf(path, sizeof path, "%s/avg.safetensors", p->dir);
    exported(t, path, p->avg);
    p->got_avg = true;
    return VOLT_OK;
}
static volt_status probe_train_start(void *self, volt_trainer *t) {
    probe *p = self;
    if (!p->later) return VOLT_OK;
    char path[600];
    snprintf(path, sizeof path, "%s/start.safetensors", p->dir);
    exported(t, path, p->start);
    p->got_start = true;
    return VOLT_OK;
}
/* The later fit's last hook before fit's end: the average swapped in and back by hand (a user
 * looking at it). The swap back is local: under ZeRO the parts outside each rank's slice are left
 * to be gathered on next use, and no forward comes before fit's end, whose gather of every
 * parameter (materialize) must include them. */
static volt_status probe_train_end(void *self, volt_trainer *t) {
    probe *p = self;
    if (!p->later) return VOLT_OK;
    volt_status st = volt_trainer_swap_average(t);
    if (st >= 0) st = volt_trainer_swap_back_average(t);
    p->swapped_back = st >= 0;
    return st;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Probe",
                                             .on_validation_epoch_start = probe_val_start,
                                             .on_train_start = probe_train_start, .on_train_end = probe_train_end };

/* Around WeightAveraging's on_exception (one added before it, one after): what the strategy did
 * in between (its trace: every parameter gather, every grad reduction it starts). */
static int g_exc_events = -1, g_exc_gathers = -1;
static void exc_before(void *self, volt_trainer *t, volt_status st) {
    (void)self; (void)st;
    volt__dist_trace_clear(t->strategy);
}
static void exc_after(void *self, volt_trainer *t, volt_status st) {
    (void)self; (void)st;
    const volt_dist_event *ev;
    g_exc_events = volt__dist_trace(t->strategy, &ev);
    g_exc_gathers = 0;
    for (int i = 0; i < g_exc_events; i++) g_exc_gathers += ev[i].kind == VOLT_EV_GATHER_LAUNCH;
}
static const volt_callback_ops exc_before_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ExcBefore",
                                                  .on_exception = exc_before };
static const volt_callback_ops exc_after_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ExcAfter",
                                                 .on_exception = exc_after };

static volt_trainer *make_trainer(const char *strategy, const char *root) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = EPOCHS;
    c.strategy = strategy;
    c.seed = 7;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", strategy, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) { volt_trainer_destroy(t); return NULL; }
    return t;
}

static bool same(const float *a, const float *b) { return !memcmp(a, b, sizeof(float) * NW); }

static void test_failed_val(const char *name) {
    char root[512], path[700];
    snprintf(root, sizeof root, "%s/failed_val_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *ds = vtest_rows4(g_world * BS * NB);
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BS;
    volt_loader *tl = NULL, *vl = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &tl));
    CHECK_OK(volt_loader_create(&lc, ds, &vl));
    const double t0 = vtest_now();

    /* R: no averaging; its weights after the failure are the current weights */
    float cur[NW], after[NW], mine[NW];
    mlp mr = { 0 }, mw = { 0 };
    volt_trainer *tr = make_trainer(name, root);
    g_t = tr;
    g_fail = true;
    volt_status st = volt_trainer_fit(tr, &mlp_ops, &mr, tl, vl, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED, "rank %d: R's fit: %s (the validation was to fail): %s", g_rank, volt_status_str(st),
          volt_trainer_errmsg(tr));
    snprintf(path, sizeof path, "%s/r.safetensors", root);
    exported(tr, path, cur);
    const volt_comm *cm = volt__dist_comm(tr->strategy);
    const char *want = getenv("VOLT_ACCELERATOR");   /* the strict launches: the staged gathers */
    CHECK(cm && cm->dev && (!want || !strcmp(cm->dev->be->name, want)), "rank %d: comm on device %s, want %s", g_rank,
          cm && cm->dev ? cm->dev->be->name : "?", want ? want : "any");

    /* W: the same fit with the average swapped in for the validation that fails */
    volt_trainer *tw = make_trainer(name, root);
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.5f;
    CHECK_OK(volt_trainer_add_callback(tw, &exc_before_ops, calloc(1, 1)));
    CHECK_OK(volt_add_weight_averaging(tw, &wc));
    CHECK_OK(volt_trainer_add_callback(tw, &exc_after_ops, calloc(1, 1)));
    probe *p = calloc(1, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "%s", root);
    CHECK_OK(volt_trainer_add_callback(tw, &probe_ops, p));
    g_t = tw;
    st = volt_trainer_fit(tw, &mlp_ops, &mw, tl, vl, NULL);
    CHECK(st == VOLT_ERR_INTERRUPTED && strstr(volt_trainer_errmsg(tw), "validation"), "rank %d: W's fit: %s: %s", g_rank, volt_status_str(st),
          volt_trainer_errmsg(tw));
    CHECK(p->got_avg && !same(p->avg, cur), "rank %d: the average inside the validation %s the current weights", g_rank,
          p->got_avg ? "equals" : "(not exported) vs");
    CHECK(!volt_trainer_average_swapped(tw), "rank %d: the average is still swapped into the model after the failed fit", g_rank);
    /* the swap back made no collective (the collective swap gathers under fsdp / ZeRO) */
    CHECK(g_exc_events == 0 && g_exc_gathers == 0, "rank %d: WeightAveraging's on_exception: %d strategy events, %d parameter "
          "gathers started", g_rank, g_exc_events, g_exc_gathers);
    snprintf(path, sizeof path, "%s/w.safetensors", root);
    exported(tw, path, after);
    CHECK(same(after, cur), "rank %d: after the failed fit the model holds %s, not the current weights", g_rank,
          same(after, p->avg) ? "the average" : "other values");
    if (!strcmp(name, "ddp")) {   /* whole replicas: every rank's own tensors */
        own(&mw, mine);
        CHECK(same(mine, cur), "rank %d: this rank's own tensors are not the current weights after the failed fit", g_rank);
    } else {   /* sharded: outside its slice a rank holds nothing (fsdp) or the peers' averages (ZeRO) until the
                * unit is gathered again: a direct read is refused, not half the current weights */
        volt_tensor *pw[4] = { mw.w1, mw.b1, mw.w2, mw.b2 };
        for (int k = 0; k < 4; k++) {
            CHECK(volt_tensor_to_host(pw[k], mine + k_at[k]) == VOLT_ERR_STATE,
                  "rank %d: %s read directly after the failed fit (not gathered: VOLT_ERR_STATE expected)", g_rank, k_names[k]);
            CHECK(volt_tensor_copy_from_host(pw[k], cur + k_at[k]) == VOLT_ERR_STATE,
                  "rank %d: %s written directly after the failed fit (not gathered: VOLT_ERR_STATE expected)", g_rank, k_names[k]);
        }
    }
    /* a standalone validate runs on what each rank's forward reads (under fsdp / ZeRO the parts
     * outside the owned slices too, which export_full never reads): the same val_loss as R's */
    double lr = NAN, lw = NAN;
    g_fail = false;
    g_t = tr;
    CHECK(volt_trainer_validate(tr, &mlp_ops, &mr, vl, NULL) == VOLT_OK, "rank %d: R's validate: %s", g_rank,
          volt_trainer_errmsg(tr));
    g_t = tw;
    CHECK(volt_trainer_validate(tw, &mlp_ops, &mw, vl, NULL) == VOLT_OK, "rank %d: W's validate: %s", g_rank,
          volt_trainer_errmsg(tw));
    CHECK(volt_trainer_metric(tr, "val_loss", &lr) && volt_trainer_metric(tw, "val_loss", &lw) && lr == lw,
          "rank %d: validate after the failed fit: val_loss %.9g, without the callback %.9g", g_rank, lw, lr);
    if (!strncmp(name, "deepspeed", 9)) {   /* ZeRO keeps what the validate gathered: whole, the current weights */
        own(&mw, mine);
        CHECK(same(mine, cur), "rank %d: this rank's own tensors after the validate are not the current weights", g_rank);
    }

    /* a later fit on W trains from the current weights */
    p->later = true;
    st = volt_trainer_fit(tw, &mlp_ops, &mw, tl, vl, NULL);
    CHECK(st == VOLT_OK, "rank %d: the later fit: %s", g_rank, volt_trainer_errmsg(tw));
    CHECK(p->got_start && same(p->start, cur), "rank %d: the later fit starts from %s", g_rank,
          !p->got_start ? "(not exported)" : same(p->start, p->avg) ? "the average" : "other values than the current weights");
    /* fit's end made every parameter whole on every rank, the parts the swap back left to be
     * gathered included: each rank's own tensors are the exported weights */
    CHECK(p->swapped_back, "rank %d: the swap pair at the later fit's on_train_end did not run", g_rank);
    snprintf(path, sizeof path, "%s/end.safetensors", root);
    exported(tw, path, after);
    own(&mw, mine);
    CHECK(same(mine, after) && !same(after, cur), "rank %d: after the later fit this rank's own tensors are %s", g_rank,
          same(after, cur) ? "(the exported weights did not move)" : "not the exported weights");
    const double el = vtest_now() - t0;
    /* a wait for the comm's timeout alone takes all of it: the whole test stays under it (not a
     * fixed bound the slow sanitizer build on a loaded machine could pass) */
    const char *to = getenv("VOLT_COMM_TIMEOUT");
    const double timeout = to && atof(to) > 0 ? atof(to) : 300;
    CHECK(timeout <= 60, "run with a short VOLT_COMM_TIMEOUT (got %s)", to ? to : "unset");
    CHECK(el < timeout, "rank %d: %.1f s, the comm's timeout is %g s (a rank waited for it?)", g_rank, el, timeout);
    if (g_rank == 0) printf("%s np%d: current weights back on every rank after the failed validation; %.2f s\n", name, g_world, el);
    volt_trainer_destroy(tr);
    volt_trainer_destroy(tw);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
}
#endif

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifndef VOLT_HAVE_MPI
    (void)argc;
    (void)argv;
    VTEST_SKIP("built without MPI (apt-get install libopenmpi-dev openmpi-bin)");
#else
    if (argc < 3) {
        fprintf(stderr, "usage: mpirun -np N test_mpi_weight_averaging failed_val STRATEGY\n");
        return 2;
    }
    const int skip = vtest_mpi_start(&argc, &argv, &g_rank, &g_world);
    if (skip) return skip;
    if (!strcmp(argv[1], "failed_val")) test_failed_val(argv[2]);
    else {
        fprintf(stderr, "unknown mode '%s'\n", argv[1]);
        MPI_Finalize();
        return 2;
    }
    return vtest_mpi_finish();
#endif
}
