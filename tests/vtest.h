/* vtest.h — the tiny assertion layer every test executable uses.
 * CHECK(cond, fmt, ...) records a failure and continues; the test's main returns
 * vtest_finish(), which prints "N passed, N failed" and gives the exit status.
 * VTEST_SKIP(reason) exits with ctest's skip code 77. */
#ifndef VTEST_H
#define VTEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include "volt/core.h"
#include "volt/data.h"

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
#define VTEST_SKIP(reason) do { printf("SKIP: %s\n", reason); exit(77); } while (0)

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

static inline int vtest_finish(void) {
    printf("%d passed, %d failed\n", vtest_pass_, vtest_fail_);
    return vtest_fail_ ? 1 : 0;
}

/* A per-test scratch directory (from ctest's VOLT_TEST_TMP, else /tmp/volt_test). */
static inline const char *vtest_tmpdir(void) {
    const char *d = getenv("VOLT_TEST_TMP");
    if (!d) d = "/tmp/volt_test";
    mkdir(d, 0755);
    return d;
}
#endif
