/* The per-op profile (core/profile.c, VOLT_PROFILE=1): off by default; on, it counts the
 * steps after the warm-up (VOLT_PROFILE_WARMUP), one row per op that ran with its calls per
 * step and forward/backward times, the grad set-up and the time outside kernels; the
 * times add up to the begin-to-end time; a bad warm-up value falls back to 1. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vtest.h"
#include "core/internal.h"
#include "volt/ops.h"

static volt_step *mk(void) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 22;
    volt_step *s = NULL;
    CHECK(volt_step_create(&cfg, &s) == VOLT_OK, "step create");
    return s;
}

/* n steps of sum(relu(x W^T)) with backward; the last one sleeps 30 ms between forward
 * and backward (outside kernels) */
static void run_steps(volt_step *s, int n) {
    static float x[256 * 256], w[256 * 256];
    for (int i = 0; i < 256 * 256; i++) x[i] = (float)(i % 7) - 3.f;
    for (int i = 0; i < 256 * 256; i++) w[i] = (float)(i % 5) * 0.1f - 0.2f;
    for (int k = 0; k < n; k++) {
        volt_step_begin(s, true, (uint64_t)k);
        volt_tensor *tx = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(256, 256), x);
        volt_tensor *tw = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(256, 256), w));
        volt_tensor *l = volt_sum(s, volt_relu(s, volt_linear(s, tx, tw, NULL)));
        if (k == n - 1) usleep(30000);
        CHECK(l && volt_step_backward(s, l) == VOLT_OK, "step %d: %s", k, volt_step_errmsg(s));
        volt_step_end(s);
    }
}

static double field(const char *row, int col) {   /* col-th '|' cell of a table row */
    const char *p = row;
    for (int c = 0; c <= col && p; c++) p = strchr(p + 1, '|');
    return p ? atof(p + 1) : -1.;
}

int main(void) {
    unsetenv("VOLT_PROFILE");
    volt_step *s = mk();
    char buf[8192];
    CHECK(s && !s->prof && volt__profile_format(s, buf, sizeof buf) == 0 && !buf[0], "profile on without VOLT_PROFILE");
    volt_step_destroy(s);

    setenv("VOLT_PROFILE", "1", 1);
    setenv("VOLT_PROFILE_WARMUP", "2", 1);
    s = mk();
    CHECK(s && s->prof, "VOLT_PROFILE=1: no profile");
    run_steps(s, 2);
    volt__profile_format(s, buf, sizeof buf);
    CHECK(strstr(buf, "no step counted (2 seen, 2 warm-up)"), "warm-up steps counted:\n%s", buf);
    run_steps(s, 3);
    volt__profile_format(s, buf, sizeof buf);
    printf("%s", buf);
    CHECK(strstr(buf, "3 steps after 2 warm-up"), "step count:\n%s", buf);
    const char *lin = strstr(buf, "| linear |"), *relu = strstr(buf, "| relu |"), *sum = strstr(buf, "| sum |");
    const char *out = strstr(buf, "| (outside kernels");
    CHECK(lin && relu && sum && out && strstr(buf, "| (grad set-up"), "rows missing:\n%s", buf);
    double step = atof(strstr(buf, "warm-up, ") + 9);
    if (lin && relu && sum && out) {
        CHECK(field(lin, 0) == 1. && field(relu, 0) == 1. && field(sum, 0) == 1., "calls per step:\n%s", buf);
        CHECK(field(lin, 1) > 0. && field(lin, 2) > 0., "linear forward/backward times:\n%s", buf);
        /* the 30 ms sleep of one step in three lands outside kernels: >= 10 ms per step */
        CHECK(field(out, 3) >= 9.9 && step >= 9.9, "outside kernels %.2f, step %.2f:\n%s", field(out, 3), step, buf);
        double rows = 0.;
        for (const char *r = strstr(buf, "|---|"); r && (r = strstr(r + 1, "\n| ")); ) rows += field(r + 1, 3);
        CHECK(rows > step * 0.99 - 0.05 && rows < step * 1.01 + 0.05, "rows add up to %.3f, step %.3f", rows, step);
    }
    volt_step_destroy(s);   /* prints the table to stderr */

    /* a bad warm-up: a warning and 1 */
    setenv("VOLT_PROFILE_WARMUP", "x3", 1);
    s = mk();
    run_steps(s, 2);
    volt__profile_format(s, buf, sizeof buf);
    CHECK(strstr(buf, "1 steps after 1 warm-up"), "bad VOLT_PROFILE_WARMUP:\n%s", buf);
    volt_step_destroy(s);
    return vtest_finish();
}
