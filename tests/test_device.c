/* The backend as a device (core/device.h): the registry (built-ins, version and required
 * entries checked at registration, accelerator resolution and its errors), the cpu
 * backend's memory (copies, give-back, residency) and the cpu-strict backend: its memory
 * round-trips through copies, and a host read of it outside a backend call is caught
 * (the child that reads dies with SIGSEGV). */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "vtest.h"
#include "core/internal.h"

static void test_registry(void) {
    CHECK(volt__backend_find("cpu") != NULL, "cpu registered");
    CHECK(volt__backend_find("cpu-strict") != NULL, "cpu-strict registered");
    CHECK(volt__backend_find("nope") == NULL, "unknown backend");
    char err[256] = "";
    volt_device *d = NULL;
    CHECK(volt__device_get("tpu", 0, &d, err, sizeof err) == VOLT_ERR_UNSUPPORTED && !d, "unknown accelerator");
    CHECK(strstr(err, "'tpu'") && strstr(err, "\"cpu\""), "error names it and the known ones: %s", err);
    CHECK(volt__device_get("cpu", 3, &d, err, sizeof err) == VOLT_ERR_UNSUPPORTED, "cpu device 3");
    CHECK(strstr(err, "device 3"), "%s", err);
    volt_device *a = NULL, *b = NULL;
    CHECK_OK(volt__device_get("cpu", 0, &a, err, sizeof err));
    CHECK_OK(volt__device_get("cpu", 0, &b, err, sizeof err));
    CHECK(a && a == b && a->be == volt__backend_find("cpu"), "devices are cached");
    CHECK(a && (a->caps & VOLT_DEV_HOST_ADDRESSABLE), "cpu memory is host memory");
    /* a table of a future version, and one missing its memory entries, are refused */
    volt_backend future = *volt__backend_find("cpu");
    future.name = "future";
    future.version = VOLT_BACKEND_VERSION + 1;
    CHECK(volt__backend_register(&future, err, sizeof err) == VOLT_ERR_VERSION, "future version refused");
    CHECK(strstr(err, "version"), "%s", err);
    volt_backend partial = *volt__backend_find("cpu");
    partial.name = "partial";
    partial.copy = NULL;
    CHECK(volt__backend_register(&partial, err, sizeof err) == VOLT_ERR_INVALID_ARG, "missing copy refused");
    volt_backend dup = *volt__backend_find("cpu");
    CHECK(volt__backend_register(&dup, err, sizeof err) == VOLT_ERR_INVALID_ARG, "name taken");
    /* auto follows $VOLT_ACCELERATOR */
    setenv("VOLT_ACCELERATOR", "cpu-strict", 1);
    CHECK_OK(volt__device_get("auto", 0, &d, err, sizeof err));
    CHECK(d && !strcmp(d->be->name, "cpu-strict"), "auto -> $VOLT_ACCELERATOR");
    unsetenv("VOLT_ACCELERATOR");
    CHECK_OK(volt__device_get(NULL, 0, &d, err, sizeof err));
    CHECK(d && !strcmp(d->be->name, volt__backend_find("cuda") && volt__backend_find("cuda")->device_count() ? "cuda" : "cpu"),
          "auto without the variable");
}

static void roundtrip(const char *name) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get(name, 0, &d, err, sizeof err));
    if (!d) return;
    const size_t n = 3 * 4096 + 100;
    float *x = volt__dev_alloc(d, n * sizeof(float)), *y = volt__dev_alloc(d, n * sizeof(float));
    CHECK(x && y, "%s: alloc", name);
    CHECK(((uintptr_t)x & 4095) == 0, "%s: large allocations are page-aligned", name);
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)i * 0.5f;
    volt__dev_h2d(d, x, h, n * sizeof(float));
    volt__dev_d2d(d, y, x, n * sizeof(float));
    volt__dev_memset(d, y, 0, 10 * sizeof(float));
    volt__dev_d2h(d, back, y, n * sizeof(float));
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= back[i] == (i < 10 ? 0.f : h[i]);
    CHECK(ok, "%s: h2d, d2d, memset, d2h", name);
    /* give back the middle: it reads as zeros, the rest is kept, fewer bytes are resident */
    int64_t before = d->be->resident_bytes(d, y, n * sizeof(float));
    d->be->give_back(d, y + 1000, 2 * 4096 * sizeof(float));
    int64_t after = d->be->resident_bytes(d, y, n * sizeof(float));
    CHECK_OK(d->be->recommit(d, y + 1000, 2 * 4096 * sizeof(float)));
    volt__dev_d2h(d, back, y, n * sizeof(float));
    ok = true;
    for (size_t i = 10; i < n; i++) ok &= back[i] == (i >= 1000 && i < 1000 + 2 * 4096 ? 0.f : h[i]);
    CHECK(ok, "%s: give_back zeroes exactly its range", name);
    CHECK(after < before, "%s: resident %lld -> %lld bytes", name, (long long)before, (long long)after);
    volt__dev_free(d, x);
    volt__dev_free(d, y);
    free(h);
    free(back);
}

/* The child reads device memory directly: it must die, not print. */
static void test_strict_catches_host_read(void) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get("cpu-strict", 0, &d, err, sizeof err));
    if (!d) return;
    float *x = volt__dev_alloc(d, 64 * sizeof(float));
    float one = 1.f;
    volt__dev_h2d(d, x, &one, sizeof one);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        volatile float v = x[0];   /* the deliberate host read */
        printf("host read of device memory returned %g\n", (double)v);
        _exit(0);
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    /* SIGSEGV, or AddressSanitizer's report of it (a non-zero exit) in the sanitizer build */
    CHECK((WIFSIGNALED(wst) && WTERMSIG(wst) == SIGSEGV) || (WIFEXITED(wst) && WEXITSTATUS(wst) != 0),
          "the host read was not caught (status %#x)", wst);
    float back = 0;
    volt__dev_d2h(d, &back, x, sizeof back);
    CHECK(back == 1.f, "the copy still reads it");
    volt__dev_free(d, x);
}

/* Freed blocks coalesce: two neighbours freed give one block a request of both sizes reuses
 * (no new address space), and memory freed at the top lowers the handed-out end, so a larger
 * request later starts where it began. */
static void test_strict_coalesces(void) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get("cpu-strict", 0, &d, err, sizeof err));
    if (!d) return;
    const size_t M = 1u << 20;
    char *keep = volt__dev_alloc(d, M);   /* below the test's blocks: they are not the first */
    char *a = volt__dev_alloc(d, M), *b = volt__dev_alloc(d, 3 * M), *c = volt__dev_alloc(d, M);
    CHECK(keep && a && b && c && b == a + M && c == b + 3 * M, "blocks not laid out in order: %p %p %p", (void *)a,
          (void *)b, (void *)c);
    volt__dev_free(d, a);
    volt__dev_free(d, b);   /* a + b: one free block of 4 MiB below c */
    char *ab = volt__dev_alloc(d, 4 * M);
    CHECK(ab == a, "4 MiB after freeing 1 + 3 MiB neighbours: %p, want %p (they did not merge)", (void *)ab, (void *)a);
    /* the other order: the block after frees first, then the one before it joins it */
    volt__dev_free(d, ab);
    char *x = volt__dev_alloc(d, 2 * M), *y = volt__dev_alloc(d, 2 * M);
    CHECK(x == a && y == a + 2 * M, "two 2 MiB blocks in the 4 MiB hole: %p %p, want %p %p", (void *)x, (void *)y,
          (void *)a, (void *)(a + 2 * M));
    volt__dev_free(d, y);
    volt__dev_free(d, x);
    ab = volt__dev_alloc(d, 4 * M);
    CHECK(ab == a, "4 MiB after freeing 2 + 2 MiB (the later first): %p, want %p", (void *)ab, (void *)a);
    volt__dev_free(d, c);
    volt__dev_free(d, ab);   /* everything above keep: back to the top */
    char *big = volt__dev_alloc(d, 6 * M);
    CHECK(big == a, "6 MiB after freeing all above: %p, want %p (the top was not lowered)", (void *)big, (void *)a);
    volt__dev_free(d, big);
    volt__dev_free(d, keep);
}

int main(void) {
    test_registry();
    test_strict_coalesces();
    roundtrip("cpu");
    roundtrip("cpu-strict");
    test_strict_catches_host_read();
    return vtest_finish();
}
