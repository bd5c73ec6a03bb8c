/* The cuda backend's device memory high-water (core/cuda/memstat.c: what bench/gpu/run.sh
 * reports as volt's peak device memory, against torch.cuda.max_memory_allocated). Label gpu:
 * without a cuda backend or device it exits 77 (skipped), saying why; the simulator build
 * runs it (label cudasim).
 * Checks: pool allocations raise the high-water by at least their size and a reset brings it
 * back to the current use; unit buffers (alloc_givable: VMM granules when the driver has
 * VMM) raise it too; a non-cuda device is refused. */
#include "vtest.h"
#include "core/internal.h"
#ifdef VOLT_HAVE_CUDA
#include "core/cuda/memstat.h"

#define MIB (1024u * 1024u)

static uint64_t peak(volt_device *d, bool reset) {
    uint64_t b = 0;
    CHECK_OK(volt__cuda_mem_peak(d, &b, reset));
    return b;
}

int main(void) {
    const volt_backend *be = volt__backend_find("cuda");
    if (!be) { printf("SKIP: volt was built without the cuda backend\n"); return 77; }
    if (be->device_count() == 0) { printf("SKIP: no CUDA device (driver and GPU needed)\n"); return 77; }
    volt_device *d = NULL, *cpu = NULL;
    char err[256];
    CHECK_OK(volt__device_get("cuda", 0, &d, err, sizeof err));
    CHECK_OK(volt__device_get("cpu", 0, &cpu, err, sizeof err));
    if (!d || !cpu) return vtest_finish();

    /* pool: two 8 MiB buffers at once, freed; the high-water keeps them until a reset */
    peak(d, true);
    const uint64_t h0 = peak(d, false);
    void *a = volt__dev_alloc(d, 8 * MIB), *b = volt__dev_alloc(d, 8 * MIB);
    CHECK(a && b, "allocations failed");
    d->be->free(d, a);
    d->be->free(d, b);
    d->be->synchronize(d);
    const uint64_t h1 = peak(d, false);
    printf("pool: high-water %.2f MiB before, %.2f MiB after 2 x 8 MiB\n", h0 / (double)MIB, h1 / (double)MIB);
    CHECK(h1 >= h0 + 16 * MIB, "high-water %llu after two 8 MiB buffers, %llu before: they were not counted",
          (unsigned long long)h1, (unsigned long long)h0);
    const uint64_t h2 = peak(d, true), h3 = peak(d, false);
    CHECK(h2 == h1, "a read that resets returned %llu, the read before %llu", (unsigned long long)h2,
          (unsigned long long)h1);
    CHECK(h3 + 16 * MIB <= h1, "after the buffers were freed and the high-water reset it is %llu (was %llu)",
          (unsigned long long)h3, (unsigned long long)h1);

    /* unit buffers (VMM granules when the driver has VMM, else the pool) */
    void *u = volt__dev_alloc_givable(d, 6 * MIB);
    CHECK(u != NULL, "alloc_givable failed");
    const uint64_t h4 = peak(d, false);
    printf("unit buffer: high-water %.2f MiB after a 6 MiB unit buffer (from %.2f)\n", h4 / (double)MIB,
           h3 / (double)MIB);
    CHECK(h4 >= h3 + 6 * MIB, "high-water %llu after a 6 MiB unit buffer, %llu before", (unsigned long long)h4,
          (unsigned long long)h3);
    if (u) d->be->free(d, u);

    uint64_t x = 1;
    CHECK(volt__cuda_mem_peak(cpu, &x, false) == VOLT_ERR_INVALID_ARG && x == 0, "a cpu device was not refused");
    return vtest_finish();
}
#else
int main(void) {
    printf("SKIP: volt was built without the cuda backend\n");
    return 77;
}
#endif
