/* tests/cudasim/test_cudasim.cu — the CUDA simulator's own checks (tests/cudasim/README.md):
 * that it runs CUDA code the way a GPU does where volt's tests depend on it, and that it
 * refuses what a GPU refuses. Written in CUDA (transformed like core/cuda/ .cu files); ctest runs
 * it three ways: the main checks, then `deadlock` and `misaligned`, each of which ends in a
 * sticky error (so each needs its own process). */
#include <cuda_runtime.h>
#include <mma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <atomic>

static int g_fail, g_pass;
#define CHECK(c, ...) do { if (c) g_pass++; else { g_fail++; printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
    printf(__VA_ARGS__); printf("\n"); } } while (0)
#define OK(call) CHECK((call) == cudaSuccess, "%s", cudaGetErrorString(cudaGetLastError()))

/* each thread writes its slot, then reads its neighbour's (the next one, or with `prev` the
 * previous one): right only across a barrier */
__global__ void k_neighbour(int *out, bool sync, bool prev = false) {
    extern __shared__ int sl[];
    const int t = threadIdx.x, n = blockDim.x;
    sl[t] = t + 1000 * blockIdx.x;
    if (sync) __syncthreads();
    out[blockIdx.x * n + t] = sl[prev ? (t + n - 1) % n : (t + 1) % n];
}
/* block sum: warp shuffles, then one warp over the warps' sums */
__global__ void k_sum(const float *x, float *out, int n) {
    __shared__ float part[32];
    float v = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) atomicAdd(out, v);
    }
}
__global__ void k_or(int *out, int who) { out[blockIdx.x] = __syncthreads_or((int)threadIdx.x == who); }
__global__ void k_add(int *x, int v) { atomicAdd(x, v); }
__global__ void k_dims(unsigned *out) {
    const unsigned t = ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) +
                       (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    out[t] = t;
}
__global__ void k_mma(const __half *a, const __half *b, float *c) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 1.f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}
/* each warp its own tile: warp w of block b multiplies tile t = first + 2b + w of a and b, from
 * an accumulator of t == 3, into tile t of c */
template <class T>
__global__ void k_mma_tiles(const T *a, const T *b, float *c, int first) {
    using namespace nvcuda;
    const int t = first + blockIdx.x * 2 + threadIdx.x / 32;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, t == 3 ? 1.f : 0.f);
    wmma::load_matrix_sync(fa, a + t * 256, 16);
    wmma::load_matrix_sync(fb, b + t * 256, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c + t * 256, acc, 16, wmma::mem_row_major);
}
__global__ void k_deadlock() {
    if (threadIdx.x >= 32 && threadIdx.x < 48) __syncwarp();   /* waits for lanes 16-31 of warp 1 ... */
    else __syncthreads();                                       /* ... which wait here for it */
}

static std::atomic<int> g_gate;
static void CUDART_CB hold(void *) { while (!g_gate.load()) usleep(1000); }

static void main_checks() {
    int *d = nullptr;
    /* barriers are real: without one, the neighbour's slot is still the poison */
    OK(cudaMalloc(&d, 3 * 96 * sizeof(int)));
    int h[3 * 96];
    k_neighbour<<<3, 96, 96 * sizeof(int)>>>(d, true);
    OK(cudaGetLastError());
    OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 96; t++) bad += h[b * 96 + t] != (t + 1) % 96 + 1000 * b;
    CHECK(!bad, "%d of %d slots wrong across __syncthreads", bad, 3 * 96);
    k_neighbour<<<3, 96, 96 * sizeof(int)>>>(d, false);
    OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int t = 0; t < 95; t++) bad += h[t] == -1;   /* 0xffffffff: not yet written */
    CHECK(bad == 95, "without the barrier %d of 95 threads read an unwritten slot (want all)", bad);
    /* the previous thread's slot: block 0 runs its threads first to last, so each slot is
     * written before its reader runs; block 1 runs them last to first, so the race shows there */
    k_neighbour<<<3, 96, 96 * sizeof(int)>>>(d, false, true);
    OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int t = 1; t < 96; t++) bad += h[96 + t] == -1;
    CHECK(bad == 95, "without the barrier, reading the previous thread's slot: %d of 95 threads of the reversed block read "
          "an unwritten slot (want all)", bad);

    /* shuffles and shared memory: a sum over 4 blocks of 256 */
    const int n = 100003;
    float *x, *s, hs;
    float *hx = (float *)malloc(n * sizeof(float));
    double want = 0;
    for (int i = 0; i < n; i++) { hx[i] = (float)((i * 7919) % 1000) / 1000.f; want += hx[i]; }
    OK(cudaMalloc(&x, n * sizeof(float)));
    OK(cudaMalloc(&s, sizeof(float)));
    OK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
    OK(cudaMemset(s, 0, sizeof(float)));
    k_sum<<<4, 256>>>(x, s, n);
    OK(cudaMemcpy(&hs, s, sizeof hs, cudaMemcpyDeviceToHost));
    CHECK(fabs(hs - want) < 1e-3 * want, "sum %g, want %g", hs, want);
    int hor[2];
    k_or<<<2, 64>>>(d, 37);
    OK(cudaMemcpy(hor, d, sizeof hor, cudaMemcpyDeviceToHost));
    CHECK(hor[0] == 1 && hor[1] == 1, "__syncthreads_or: %d %d", hor[0], hor[1]);
    k_or<<<1, 64>>>(d, 99);
    OK(cudaMemcpy(hor, d, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(hor[0] == 0, "__syncthreads_or with no thread true: %d", hor[0]);

    /* 3-d grids and blocks: every thread once, at its linear index */
    unsigned *u, hu[2 * 3 * 2 * 4 * 2 * 3];
    OK(cudaMalloc(&u, sizeof hu));
    k_dims<<<dim3(2, 3, 2), dim3(4, 2, 3)>>>(u);
    OK(cudaMemcpy(hu, u, sizeof hu, cudaMemcpyDeviceToHost));
    bad = 0;
    for (unsigned i = 0; i < sizeof hu / sizeof hu[0]; i++) bad += hu[i] != i;
    CHECK(!bad, "%d threads of a 3-d launch misplaced", bad);

    /* wmma: C = 1 + A B with B column-major */
    __half ha[256], hb[256];
    float hc[256];
    for (int i = 0; i < 256; i++) { ha[i] = __float2half_rn((float)(i % 7) - 3.f); hb[i] = __float2half_rn((float)(i % 5) * 0.5f); }
    __half *da, *db;
    float *dc;
    OK(cudaMalloc(&da, sizeof ha));
    OK(cudaMalloc(&db, sizeof hb));
    OK(cudaMalloc(&dc, sizeof hc));
    OK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    k_mma<<<1, 32>>>(da, db, dc);
    OK(cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            float w = 1.f;
            for (int k = 0; k < 16; k++) w += __half2float(ha[r * 16 + k]) * __half2float(hb[c * 16 + k]);
            bad += hc[r * 16 + c] != w;
        }
    CHECK(!bad, "wmma: %d of 256 wrong", bad);

    /* wmma with other inputs per warp, then the same bytes read as bf16: each product its own.
     * cudasim_mma.h keeps the last product per host thread (a stream's kernels run in order on
     * one; with one warp per launch the products come in launch order): tiles 0 and 1 differ in
     * A only, 1 and 2 in B only, 2 and 3 in the accumulator only, and a bf16 launch follows an
     * f16 one over the same bytes; a product reused for inputs that differ in any of them is
     * wrong here */
    {
        uint16_t hx[4 * 256], hy[4 * 256];
        float hz[4 * 256];
        const int a_of[4] = { 0, 1, 1, 1 }, b_of[4] = { 0, 0, 1, 1 };
        for (int i = 0; i < 4 * 256; i++) {
            const int t = i / 256, e = i % 256;
            const __half x = __float2half_rn((float)((e * 7 + a_of[t]) % 11) - 5.f), y = __float2half_rn((float)((e + b_of[t]) % 3) * 0.25f);
            hx[i] = ((__half_raw)x).x;
            hy[i] = ((__half_raw)y).x;
        }
        void *dx, *dy;
        float *dz;
        OK(cudaMalloc(&dx, sizeof hx));
        OK(cudaMalloc(&dy, sizeof hy));
        OK(cudaMalloc(&dz, sizeof hz));
        OK(cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice));
        OK(cudaMemcpy(dy, hy, sizeof hy, cudaMemcpyHostToDevice));
        /* pass 0: f16, a launch of one warp per tile, tiles 0 1 2 3; pass 1: bf16, tiles 3 0 1 2 (3:
         * the last product's bytes); pass 2: f16, one launch of two blocks of two warps */
        for (int pass = 0; pass < 3; pass++) {
            const bool bf = pass == 1;
            for (int i = 0; i < 4 && pass < 2; i++) {
                const int t = pass == 1 ? (i + 3) % 4 : i;
                if (bf) k_mma_tiles<<<1, 32>>>((const __nv_bfloat16 *)dx, (const __nv_bfloat16 *)dy, dz, t);
                else k_mma_tiles<<<1, 32>>>((const __half *)dx, (const __half *)dy, dz, t);
            }
            if (pass == 2) k_mma_tiles<<<2, 64>>>((const __half *)dx, (const __half *)dy, dz, 0);
            OK(cudaMemcpy(hz, dz, sizeof hz, cudaMemcpyDeviceToHost));
            bad = 0;
            for (int t = 0; t < 4; t++)
                for (int r = 0; r < 16; r++)
                    for (int c = 0; c < 16; c++) {
                        float w = t == 3 ? 1.f : 0.f;
                        for (int k = 0; k < 16; k++) {
                            __half_raw xr, yr;
                            __nv_bfloat16_raw xbr, ybr;
                            xr.x = xbr.x = hx[t * 256 + r * 16 + k];
                            yr.x = ybr.x = hy[t * 256 + c * 16 + k];
                            const __half xh(xr), yh(yr);
                            const __nv_bfloat16 xb(xbr), yb(ybr);
                            w += bf ? __bfloat162float(xb) * __bfloat162float(yb) : __half2float(xh) * __half2float(yh);
                        }
                        bad += hz[t * 256 + r * 16 + c] != w;
                    }
            CHECK(!bad, "wmma pass %d (%s): %d of 1024 wrong", pass, bf ? "bf16" : "f16", bad);
        }
        OK(cudaFree(dx));
        OK(cudaFree(dy));
        OK(cudaFree(dz));
    }

    /* launch configurations a GPU refuses */
    k_add<<<1, 2048>>>(d, 1);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads per block accepted");
    k_add<<<dim3(1, 70000), 1>>>(d, 1);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid.y 70000 accepted");
    k_neighbour<<<1, 32, 64 * 1024>>>(d, true);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "64 KiB dynamic shared memory without the attribute accepted");
    OK(cudaFuncSetAttribute(k_neighbour, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    k_neighbour<<<1, 32, 64 * 1024>>>(d, true);
    OK(cudaGetLastError());
    CHECK(cudaFuncSetAttribute(k_neighbour, cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024) != cudaSuccess,
          "300 KiB of shared memory accepted");
    cudaGetLastError();

    /* copies: device ranges checked; pageable sources staged at the call, pinned ones read later */
    CHECK(cudaMemcpy(d, h, 3 * 96 * sizeof(int) + 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
          "a copy past the end of an allocation accepted");
    CHECK(cudaMemset(d + 3 * 96, 0, 4) == cudaErrorInvalidValue, "a memset past the end accepted");
    CHECK(cudaMemcpy(h, h + 1, 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "host memory as a device source");
    cudaGetLastError();
    cudaStream_t s1, s2;
    OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaMemset(d, 0, 3 * sizeof(int)));
    int *pinned, pageable = 5;
    OK(cudaMallocHost(&pinned, sizeof(int)));
    *pinned = 5;
    g_gate = 0;
    OK(cudaLaunchHostFunc(s1, hold, nullptr));
    OK(cudaMemcpyAsync(d, &pageable, sizeof(int), cudaMemcpyHostToDevice, s1));
    OK(cudaMemcpyAsync(d + 1, pinned, sizeof(int), cudaMemcpyHostToDevice, s1));
    pageable = 6;
    *pinned = 6;
    /* ordering across streams: s2 waits for s1's event; nothing has run while s1 is held */
    cudaEvent_t ev;
    OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    OK(cudaEventRecord(ev, s1));
    OK(cudaStreamWaitEvent(s2, ev, 0));
    k_add<<<1, 1, 0, s2>>>(d + 2, 1);
    usleep(50000);
    CHECK(cudaEventQuery(ev) == cudaErrorNotReady, "the event completed while its stream is held");
    OK(cudaMemcpy(h, d, 3 * sizeof(int), cudaMemcpyDeviceToHost));   /* the legacy stream: not ordered with s1, s2 */
    CHECK(h[2] == 0, "s2 ran before s1's event: d[2] = %d", h[2]);
    g_gate = 1;
    OK(cudaStreamSynchronize(s2));
    CHECK(cudaEventQuery(ev) == cudaSuccess, "the event is not complete after the stream waiting on it ran");
    OK(cudaMemcpy(h, d, 3 * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(h[0] == 5 && h[1] == 6 && h[2] == 1, "pageable %d (want 5, staged), pinned %d (want 6), ordered add %d (want 1)",
          h[0], h[1], h[2]);

    /* graph capture: replayed three times; a forbidden call invalidates the capture */
    cudaGraph_t g;
    cudaGraphExec_t ge;
    OK(cudaMemset(d, 0, sizeof(int)));
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
    k_add<<<1, 1, 0, s1>>>(d, 2);
    OK(cudaMemsetAsync(d + 1, 0, sizeof(int), s1));
    OK(cudaStreamEndCapture(s1, &g));
    OK(cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(h[0] == 0, "a captured kernel ran at capture: %d", h[0]);
    OK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; i++) OK(cudaGraphLaunch(ge, s1));
    OK(cudaStreamSynchronize(s1));
    OK(cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(h[0] == 6, "three replays of +2 gave %d", h[0]);
    OK(cudaGraphExecDestroy(ge));
    OK(cudaGraphDestroy(g));
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
    void *p = nullptr;
    CHECK(cudaMalloc(&p, 16) == cudaErrorStreamCaptureUnsupported, "cudaMalloc during a thread-local capture");
    CHECK(cudaMemcpyAsync(d, &pageable, 4, cudaMemcpyHostToDevice, s1) == cudaErrorStreamCaptureUnsupported,
          "a pageable copy captured");
    CHECK(cudaStreamEndCapture(s1, &g) == cudaErrorStreamCaptureInvalidated && !g, "the capture was not invalidated");
    cudaGetLastError();
    /* querying or waiting on an event recorded before the capture, on another stream: "unsafe"
     * in a thread-local capture too (core/cuda/vmm.c polls its give_backs only outside one) */
    cudaEvent_t before;
    OK(cudaEventCreate(&before));
    OK(cudaEventRecord(before, s2));
    OK(cudaStreamSynchronize(s2));
    for (int k = 0; k < 2; k++) {
        OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
        CHECK((k ? cudaEventSynchronize(before) : cudaEventQuery(before)) == cudaErrorStreamCaptureUnsupported,
              "%s of an outside event during a thread-local capture", k ? "cudaEventSynchronize" : "cudaEventQuery");
        CHECK(cudaStreamEndCapture(s1, &g) == cudaErrorStreamCaptureInvalidated && !g, "the capture was not invalidated");
        cudaGetLastError();
    }
    OK(cudaEventQuery(before));   /* allowed again after the capture */
    OK(cudaEventDestroy(before));
    /* a joined stream must rejoin before the capture ends */
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
    OK(cudaEventRecord(ev, s1));
    OK(cudaStreamWaitEvent(s2, ev, 0));
    k_add<<<1, 1, 0, s2>>>(d, 1);
    CHECK(cudaStreamEndCapture(s1, &g) == cudaErrorStreamCaptureUnjoined, "an unjoined fork accepted");
    cudaGetLastError();

    /* memory: the capacity is an out-of-memory error; frees of foreign pointers refused */
    void *big = nullptr;
    CHECK(cudaMalloc(&big, (size_t)1 << 50) == cudaErrorMemoryAllocation && !big, "1 PiB allocated");
    CHECK(cudaFree(h) == cudaErrorInvalidValue, "cudaFree of host memory accepted");
    cudaGetLastError();
    OK(cudaEventDestroy(ev));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    OK(cudaFreeHost(pinned));
    OK(cudaFree(x));
    OK(cudaFree(s));
    OK(cudaFree(u));
    OK(cudaFree(da));
    OK(cudaFree(db));
    OK(cudaFree(dc));
    OK(cudaFree(d));
    free(hx);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "main";
    if (!strcmp(mode, "deadlock")) {
        k_deadlock<<<1, 64>>>();
        CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure, "a deadlocked block did not fail the launch");
        CHECK(cudaGetLastError() == cudaErrorLaunchFailure, "the launch failure is not sticky");
    } else if (!strcmp(mode, "misaligned")) {
        __half *a;
        float *c;
        OK(cudaMalloc(&a, 1024));
        OK(cudaMalloc(&c, 1024));
        k_mma<<<1, 32>>>(a + 1, a + 1, c);   /* 2 bytes off the 32 wmma needs */
        CHECK(cudaDeviceSynchronize() == cudaErrorMisalignedAddress, "a misaligned wmma load ran");
    } else {
        main_checks();
    }
    printf("cudasim %s: %d passed, %d failed\n", mode, g_pass, g_fail);
    return g_fail ? 1 : 0;
}
