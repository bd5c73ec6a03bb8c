/* Ranks that disagree fail with an error naming the disagreement, on every rank, never a crash,
 * a hang or a silent mix (trainer/setup.c, trainer/checkpoint*.c, strategies/comm/mpi/comm_mpi.c).
 *
 *   mpirun -np N test_mpi_consistency MODE STRATEGY
 *
 *   ckpt_path   ckpt_path given on rank 0 only (NULL elsewhere), then a file on rank 0 and "last"
 *               elsewhere: every rank fails with "ckpt_path differs between ranks" before any
 *               load; one file spelled per rank validates; then the same path everywhere fits
 *               (the ranks' collectives still match).
 *   save_one    volt_trainer_save_checkpoint called on rank 0 only under a sharding strategy:
 *               every rank's fit fails with an error saying the ranks called different
 *               collectives (rank 0's save says so too), no shard folder is left behind.
 *   snapshot_one  the same with volt_trainer_snapshot_checkpoint (async_save's first half).
 *   sites       BACKEND (mpi on the cpu, nccl on the simulated GPU), on a comm alone: control
 *               collectives in step give the right values; f64 all-reduces of one size from
 *               different call sites ("stop vote" on rank 0, "metric sync" elsewhere) fail on
 *               every rank naming its own call and the mismatch, the caller's buffer untouched,
 *               and the comm is unusable after; device memory (gradients) travels bare.
 *   model       rank 1 builds fc1 with another hidden size, then runs another
 *               accumulate_grad_batches: every rank fails at set-up naming the first difference;
 *               then equal models train.
 *   other_file  the same relative ckpt_path names another file on rank 1 (another working
 *               directory): every rank fails with "rank 1 opened a different checkpoint"; then the
 *               same file everywhere validates.
 *   shards      a sharded checkpoint whose shard files were swapped, whose index (resealed) has
 *               overlapping parameters or ranges out of rank order: every rank fails naming it;
 *               the original loads.
 *
 * A test_mpi_ program: registered only with its launches (tests/mpi_consistency.cmake; over
 * the simulated NCCL: tests/gpu_sim_nccl.cmake). Rank 0 prints "comm <name> on device <kind>"
 * where a comm was made (what the simulated-NCCL launches grep for). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#ifdef VOLT_HAVE_MPI
#include <cjson/cJSON.h>
#include "vtest_mpi.h"
#include "volt/safetensors.h"
#include "trainer/checkpoint_internal.h"   /* meta_seal: the index rewritten as a tool would */
#include "strategies/strategy.h"
#include "strategies/comm/comm.h"
#include "core/device.h"

static int g_rank, g_world;
static char g_dir[1024];

typedef struct net {
    volt_tensor *w1, *b1, *w2, *b2;
    int64_t hidden;
} net;

static volt_status n_setup(void *self, volt_params *ps) {
    net *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(m->hidden, 4), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(m->hidden), VOLT_INIT_ZEROS, &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(1, m->hidden), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b2);
}
static volt_tensor *n_loss(net *m, volt_step *s, const volt_batch *b) {
    volt_tensor *h = volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    return volt_mse(s, volt_linear(s, h, m->w2, m->b2), volt_batch_y(b));
}
static volt_status n_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_step_set_loss(s, n_loss(self, s, b));
}
static volt_status n_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "val_loss", n_loss(self, s, b), VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status n_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    return VOLT_OK;
}
static const volt_module_ops g_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "net", .setup = n_setup,
                                       .configure_optimizers = n_opt, .training_step = n_train, .validation_step = n_val };

static volt_trainer *make(const char *strategy, int64_t steps, int64_t acc, uint64_t seed) {
    volt_trainer_config c;
    vtest_quiet_config(&c, g_dir);
    c.strategy = strategy;
    c.max_steps = steps;
    c.accumulate_grad_batches = acc;
    c.seed = seed;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", strategy, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    return t;
}

static volt_loader *loader(void) {
    static volt_dataset *ds;
    if (!ds) ds = vtest_rows4(64);
    return vtest_loader(ds, 4, false);
}

/* a fit of `steps` steps saved at path on every rank */
static void fit_and_save(const char *strategy, int64_t steps, uint64_t seed, const char *path) {
    volt_trainer *t = make(strategy, steps, 1, seed);
    net m = { .hidden = 4 };
    volt_loader *l = loader();
    CHECK_OK(volt_trainer_fit(t, &g_ops, &m, l, NULL, NULL));
    volt_status st = volt_trainer_save_checkpoint(t, path);
    CHECK(st == VOLT_OK, "save %s: %s", path, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* every rank's status is st and its message holds `want` */
static void expect_err(volt_trainer *t, volt_status st, volt_status want_st, const char *want, const char *what) {
    const char *msg = volt_trainer_errmsg(t);
    CHECK(st == want_st, "%s: rank %d: status %s, want %s (%s)", what, g_rank, volt_status_str(st), volt_status_str(want_st), msg);
    CHECK(strstr(msg, want) != NULL, "%s: rank %d: message '%s' lacks '%s'", what, g_rank, msg, want);
    if (g_rank == 0) printf("%s: %s\n", what, msg);
}

static void validate_ok(const char *strategy, const char *path, const char *what) {
    volt_trainer *t = make(strategy, 2, 1, 3);
    net m = { .hidden = 4 };
    volt_loader *l = loader();
    volt_status st = volt_trainer_validate(t, &g_ops, &m, l, path);
    CHECK(st == VOLT_OK, "%s: rank %d: validate: %s", what, g_rank, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

static void test_ckpt_path(const char *strategy) {
    char path[1200];
    snprintf(path, sizeof path, "%s/ck.safetensors", g_dir);
    fit_and_save(strategy, 2, 3, path);
    volt_trainer *t = make(strategy, 4, 1, 3);
    net m = { .hidden = 4 };
    volt_loader *l = loader();
    volt_status st = volt_trainer_fit(t, &g_ops, &m, l, NULL, g_rank == 0 ? path : NULL);
    expect_err(t, st, VOLT_ERR_INVALID_ARG, "ckpt_path differs between ranks: rank 0 has '", "rank 0 only");
    CHECK(strstr(volt_trainer_errmsg(t), "has none") != NULL, "rank %d: names the rank without one: %s", g_rank, volt_trainer_errmsg(t));
    st = volt_trainer_validate(t, &g_ops, &m, l, g_rank == 0 ? path : "last");
    expect_err(t, st, VOLT_ERR_INVALID_ARG, "ckpt_path differs between ranks", "another kind per rank");
    char spelled[1300];   /* one file spelled per rank (a node-local mount, a relative path): fine */
    snprintf(spelled, sizeof spelled, "%s/./ck.safetensors", g_dir);
    st = volt_trainer_validate(t, &g_ops, &m, l, g_rank == 0 ? path : spelled);
    CHECK(st == VOLT_OK, "rank %d: validate from one file spelled per rank: %s", g_rank, volt_trainer_errmsg(t));
    st = volt_trainer_fit(t, &g_ops, &m, l, NULL, path);   /* the same everywhere: the ranks still in step */
    CHECK(st == VOLT_OK, "rank %d: fit from the same ckpt_path: %s", g_rank, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

static char g_save_path[1200];
static volt_status save_rank0(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    if (g_rank != 0 || volt_trainer_global_step(t) != 2) return VOLT_OK;
    volt_status st = volt_trainer_save_checkpoint(t, g_save_path);
    printf("rank 0: save_checkpoint alone: %s\n", st < 0 ? volt_trainer_errmsg(t) : "ok");
    CHECK(st < 0, "rank 0's lone sharded save fails");
    CHECK(strstr(volt_trainer_errmsg(t), "different collectives") != NULL, "rank 0's save names the mismatch: %s",
          volt_trainer_errmsg(t));
    return st;
}
static const volt_callback_ops g_saver = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SaveOnRank0",
                                           .on_train_batch_end = save_rank0 };

static int count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

/* the same with a snapshot (ModelCheckpoint's async_save takes one on every rank) */
static volt_ckpt_snapshot *g_snap;
static volt_status snap_rank0(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    if (g_rank != 0 || volt_trainer_global_step(t) != 2) return VOLT_OK;
    volt_status st = volt_trainer_snapshot_checkpoint(t, g_save_path, &g_snap);
    printf("rank 0: snapshot_checkpoint alone: %s\n", st < 0 ? volt_trainer_errmsg(t) : "ok");
    CHECK(st < 0, "rank 0's lone sharded snapshot fails");
    CHECK(strstr(volt_trainer_errmsg(t), "different collectives") != NULL, "rank 0's snapshot names the mismatch: %s",
          volt_trainer_errmsg(t));
    return st;
}
static const volt_callback_ops g_snapper = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SnapshotOnRank0",
                                             .on_train_batch_end = snap_rank0 };

/* "comm <name> on device <kind>" on rank 0 (the simulated-NCCL launches grep it) */
static void say_comm(volt_trainer *t) {
    struct volt_comm *c = t && t->strategy ? volt__strategy_comm(t->strategy) : NULL;
    if (g_rank == 0 && c) printf("comm %s on device %s\n", c->ops->name, c->dev ? c->dev->be->name : "cpu");
}

static void test_save_one(const char *strategy, const volt_callback_ops *lone) {
    snprintf(g_save_path, sizeof g_save_path, "%s/lone.safetensors", g_dir);
    volt_trainer *t = make(strategy, 6, 1, 3);
    CHECK_OK(volt_trainer_add_callback(t, lone, NULL));
    net m = { .hidden = 4 };
    volt_loader *l = loader();
    const double t0 = vtest_now();
    volt_status st = volt_trainer_fit(t, &g_ops, &m, l, NULL, NULL);
    say_comm(t);
    printf("rank %d: fit: %s\n", g_rank, volt_trainer_errmsg(t));
    CHECK(st < 0, "rank %d: the fit fails", g_rank);
    CHECK(strstr(volt_trainer_errmsg(t), "different collectives") != NULL, "rank %d: names the mismatch: %s", g_rank,
          volt_trainer_errmsg(t));
    /* and the calls that met: rank 0's checkpoint call, the others' stop vote after the batch */
    CHECK(strstr(volt_trainer_errmsg(t), g_rank == 0 ? "(checkpoint call)" : "(stop vote)") != NULL,
          "rank %d: names its call site: %s", g_rank, volt_trainer_errmsg(t));
    CHECK(vtest_now() - t0 < 15, "rank %d: within 15 s (the comm's timeout is 60 s): %.1f s", g_rank, vtest_now() - t0);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(count_prefix(g_dir, "lone.safetensors") == 0, "rank %d: no index or shard folder left in %s", g_rank, g_dir);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_ckpt_snapshot_destroy(g_snap);
    g_snap = NULL;
}

/* On a comm alone: the ranks' control collectives from different call sites. */
static void test_sites(const char *backend) {
    char err[768] = "";
    volt_device *dev = volt__device_cpu();
    if (!strcmp(backend, "nccl")) {
        const volt_backend *be = volt__backend_find("cuda");
        const int n = be ? be->device_count() : 0;
        if (n < 1) {
            vtest_missing("sites nccl: no cuda device (the simulator's CUDASIM_DEVICES?)");
            return;
        }
        CHECK_OK(volt__device_get("cuda", volt__comm_local_rank() % n, &dev, err, sizeof err));
        if (!dev) return;
    }
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = 20;
    cc.backend = backend;
    volt_comm *c = NULL;
    volt_status st = volt__comm_create_for(dev, &cc, &c, err, sizeof err);
    CHECK(st == VOLT_OK, "rank %d: %s comm: %s", g_rank, backend, err);
    if (!c) return;
    if (g_rank == 0) printf("comm %s on device %s\n", c->ops->name, dev->be->name);
    const int W = g_world;
    /* in step: the mean of host doubles, rank W-1's bytes */
    double v[2] = { (double)g_rank, 1.0 };
    CHECK_OK(volt__comm_all_reduce(c, v, v, 2, VOLT_COMM_F64, VOLT_COMM_AVG, "metric sync"));
    CHECK(v[0] == (W - 1) / 2.0 && v[1] == 1.0, "rank %d: mean (%g, %g), want (%g, 1)", g_rank, v[0], v[1], (W - 1) / 2.0);
    char msg[100] = "", want[100];
    snprintf(want, sizeof want, "from rank %d", W - 1);
    if (g_rank == W - 1) memcpy(msg, want, sizeof want);
    CHECK_OK(volt__comm_broadcast(c, msg, sizeof msg, VOLT_COMM_BYTE, W - 1, "message"));
    CHECK(!strcmp(msg, want), "rank %d: broadcast '%s', want '%s'", g_rank, msg, want);
    if (!strcmp(c->ops->name, "nccl")) {   /* device memory (gradients) travels bare */
        double h[2] = { (double)g_rank, 2.0 };
        double *d = volt__dev_alloc(dev, sizeof h);
        CHECK(d != NULL, "device buffer");
        if (d) {
            volt__dev_h2d(dev, d, h, sizeof h);
            CHECK_OK(volt__comm_all_reduce(c, d, d, 2, VOLT_COMM_F64, VOLT_COMM_SUM, g_rank ? "grads b" : "grads a"));
            volt__dev_d2h(dev, h, d, sizeof h);
            CHECK(h[0] == W * (W - 1) / 2.0 && h[1] == 2.0 * W, "rank %d: device sum (%g, %g)", g_rank, h[0], h[1]);
            volt__dev_free(dev, d);
        }
    }
    /* one size, another call site on rank 0: every rank says so, naming its own call */
    double x[2] = { 7, 7 };
    const char *mine = g_rank == 0 ? "stop vote" : "metric sync";
    st = volt__comm_all_reduce(c, x, x, 2, VOLT_COMM_F64, VOLT_COMM_AVG, mine);
    const char *e = volt__comm_errmsg(c);
    char named[64];
    snprintf(named, sizeof named, "(%s)", mine);
    CHECK(st == VOLT_ERR_COMM && strstr(e, "different collectives") && strstr(e, named), "rank %d: %s from call sites that "
          "differ: %s: '%s'", g_rank, backend, volt_status_str(st), e);
    CHECK(x[0] == 7 && x[1] == 7, "rank %d: the buffer is left as it was: (%g, %g)", g_rank, x[0], x[1]);
    if (g_rank == 0) printf("sites %s: %s\n", backend, e);
    /* out of step: the next call fails at once */
    st = volt__comm_broadcast(c, msg, 8, VOLT_COMM_BYTE, 0, "after");
    CHECK(st < 0 && strstr(volt__comm_errmsg(c), "unusable"), "rank %d: a call after the mismatch: %s: %s", g_rank,
          volt_status_str(st), volt__comm_errmsg(c));
    volt__comm_destroy(c);
}

static void test_model(const char *strategy) {
    volt_loader *l = loader();
    volt_trainer *t = make(strategy, 2, 1, 3);
    net m = { .hidden = g_rank == 1 ? 5 : 4 };
    volt_status st = volt_trainer_fit(t, &g_ops, &m, l, NULL, NULL);
    expect_err(t, st, VOLT_ERR_INVALID_ARG, "the model's parameters differ between ranks (rank 1: fc1.weight (5, 4)", "hidden size");
    CHECK(strstr(volt_trainer_errmsg(t), "vs rank 0: fc1.weight (4, 4)") != NULL, "rank %d: rank 0's: %s", g_rank, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    t = make(strategy, 2, g_rank == 1 ? 2 : 1, 3);
    m.hidden = 4;
    st = volt_trainer_fit(t, &g_ops, &m, l, NULL, NULL);
    expect_err(t, st, VOLT_ERR_INVALID_ARG, "accumulate_grad_batches differs between ranks (rank 1: 2 vs rank 0: 1)", "accumulate");
    volt_trainer_destroy(t);
    t = make(strategy, 2, 1, 3);
    st = volt_trainer_fit(t, &g_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "rank %d: equal models train: %s", g_rank, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

static void test_other_file(const char *strategy) {
    char a[1200], b[1200], cwd[1200], pa[1300], pb[1300];
    snprintf(a, sizeof a, "%s/a", g_dir);
    snprintf(b, sizeof b, "%s/b", g_dir);
    if (g_rank == 0) { mkdir(a, 0755); mkdir(b, 0755); }
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(pa, sizeof pa, "%s/ck.safetensors", a);
    snprintf(pb, sizeof pb, "%s/ck.safetensors", b);
    fit_and_save(strategy, 2, 3, pa);
    fit_and_save(strategy, 3, 4, pb);
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    CHECK(chdir(g_rank == 1 ? b : a) == 0, "chdir");
    volt_trainer *t = make(strategy, 2, 1, 3);
    net m = { .hidden = 4 };
    volt_loader *l = loader();
    volt_status st = volt_trainer_validate(t, &g_ops, &m, l, "ck.safetensors");
    expect_err(t, st, VOLT_ERR_INVALID_ARG, "rank 1 opened a different checkpoint at 'ck.safetensors' than rank 0", "other file");
    volt_trainer_destroy(t);
    CHECK(chdir(a) == 0, "chdir");
    validate_ok(strategy, "ck.safetensors", "the same file");
    CHECK(chdir(cwd) == 0, "chdir back");
    volt_loader_destroy(l);
}

/* the index at path rewritten with its layout edited by edit(js), resealed (meta_seal) */
static void reseal_index(const char *path, const char *out, void (*edit)(cJSON *js)) {
    char err[512];
    volt_st_file *f = NULL;
    CHECK(volt_st_open(path, &f, err, sizeof err) == VOLT_OK, "%s", err);
    if (!f) return;
    volt_st_writer *w = NULL;
    CHECK_OK(volt_st_writer_create(&w));
    for (int i = 0; i < volt_st_count(f); i++) {
        volt_st_info in;
        CHECK_OK(volt_st_find(f, volt_st_name(f, i), &in));
        CHECK_OK(volt_st_writer_add(w, volt_st_name(f, i), in.dtype, in.shape, in.data));
    }
    for (int i = 0; i < volt_st_meta_count(f); i++) {
        const char *k, *v;
        volt_st_meta_at(f, i, &k, &v);
        if (!strcmp(k, "format") || !strncmp(k, "crc32:", 6) || !strcmp(k, "volt.meta_crc32")) continue;
        if (!strcmp(k, "volt.shards")) {
            cJSON *js = cJSON_Parse(v);
            edit(js);
            char *s = cJSON_PrintUnformatted(js);
            CHECK_OK(volt_st_writer_meta(w, k, s));
            cJSON_free(s);
            cJSON_Delete(js);
        } else {
            CHECK_OK(volt_st_writer_meta(w, k, v));
        }
    }
    CHECK_OK(meta_seal(w));
    CHECK(volt_st_writer_write(w, out, err, sizeof err) == VOLT_OK, "%s", err);
    volt_st_writer_destroy(w);
    volt_st_close(f);
}
static void edit_overlap(cJSON *js) {   /* fc1.bias placed over fc1.weight */
    cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(js, "params"), 1);
    cJSON_ReplaceItemInObject(p, "offset", cJSON_CreateNumber(0));
}
static void edit_swap_ranges(cJSON *js) {   /* rank 0's slice of each unit said to be rank 1's and back */
    cJSON *u;
    cJSON_ArrayForEach(u, cJSON_GetObjectItem(js, "units")) {
        cJSON *rg = cJSON_GetObjectItem(u, "ranges");
        cJSON *r0 = cJSON_Duplicate(cJSON_GetArrayItem(rg, 0), 1), *r1 = cJSON_Duplicate(cJSON_GetArrayItem(rg, 1), 1);
        cJSON_ReplaceItemInArray(rg, 0, r1);
        cJSON_ReplaceItemInArray(rg, 1, r0);
    }
}
static void edit_none(cJSON *js) { (void)js; }

static void shards_dir(const char *path, char *out, size_t n) {
    char base[1300];
    snprintf(base, sizeof base, "ck.safetensors.shards-");
    DIR *d = opendir(g_dir);
    out[0] = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, base, strlen(base))) snprintf(out, n, "%s/%s", g_dir, e->d_name);
    if (d) closedir(d);
    (void)path;
}

static void test_shards(const char *strategy) {
    char path[1200], edited[1200], dir[1400], f0[1500], f1[1500], tmp[1500];
    snprintf(path, sizeof path, "%s/ck.safetensors", g_dir);
    snprintf(edited, sizeof edited, "%s/edited.safetensors", g_dir);
    fit_and_save(strategy, 2, 3, path);
    shards_dir(path, dir, sizeof dir);
    CHECK(dir[0], "a shard folder beside %s", path);
    snprintf(f0, sizeof f0, "%s/rank00000-of-%05d.safetensors", dir, g_world);
    snprintf(f1, sizeof f1, "%s/rank00001-of-%05d.safetensors", dir, g_world);
    snprintf(tmp, sizeof tmp, "%s/swap.tmp", dir);
    if (g_rank == 0) CHECK(rename(f0, tmp) == 0 && rename(f1, f0) == 0 && rename(tmp, f1) == 0, "swap the shards");
    MPI_Barrier(MPI_COMM_WORLD);
    volt_trainer *t = make(strategy, 2, 1, 3);
    net m = { .hidden = 4 };
    volt_loader *l = loader();
    volt_status st = volt_trainer_validate(t, &g_ops, &m, l, path);
    expect_err(t, st, VOLT_ERR_CORRUPT, "was written by rank 1 of", "swapped shards");
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) CHECK(rename(f0, tmp) == 0 && rename(f1, f0) == 0 && rename(tmp, f1) == 0, "swap back");
    /* the edited index names the same shard folder (its "dir"), beside it */
    if (g_rank == 0) reseal_index(path, edited, edit_overlap);
    MPI_Barrier(MPI_COMM_WORLD);
    st = volt_trainer_validate(t, &g_ops, &m, l, edited);
    expect_err(t, st, VOLT_ERR_CORRUPT, "overlaps another parameter of unit 'fc1'", "overlapping parameters");
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) reseal_index(path, edited, edit_swap_ranges);
    MPI_Barrier(MPI_COMM_WORLD);
    st = volt_trainer_validate(t, &g_ops, &m, l, edited);
    expect_err(t, st, VOLT_ERR_CORRUPT, "are not in rank order", "swapped ranges");
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) reseal_index(path, edited, edit_none);   /* the rewrite itself is sound */
    MPI_Barrier(MPI_COMM_WORLD);
    st = volt_trainer_validate(t, &g_ops, &m, l, edited);
    CHECK(st == VOLT_OK, "rank %d: the resealed, unedited index loads: %s", g_rank, volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    validate_ok(strategy, path, "the original");
    volt_loader_destroy(l);
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
        fprintf(stderr, "usage: mpirun -np N test_mpi_consistency ckpt_path|save_one|snapshot_one|model|other_file|shards "
                "STRATEGY, or sites mpi|nccl\n");
        return 2;
    }
    const int skip = vtest_mpi_start(&argc, &argv, &g_rank, &g_world);
    if (skip) return skip;
    snprintf(g_dir, sizeof g_dir, "%s/%s_%s_np%d", vtest_tmpdir(), argv[1], argv[2], g_world);
    if (g_rank == 0) vtest_fresh_dir(g_dir);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!strcmp(argv[1], "ckpt_path")) test_ckpt_path(argv[2]);
    else if (!strcmp(argv[1], "save_one")) test_save_one(argv[2], &g_saver);
    else if (!strcmp(argv[1], "snapshot_one")) test_save_one(argv[2], &g_snapper);
    else if (!strcmp(argv[1], "sites")) test_sites(argv[2]);
    else if (!strcmp(argv[1], "model")) test_model(argv[2]);
    else if (!strcmp(argv[1], "other_file")) test_other_file(argv[2]);
    else if (!strcmp(argv[1], "shards")) test_shards(argv[2]);
    else {
        fprintf(stderr, "unknown mode '%s'\n", argv[1]);
        MPI_Finalize();
        return 2;
    }
    return vtest_mpi_finish();
#endif
}
