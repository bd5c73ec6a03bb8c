/* vtest.h — the tiny assertion layer every test executable uses.
 * CHECK(cond, fmt, ...) records a failure and continues; the test's main returns
 * vtest_finish(), which prints "N passed, N failed" and gives the exit status.
 *
 * Missing data or MPI (docs/TESTING.md): under CI (the environment variable CI set, as
 * `CI=true bash .ci/run` does) it is a failure; elsewhere the test is skipped (ctest's skip
 * code 77) with a line saying what is missing. vtest_missing(what) records it for a part
 * of a test and lets the other parts run (vtest_finish then returns 1 in CI, 77 outside
 * when nothing failed); VTEST_SKIP(reason) ends the test at once the same way. */
#ifndef VTEST_H
#define VTEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include "volt/core.h"
#include "volt/data.h"
#include "volt/dtype.h"
#include "volt/ops.h"
#include "volt/trainer.h"

static int vtest_pass_, vtest_fail_;

#define CHECK(cond, ...) do { \
    if (cond) { vtest_pass_++; } else { vtest_fail_++; \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_OK(expr) do { volt_status st__ = (expr); \
    CHECK(st__ == VOLT_OK, "%s returned %s", #expr, volt_status_str(st__)); } while (0)
/* |a-b| <= atol + rtol*|b| */
#define CHECK_CLOSE(a, b, rtol, atol) do { double a__ = (a), b__ = (b); \
    CHECK(fabs(a__ - b__) <= (atol) + (rtol) * fabs(b__), "%s=%.9g vs %s=%.9g", #a, a__, #b, b__); } while (0)
/* CI is set (and not "", "0" or "false"): nothing may be skipped */
static inline bool vtest_in_ci(void) {
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
}
static int vtest_missing_;
static inline void vtest_missing(const char *what) {
    if (vtest_in_ci()) { vtest_fail_++; fprintf(stderr, "FAIL: missing under CI: %s\n", what); return; }
    vtest_missing_++;
    printf("SKIP: %s\n", what);
}
#define VTEST_SKIP(reason) do { vtest_missing(reason); \
    if (vtest_in_ci()) { printf("%d passed, %d failed\n", vtest_pass_, vtest_fail_); exit(1); } exit(77); } while (0)

/* A loader over ds with batch size bs and the tests' fixed shuffle seed (5). */
static inline volt_loader *vtest_loader(volt_dataset *ds, int64_t bs, bool shuffle) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = bs;
    lc.shuffle = shuffle;
    lc.seed = 5;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &l));
    return l;
}

/* n rows of the same linear function of 4 features (row i's values depend on i alone: every
 * rank makes the same dataset), the data of the callback and multi-rank tests; NULL (a failed check) on error. */
static inline volt_dataset *vtest_rows4(int n) {
    float *x = malloc(sizeof(float) * 4 * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    CHECK(x && y, "out of memory");
    volt_dataset *ds = NULL;
    if (x && y) {
        for (int i = 0; i < n; i++) {
            y[i] = 0.1f;
            for (int j = 0; j < 4; j++) {
                x[i * 4 + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.5f;
                y[i] += (float)(j + 1) * 0.25f * x[i * 4 + j];
            }
        }
        volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(4) }, { "y", VOLT_F32, VOLT_SHAPE(1) } };
        const void *d[2] = { x, y };
        CHECK_OK(volt_dataset_from_arrays(2, f, d, n, &ds));   /* copied */
    }
    free(x);
    free(y);
    return ds;
}
/* The 4 -> 1 linear model many tests train on vtest_rows4 ("fc.weight", "fc.bias"): a module whose
 * struct starts with these two tensors uses these as its setup and its (MSE) training step. */
typedef struct vtest_lin4 { volt_tensor *w, *b; } vtest_lin4;
static inline volt_status vtest_lin4_setup(void *self, volt_params *ps) {
    vtest_lin4 *m = self;
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(1, 4), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}
static inline volt_tensor *vtest_lin4_loss(void *self, volt_step *s, const volt_batch *b) {
    vtest_lin4 *m = self;
    return volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
}
static inline volt_status vtest_lin4_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_step_set_loss(s, vtest_lin4_loss(self, s, b));
}

/* A trainer config for tests: defaults, then no checkpoints, loggers, progress bar, model
 * summary or sanity check, one epoch, logs (if turned back on) under root. */
static inline void vtest_quiet_config(volt_trainer_config *c, const char *root) {
    volt_trainer_config_init(c);
    c->max_epochs = 1;
    c->enable_checkpointing = c->enable_logger = c->enable_progress_bar = c->enable_model_summary = false;
    c->num_sanity_val_steps = 0;
    c->default_root_dir = root;
}

/* t's values as f32 in host memory (n = numel floats), whatever its float dtype: device
 * memory is read only through copies (cpu-strict faults on a direct read). */
static inline void vtest_f32(const volt_tensor *t, float *dst) {
    size_t bytes = volt_tensor_bytes(t);
    void *tmp = malloc(bytes ? bytes : 1);
    volt_tensor_to_host(t, tmp);
    volt_convert(dst, VOLT_F32, tmp, t->dtype, volt_tensor_numel(t));
    free(tmp);
}

/* The trainer's device: "auto" resolves to $VOLT_ACCELERATOR, so a _strict ctest variant
 * (VOLT_ACCELERATOR=cpu-strict, tests/strict_*.cmake) cannot fall back to cpu unnoticed.
 * Needs volt/trainer.h (included by the test before vtest.h or after: a macro). */
#define vtest_check_accelerator() do { \
    volt_trainer_config c_; volt_trainer_config_init(&c_); volt_trainer *t_ = NULL; \
    CHECK_OK(volt_trainer_create(&c_, &t_)); \
    const char *env_ = getenv("VOLT_ACCELERATOR"); \
    printf("accelerator: %s (device %d)\n", volt_trainer_accelerator(t_), volt_trainer_device_index(t_)); \
    if (env_ && *env_) CHECK(!strcmp(volt_trainer_accelerator(t_), env_), "auto = $VOLT_ACCELERATOR=%s, got %s", \
                             env_, volt_trainer_accelerator(t_)); \
    volt_trainer_destroy(t_); } while (0)

static inline int vtest_finish(void) {
    printf("%d passed, %d failed%s\n", vtest_pass_, vtest_fail_, vtest_missing_ ? " (parts skipped: see SKIP above)" : "");
    return vtest_fail_ ? 1 : vtest_missing_ ? 77 : 0;
}

/* A per-test scratch directory (from ctest's VOLT_TEST_TMP, else /tmp/volt_test). */
/* CLOCK_MONOTONIC in seconds: deadlines and timings inside tests. */
static inline double vtest_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* A whole file (malloc'ed, one extra NUL byte after it) and its size in *n; NULL when unreadable. */
/* Split a CSV line (no quoted commas: metrics.csv's numbers and names) in place at its commas:
 * cells[0..return) point into line. At most max cells. */
static inline int vtest_csv_cells(char *line, char **cells, int max) {
    int nc = 0;
    for (char *p = line; nc < max;) {
        cells[nc++] = p;
        char *q = strchr(p, ',');
        if (!q) break;
        *q = 0;
        p = q + 1;
    }
    return nc;
}

static inline unsigned char *vtest_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[len] = 0; *n = (size_t)len; }
    return b;
}
static inline const char *vtest_tmpdir(void) {
    const char *d = getenv("VOLT_TEST_TMP");
    if (!d) d = "/tmp/volt_test";
    mkdir(d, 0755);
    return d;
}

/* path, emptied: what an earlier run of the test left there goes first (rm -rf, then mkdir). */
static inline void vtest_fresh_dir(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "vtest: cannot clean %s\n", path);
    mkdir(path, 0755);
}

/* stderr into the file path while a call runs (what volt notes there); vtest_stderr_back puts it
 * back and reads the file into buf (cap bytes). */
static inline int vtest_stderr_to(const char *path) {
    fflush(stderr);
    int saved = dup(STDERR_FILENO), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    CHECK(saved >= 0 && fd >= 0, "capturing stderr into %s", path);
    if (fd >= 0) { dup2(fd, STDERR_FILENO); close(fd); }
    return saved;
}
static inline void vtest_stderr_back(int saved, const char *path, char *buf, size_t cap) {
    fflush(stderr);
    if (saved >= 0) { dup2(saved, STDERR_FILENO); close(saved); }
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) { buf[fread(buf, 1, cap - 1, f)] = 0; fclose(f); }
}
#endif
