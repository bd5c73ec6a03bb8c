/* The cuda backend's device memory high-water (core/cuda/memstat.c: what bench/gpu/run.sh
 * reports as volt's peak device memory, against torch.cuda.max_memory_allocated). Label gpu:
 * without a cuda backend or device it exits 77 (skipped), saying why; the simulator build
 * runs it (label cudasim).
 * Checks: pool allocations raise the high-water by at least their size and a reset brings it
 * back to the current use; unit buffers (alloc_givable: VMM granules when the driver has
 * VMM) raise it too; a non-cuda device is refused. And the backend's memory_stats (current,
 * peak, reserved, free and total bytes); the cpu backend has none (VOLT_ERR_UNSUPPORTED). */
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

    /* the backend's memory_stats (DeviceStatsMonitor, volt_trainer_device_memory): current
     * bytes follow a 12 MiB buffer up and back down, the peak keeps it, reserved >= allocated,
     * the device's free <= total */
    volt_device_memory m0, m1, m2;
    CHECK_OK(volt__dev_memory_stats(d, &m0, err, sizeof err));
    void *c = volt__dev_alloc(d, 12 * MIB);
    CHECK(c != NULL, "a 12 MiB allocation failed");
    CHECK_OK(volt__dev_memory_stats(d, &m1, err, sizeof err));
    if (c) d->be->free(d, c);
    d->be->synchronize(d);
    CHECK_OK(volt__dev_memory_stats(d, &m2, err, sizeof err));
    printf("memory_stats: allocated %.2f -> %.2f -> %.2f MiB (peak %.2f), reserved %.2f MiB, free %.0f of %.0f MiB\n",
           m0.allocated_bytes / (double)MIB, m1.allocated_bytes / (double)MIB, m2.allocated_bytes / (double)MIB,
           m2.allocated_peak_bytes / (double)MIB, m2.reserved_bytes / (double)MIB, m2.free_bytes / (double)MIB,
           m2.total_bytes / (double)MIB);
    CHECK(m1.allocated_bytes >= m0.allocated_bytes + 12 * (int64_t)MIB, "allocated %lld with a 12 MiB buffer, %lld before",
          (long long)m1.allocated_bytes, (long long)m0.allocated_bytes);
    CHECK(m2.allocated_bytes + 12 * (int64_t)MIB <= m1.allocated_bytes, "allocated %lld after the buffer was freed (%lld with it)",
          (long long)m2.allocated_bytes, (long long)m1.allocated_bytes);
    CHECK(m2.allocated_peak_bytes >= m1.allocated_bytes && m1.reserved_bytes >= m1.allocated_bytes &&
              m2.reserved_peak_bytes >= m1.reserved_bytes,
          "peak %lld (allocated %lld with the buffer), reserved %lld, reserved peak %lld", (long long)m2.allocated_peak_bytes,
          (long long)m1.allocated_bytes, (long long)m1.reserved_bytes, (long long)m2.reserved_peak_bytes);
    CHECK(m2.total_bytes > 0 && m2.free_bytes >= 0 && m2.free_bytes <= m2.total_bytes, "free %lld of %lld",
          (long long)m2.free_bytes, (long long)m2.total_bytes);
    CHECK(volt__dev_memory_stats(cpu, &m0, err, sizeof err) == VOLT_ERR_UNSUPPORTED && strstr(err, "'cpu'"),
          "cpu memory_stats: %s", err);
    return vtest_finish();
}
#else
int main(void) {
    printf("SKIP: volt was built without the cuda backend\n");
    return 77;
}
#endif
