/* DeviceStatsMonitor (callbacks/device_stats_monitor.c) and volt_trainer_device_memory.
 *
 * On the cpu (no argument): the host's three stats, Lightning's names, before and after
 * exactly the batches whose optimizer step the loggers write (log_every_n_steps; with
 * accumulation, after the window's last micro-batch), nothing else fresh at other batch ends;
 * cpu_percent sees a busy loop run between the two samples (not a constant); with files of
 * the test's own ($VOLT_PROC_DIR) every figure is exact (busy over all ticks since the previous
 * sample, guest not counted twice; vm and swap) and a meminfo without MemAvailable is refused
 * at fit start; cpu_vm_percent
 * agrees with /proc/meminfo read here; the values reach metrics.csv in their steps' rows
 * (the monitor runs before the loggers); cpu_stats = 0 on the cpu logs nothing (Lightning);
 * fast_dev_run logs nothing; no logger = a clear error at fit start (a callback named
 * *Logger counts); bad configs; device memory is refused on the cpu with a reason.
 *
 * "cuda" (label gpu, the simulator in CI; exit 77 without a device): the device's four memory
 * stats (allocated / reserved, current / peak: positive, ordered) and no host stats by
 * default; cpu_stats = 1 adds the host's; volt_trainer_device_memory after fit holds the
 * model's parameters at least. */
#include <math.h>
#include <time.h>
#include <unistd.h>
#include "vtest.h"
#include "core/internal.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "metric_probe.h"

enum { NS = 80, IN = 3, BS = 8, NB = NS / BS };
static float X[NS * IN], Y[NS];
static volt_dataset *DS;
static const char *ACC = "cpu";

typedef struct { volt_tensor *w, *b; } regr;
static volt_status regr_setup(void *self, volt_params *ps) {
    regr *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(1, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}
static volt_status regr_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    volt_tensor *loss = volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
    volt_log(s, "train_loss", loss, VOLT_LOG_STEP);
    return volt_step_set_loss(s, loss);
}
static volt_status sgd_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops regr_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup,
                                          .configure_optimizers = sgd_opt, .training_step = regr_train };

/* ---- the probe (tests/metric_probe.h): the fresh "DeviceStatsMonitor." metrics after each
 * train batch end; optionally a busy loop at each batch start (after the monitor's start
 * sample, before its end sample) ---- */
static const char *const HOST[3] = { "cpu_percent", "cpu_vm_percent", "cpu_swap_percent" };
static const char *const DEV[4] = { "allocated_bytes.all.current", "allocated_bytes.all.peak",
                                    "reserved_bytes.all.current", "reserved_bytes.all.peak" };
static double stat_of(const rec *r, const char *hook, const char *stat) {
    char name[96];
    snprintf(name, sizeof name, "DeviceStatsMonitor.%s/%s", hook, stat);
    return rv(r, name);
}

/* MemTotal - MemAvailable over MemTotal, in percent, read here */
static double vm_now(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return NAN;
    char line[256];
    double total = NAN, avail = NAN;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "MemTotal:", 9)) total = atof(line + 9);
        if (!strncmp(line, "MemAvailable:", 13)) avail = atof(line + 13);
    }
    fclose(f);
    return 100.0 * (total - avail) / total;
}

typedef struct run { volt_trainer *t; probe pr; regr m; } run;

static volt_status fit(run *r, const char *name, volt_trainer_config *c, const volt_device_stats_config *dc,
                       bool add_monitor) {
    char root[512];
    snprintf(root, sizeof root, "%s/%s", vtest_tmpdir(), name);
    vtest_fresh_dir(root);
    c->default_root_dir = root;
    c->accelerator = ACC;
    memset(r, 0, sizeof *r);
    r->pr.prefix = "DeviceStatsMonitor.";
    CHECK_OK(volt_trainer_create(c, &r->t));
    if (!r->t) return VOLT_ERR_STATE;
    if (add_monitor) CHECK_OK(volt_add_device_stats_monitor(r->t, dc));
    CHECK_OK(volt_trainer_add_callback(r->t, &probe_ops, &r->pr));
    volt_loader *l = vtest_loader(DS, BS, false);
    volt_status st = volt_trainer_fit(r->t, &regr_ops, &r->m, l, NULL, NULL);
    volt_loader_destroy(l);
    return st;
}

static void logger_config(volt_trainer_config *c, int64_t every) {
    vtest_quiet_config(c, NULL);
    c->enable_logger = true;
    c->enable_tensorboard = c->enable_plots = false;
    c->log_every_n_steps = every;
    c->max_epochs = 2;
}

/* which records hold the monitor's metrics: exactly those after the steps that make a row;
 * each such record has every stat of `stats` at both hooks, and nothing else of the monitor */
static int check_rows(const probe *p, int64_t every, const char *const *stats, int ns, const char *what) {
    int rows = 0;
    for (int i = 0; i < p->n; i++) {
        const rec *r = &p->at[i];
        const bool row = r->gs > 0 && r->gs % every == 0 && (i == 0 || p->at[i - 1].gs != r->gs);
        if (!row) {
            CHECK(r->n == 0, "%s: batch %d (step %lld) has %d monitor metrics (first %s); no row is written there", what,
                  i, (long long)r->gs, r->n, r->n ? r->names[0] : "");
            continue;
        }
        rows++;
        CHECK(r->n == 2 * ns, "%s: batch %d (step %lld): %d monitor metrics, want %d", what, i, (long long)r->gs, r->n,
              2 * ns);
        for (int k = 0; k < ns; k++) {
            CHECK(isfinite(stat_of(r, "on_train_batch_start", stats[k])) && isfinite(stat_of(r, "on_train_batch_end", stats[k])),
                  "%s: step %lld lacks %s at the start or the end", what, (long long)r->gs, stats[k]);
        }
    }
    return rows;
}

/* ---- the cpu ---------------------------------------------------------------------------------- */
static void test_cpu(void) {
    volt_trainer_config c;
    logger_config(&c, 3);
    run r;
    r.pr.spin_s = 0;
    volt_device_stats_config dc;
    volt_device_stats_config_init(&dc);
    CHECK(dc.version == VOLT_DEVICE_STATS_CONFIG_VERSION && dc.cpu_stats == -1, "config_init: version %u cpu_stats %d",
          dc.version, dc.cpu_stats);
    memset(&r, 0, sizeof r);
    r.pr.prefix = "DeviceStatsMonitor.";
    char root[512];
    snprintf(root, sizeof root, "%s/cpu", vtest_tmpdir());
    vtest_fresh_dir(root);
    c.default_root_dir = root;
    CHECK_OK(volt_trainer_create(&c, &r.t));
    CHECK_OK(volt_add_device_stats_monitor(r.t, &dc));
    r.pr.spin_s = 0.06;   /* 60 ms of one core's time between the two samples of each batch */
    CHECK_OK(volt_trainer_add_callback(r.t, &probe_ops, &r.pr));
    volt_loader *l = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL));
    volt_loader_destroy(l);
    CHECK(r.pr.n == 2 * NB, "probe saw %d batch ends, want %d", r.pr.n, 2 * NB);
    const int rows = check_rows(&r.pr, 3, HOST, 3, "cpu");
    CHECK(rows == 2 * NB / 3, "cpu: %d rows with stats, want %d (steps 3, 6, ..., 18)", rows, 2 * NB / 3);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const double vm = vm_now();
    for (int i = 0; i < r.pr.n; i++) {
        const rec *q = &r.pr.at[i];
        if (!q->n) continue;
        for (int k = 0; k < 3; k++)
            for (int h = 0; h < 2; h++) {
                const double v = stat_of(q, h ? "on_train_batch_end" : "on_train_batch_start", HOST[k]);
                CHECK(v >= 0 && v <= 100, "step %lld: %s = %g, outside 0..100", (long long)q->gs, HOST[k], v);
            }
        /* the spin (60 ms of one of ncpu cores) lies between this batch's samples: busy time
         * over all time is at least most of 1/ncpu of it (other load only adds) */
        const double busy = stat_of(q, "on_train_batch_end", "cpu_percent");
        CHECK(busy >= 60.0 / (double)ncpu, "step %lld: cpu_percent %.1f after a 60 ms busy loop on a %ld-cpu host",
              (long long)q->gs, busy, ncpu);
        const double v = stat_of(q, "on_train_batch_end", "cpu_vm_percent");
        CHECK(fabs(v - vm) < 10, "step %lld: cpu_vm_percent %.2f, /proc/meminfo says %.2f", (long long)q->gs, v, vm);
    }
    /* metrics.csv: the columns, filled in the rows of steps 3, 6, ... (the step column is global_step - 1) */
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.csv", volt_trainer_log_dir(r.t) ? volt_trainer_log_dir(r.t) : root);
    size_t n = 0;
    char *csv = (char *)vtest_slurp(path, &n);
    CHECK(csv != NULL, "no %s", path);
    int col[6], ncol = 0, step_col = -1, filled = 0, lines = 0;
    for (char *line = csv ? strtok(csv, "\n") : NULL; line; line = strtok(NULL, "\n"), lines++) {
        char *cells[48];
        const int nc = vtest_csv_cells(line, cells, 48);
        if (lines == 0) {
            for (int i = 0; i < nc; i++) {
                if (!strcmp(cells[i], "step")) step_col = i;
                if (!strncmp(cells[i], "DeviceStatsMonitor.on_train_batch_", 34) && ncol < 6) col[ncol++] = i;
            }
            continue;
        }
        int have = 0;
        for (int k = 0; k < ncol; k++) have += col[k] < nc && *cells[col[k]];
        if (!have) continue;
        const long step = step_col >= 0 ? strtol(cells[step_col], NULL, 10) : -1;
        CHECK(have == 6 && (step + 1) % 3 == 0, "metrics.csv: row of step %ld has %d of the 6 stats", step, have);
        filled++;
    }
    CHECK(ncol == 6 && filled == rows, "metrics.csv: %d stat columns (want 6), %d rows with them (want %d)", ncol, filled, rows);
    free(csv);
    volt_device_memory dm;
    CHECK(volt_trainer_device_memory(r.t, &dm) == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(r.t), "host"),
          "device_memory on the cpu: %s", volt_trainer_errmsg(r.t));
    volt_trainer_destroy(r.t);
}

/* ---- exact figures from files of our own ($VOLT_PROC_DIR) ---------------------------------------
 * A writer (after the monitor in each hook) moves the files on after each of the monitor's
 * samples: state j adds (10 + j) user, 5 system, 50 idle, 5 iowait and 3 guest ticks (guest
 * is inside user: not counted twice), so busy grows by 15 + j of 70 + j; MemAvailable is
 * 1000 - 10 j of 1000 kB and SwapFree 200 - 2 j of 200 kB: vm and swap are j percent. */
typedef struct fake_proc { char dir[512]; int j; unsigned long long user, sys, idle, iowait, guest; bool no_avail; } fake_proc;
static void fake_write(fake_proc *f) {
    char path[600];
    snprintf(path, sizeof path, "%s/stat", f->dir);
    FILE *o = fopen(path, "w");
    if (o) {
        fprintf(o, "cpu  %llu 0 %llu %llu %llu 0 0 0 %llu 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345\n", f->user, f->sys, f->idle,
                f->iowait, f->guest);
        fclose(o);
    }
    snprintf(path, sizeof path, "%s/meminfo", f->dir);
    if ((o = fopen(path, "w"))) {
        fprintf(o, "MemTotal:        1000 kB\nMemFree:          100 kB\n");
        if (!f->no_avail) fprintf(o, "MemAvailable:     %d kB\n", 1000 - 10 * f->j);
        fprintf(o, "Buffers:            0 kB\nSwapCached:          0 kB\nSwapTotal:       200 kB\nSwapFree:        %d kB\n",
                200 - 2 * f->j);
        fclose(o);
    }
}
static void fake_next(fake_proc *f) {
    f->j++;
    f->user += 10 + (unsigned long long)f->j;
    f->sys += 5;
    f->idle += 50;
    f->iowait += 5;
    f->guest += 3;
    fake_write(f);
}
static volt_status fake_hook(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)t; (void)b; (void)i;
    fake_next(self);
    return VOLT_OK;
}
static const volt_callback_ops fake_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "FakeProc",
                                            .on_train_batch_start = fake_hook, .on_train_batch_end = fake_hook };

static void test_fake_proc(void) {
    static fake_proc f;
    memset(&f, 0, sizeof f);
    snprintf(f.dir, sizeof f.dir, "%s/proc", vtest_tmpdir());
    vtest_fresh_dir(f.dir);
    f.user = 1000;
    f.sys = 500;
    f.idle = 9000;
    fake_write(&f);
    volt_trainer_config c;
    logger_config(&c, 1);
    c.max_epochs = 1;
    char root[512];
    snprintf(root, sizeof root, "%s/fake", vtest_tmpdir());
    vtest_fresh_dir(root);
    c.default_root_dir = root;
    run r;
    memset(&r, 0, sizeof r);
    r.pr.prefix = "DeviceStatsMonitor.";
    CHECK_OK(volt_trainer_create(&c, &r.t));
    setenv("VOLT_PROC_DIR", f.dir, 1);   /* read when the monitor is added */
    CHECK_OK(volt_add_device_stats_monitor(r.t, NULL));
    unsetenv("VOLT_PROC_DIR");
    CHECK_OK(volt_trainer_add_callback(r.t, &fake_ops, &f));
    CHECK_OK(volt_trainer_add_callback(r.t, &probe_ops, &r.pr));
    volt_loader *l = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL));
    CHECK(r.pr.n == NB, "fake: %d batch ends, want %d", r.pr.n, NB);
    for (int i = 0; i < r.pr.n; i++) {
        const rec *q = &r.pr.at[i];
        for (int h = 0; h < 2; h++) {
            const int j = 2 * i + h;   /* the state this sample read */
            const char *hook = h ? "on_train_batch_end" : "on_train_batch_start";
            const double cpu = j == 0 ? 0.0 : 100.0 * (15 + j) / (70 + j);
            const double got = stat_of(q, hook, "cpu_percent"), vm = stat_of(q, hook, "cpu_vm_percent"),
                         sw = stat_of(q, hook, "cpu_swap_percent");
            CHECK(fabs(got - cpu) < 1e-9 && fabs(vm - j) < 1e-9 && fabs(sw - j) < 1e-9,
                  "batch %d %s: cpu %.6f (want %.6f), vm %.6f, swap %.6f (want %d)", i, hook, got, cpu, vm, sw, j);
        }
    }
    volt_loader_destroy(l);
    volt_trainer_destroy(r.t);
    /* a meminfo without MemAvailable: refused at fit start, naming the file */
    f.no_avail = true;
    fake_write(&f);
    CHECK_OK(volt_trainer_create(&c, &r.t));
    setenv("VOLT_PROC_DIR", f.dir, 1);
    CHECK_OK(volt_add_device_stats_monitor(r.t, NULL));
    unsetenv("VOLT_PROC_DIR");
    l = vtest_loader(DS, BS, false);
    volt_status st = volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(r.t), "/proc/meminfo") &&
              strstr(volt_trainer_errmsg(r.t), "MemAvailable"),
          "no MemAvailable: %s (%s)", volt_status_str(st), volt_trainer_errmsg(r.t));
    volt_loader_destroy(l);
    volt_trainer_destroy(r.t);
}

/* accumulate 2, a row every 2 steps: the stats after the window's last micro-batch only */
static void test_accumulate(void) {
    volt_trainer_config c;
    logger_config(&c, 2);
    c.accumulate_grad_batches = 2;
    run r;
    CHECK_OK(fit(&r, "accumulate", &c, NULL, true));
    const int rows = check_rows(&r.pr, 2, HOST, 3, "accumulate 2");
    CHECK(rows == 5, "accumulate 2: %d rows with stats, want 5 (steps 2, 4, ..., 10)", rows);
    volt_trainer_destroy(r.t);
}

/* cpu_stats = 0 on the cpu: nothing (Lightning returns early); fast_dev_run: no logging */
static void test_quiet(void) {
    volt_trainer_config c;
    logger_config(&c, 1);
    volt_device_stats_config dc;
    volt_device_stats_config_init(&dc);
    dc.cpu_stats = 0;
    run r;
    CHECK_OK(fit(&r, "off", &c, &dc, true));
    int seen = 0;
    for (int i = 0; i < r.pr.n; i++) seen += r.pr.at[i].n;
    CHECK(r.pr.n == 2 * NB && seen == 0, "cpu_stats 0 on the cpu: %d monitor metrics over %d batches", seen, r.pr.n);
    volt_trainer_destroy(r.t);
    logger_config(&c, 1);
    c.fast_dev_run = 2;
    CHECK_OK(fit(&r, "fast_dev_run", &c, NULL, true));
    seen = 0;
    for (int i = 0; i < r.pr.n; i++) seen += r.pr.at[i].n;
    CHECK(r.pr.n == 2 && seen == 0, "fast_dev_run: %d monitor metrics over %d batches", seen, r.pr.n);
    volt_trainer_destroy(r.t);
}

static volt_status nop_hook(void *self, volt_trainer *t) {
    (void)self; (void)t;
    return VOLT_OK;
}
static const volt_callback_ops my_logger_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "MyLogger",
                                                 .on_fit_start = nop_hook };

static void test_errors(void) {
    volt_trainer_config c;
    vtest_quiet_config(&c, NULL);   /* enable_logger false */
    run r;
    volt_status st = fit(&r, "no_logger", &c, NULL, true);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(r.t), "DeviceStatsMonitor: the trainer has no logger"),
          "fit without a logger: %s (%s)", volt_status_str(st), volt_trainer_errmsg(r.t));
    CHECK(r.pr.n == 0, "fit without a logger ran %d batches", r.pr.n);
    volt_trainer_destroy(r.t);
    /* a logger of the user's own (named *Logger) will do */
    vtest_quiet_config(&c, NULL);
    c.log_every_n_steps = 5;
    char root[512];
    snprintf(root, sizeof root, "%s/my_logger", vtest_tmpdir());
    vtest_fresh_dir(root);
    c.default_root_dir = root;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_trainer_add_callback(t, &my_logger_ops, NULL));
    CHECK_OK(volt_add_device_stats_monitor(t, NULL));
    regr m;
    volt_loader *l = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL));
    double v = NAN;
    CHECK(volt_trainer_metric(t, "DeviceStatsMonitor.on_train_batch_end/cpu_vm_percent", &v) && v > 0 && v <= 100,
          "with MyLogger: cpu_vm_percent %g", v);
    /* a second one; bad configs */
    CHECK(volt_add_device_stats_monitor(t, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "one already"),
          "a second monitor: %s", volt_trainer_errmsg(t));
    volt_device_stats_config dc;
    volt_device_stats_config_init(&dc);
    dc.cpu_stats = 2;
    CHECK(volt_add_device_stats_monitor(t, &dc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "cpu_stats"),
          "cpu_stats 2: %s", volt_trainer_errmsg(t));
    dc.cpu_stats = -1;
    dc.version = 99;
    CHECK(volt_add_device_stats_monitor(t, &dc) == VOLT_ERR_VERSION && strstr(volt_trainer_errmsg(t), "version 99"),
          "version 99: %s", volt_trainer_errmsg(t));
    dc.version = 0;
    CHECK(volt_add_device_stats_monitor(t, &dc) == VOLT_ERR_VERSION, "version 0 accepted");
    CHECK(volt_add_device_stats_monitor(NULL, NULL) == VOLT_ERR_INVALID_ARG, "a NULL trainer accepted");
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
}

/* ---- cuda ------------------------------------------------------------------------------------- */
static void test_cuda(void) {
    volt_trainer_config c;
    logger_config(&c, 2);
    run r;
    CHECK_OK(fit(&r, "cuda", &c, NULL, true));
    int rows = check_rows(&r.pr, 2, DEV, 4, "cuda");
    CHECK(rows == NB, "cuda: %d rows with stats, want %d", rows, NB);
    for (int i = 0; i < r.pr.n; i++) {
        const rec *q = &r.pr.at[i];
        if (!q->n) continue;
        const double a = stat_of(q, "on_train_batch_end", DEV[0]), ap = stat_of(q, "on_train_batch_end", DEV[1]),
                     rs = stat_of(q, "on_train_batch_end", DEV[2]), rp = stat_of(q, "on_train_batch_end", DEV[3]);
        CHECK(a > 0 && ap >= a && rs >= a && rp >= rs && rp >= ap, "step %lld: allocated %g (peak %g), reserved %g (peak %g)",
              (long long)q->gs, a, ap, rs, rp);
    }
    volt_device_memory dm;
    CHECK_OK(volt_trainer_device_memory(r.t, &dm));
    printf("cuda: allocated %lld (peak %lld), reserved %lld (peak %lld), free %lld of %lld bytes\n",
           (long long)dm.allocated_bytes, (long long)dm.allocated_peak_bytes, (long long)dm.reserved_bytes,
           (long long)dm.reserved_peak_bytes, (long long)dm.free_bytes, (long long)dm.total_bytes);
    CHECK(dm.allocated_bytes >= (int64_t)sizeof(float) * (IN + 1) && dm.total_bytes > 0 && dm.free_bytes <= dm.total_bytes,
          "device_memory after fit: allocated %lld, free %lld, total %lld", (long long)dm.allocated_bytes,
          (long long)dm.free_bytes, (long long)dm.total_bytes);
    volt_trainer_destroy(r.t);
    /* cpu_stats = 1: the host's too */
    logger_config(&c, 2);
    volt_device_stats_config dc;
    volt_device_stats_config_init(&dc);
    dc.cpu_stats = 1;
    CHECK_OK(fit(&r, "cuda_cpu", &c, &dc, true));
    const char *both[7] = { DEV[0], DEV[1], DEV[2], DEV[3], HOST[0], HOST[1], HOST[2] };
    rows = check_rows(&r.pr, 2, both, 7, "cuda + cpu_stats");
    CHECK(rows == NB, "cuda + cpu_stats: %d rows with stats, want %d", rows, NB);
    volt_trainer_destroy(r.t);
}

int main(int argc, char **argv) {
    const bool cuda = argc > 1 && !strcmp(argv[1], "cuda");
    if (cuda) {
        const volt_backend *be = volt__backend_find("cuda");
        if (!be) { printf("SKIP: volt was built without the cuda backend\n"); return 77; }
        if (be->device_count() == 0) { printf("SKIP: no CUDA device (driver and GPU needed)\n"); return 77; }
        ACC = "cuda";
    }
    for (int i = 0; i < NS; i++) {
        for (int k = 0; k < IN; k++) X[i * IN + k] = sinf((float)(i * IN + k));
        Y[i] = 0.5f * X[i * IN] - 0.25f;
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_F32, VOLT_SHAPE(1) } };
    const void *d[2] = { X, Y };
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &DS));
    if (cuda) {
        test_cuda();
    } else {
        test_cpu();
        test_fake_proc();
        test_accumulate();
        test_quiet();
        test_errors();
    }
    volt_dataset_destroy(DS);
    return vtest_finish();
}
