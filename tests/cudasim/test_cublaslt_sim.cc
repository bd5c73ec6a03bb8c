/* Test of tests/cudasim/cublaslt.cc (libvolt_cudasim_cublasLt.so) through the cuBLASLt API, against a naive
 * reference written here (row-major for the gemm.c-style cases, column-major for the direct ones; its own f16
 * decoding and TF32 rounding). Exits 0 when every case passes, 1 with a line per failing case otherwise.
 *
 * The CUDA runtime is this file's stand-in (cudaLaunchHostFunc, cudaStreamIsCapturing), in three modes: run the
 * host function at once, queue it (the test drains the queue: "the stream runs later"), or record it as a graph
 * capture does (the test replays it). Build and run standalone:
 *   g++ -std=c++17 -O2 -fPIC -shared -I/usr/local/cuda/include tests/cudasim/cublaslt.cc -o libvolt_cudasim_cublasLt.so
 *   g++ -std=c++17 -O2 -I/usr/local/cuda/include tests/cudasim/test_cublaslt_sim.cc -L. -lvolt_cudasim_cublasLt \
 *       -Wl,-rpath,'$ORIGIN' -rdynamic -ldl -o test_cublaslt_sim && ./test_cublaslt_sim
 * (-rdynamic: the library's cudaLaunchHostFunc / cudaStreamIsCapturing resolve to this executable's.) */
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern "C" const char *volt_cudasim_cublaslt_last_error(void);

/* ---- the runtime stand-in ---- */
enum Mode { IMMEDIATE, DEFERRED, CAPTURE };
static Mode g_mode = IMMEDIATE;
static std::vector<std::pair<cudaHostFn_t, void *>> g_queue;
static int g_launch_fail = 0;

extern "C" cudaError_t cudaLaunchHostFunc(cudaStream_t, cudaHostFn_t fn, void *userData) {
    if (g_launch_fail) return cudaErrorStreamCaptureInvalidated;
    if (g_mode == IMMEDIATE) fn(userData);
    else g_queue.push_back({ fn, userData });
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t, enum cudaStreamCaptureStatus *s) {
    *s = g_mode == CAPTURE ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
static void drain() {
    for (auto &q : g_queue) q.first(q.second);
    g_queue.clear();
}

/* ---- bookkeeping ---- */
template <class T> static void set_d(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, T v);
static int g_fail = 0, g_cases = 0;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            g_fail++;                                                                                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)
#define LT(call)                                                                                                       \
    do {                                                                                                               \
        cublasStatus_t st_ = (call);                                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                            \
            printf("FATAL %s:%d: %s -> %d (%s)\n", __FILE__, __LINE__, #call, (int)st_, volt_cudasim_cublaslt_last_error()); \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd() {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}
static float urand() { return (float)((rnd() & 0xffffff) / 8388608.0 - 1.0); }   /* [-1, 1), full mantissas */

/* device buffers: 256-byte aligned host memory, with room for a deliberate offset */
struct Buf {
    void *raw = nullptr;
    size_t bytes = 0;
    Buf(size_t b) : bytes(b) { raw = aligned_alloc(256, (b + 256 + 255) / 256 * 256); memset(raw, 0, (b + 256 + 255) / 256 * 256); }
    ~Buf() { free(raw); }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    template <class T> T *at(size_t byte_off = 0) { return reinterpret_cast<T *>(static_cast<char *>(raw) + byte_off); }
};

/* ---- the test's own number formats ---- */
enum DT { F32, BF16, F16 };
static const char *dt_name(DT t) { return t == F32 ? "f32" : t == BF16 ? "bf16" : "f16"; }
static cudaDataType_t dt_cuda(DT t) { return t == F32 ? CUDA_R_32F : t == BF16 ? CUDA_R_16BF : CUDA_R_16F; }
static size_t dt_size(DT t) { return t == F32 ? 4 : 2; }
static double ref_f16(uint16_t h) {   /* by the formula, not by bit surgery */
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const double v = e ? std::ldexp(1.0 + m / 1024.0, e - 15) : std::ldexp((double)m, -24);
    return s ? -v : v;
}
static double ref_bf16(uint16_t h) {
    const int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    const double v = e ? std::ldexp(1.0 + m / 128.0, e - 127) : std::ldexp((double)m, -133);
    return s ? -v : v;
}
static double ref_tf32(float x) {   /* 11 significant bits, round half away from zero */
    int e;
    const double f = std::frexp((double)x, &e);   /* x = f 2^e, 0.5 <= |f| < 1 */
    return std::ldexp(std::round(std::ldexp(f, 11)), e - 11);
}
/* a random element of type t, stored at p[i]; returns its value */
static double put(void *p, DT t, size_t i) {
    if (t == F32) { const float v = urand(); static_cast<float *>(p)[i] = v; return v; }
    uint16_t h;
    if (t == BF16) h = (uint16_t)((rnd() & 1) << 15 | (120 + rnd() % 10) << 7 | (rnd() & 127));
    else h = (uint16_t)((rnd() & 1) << 15 | (10 + rnd() % 8) << 10 | (rnd() & 1023));
    static_cast<uint16_t *>(p)[i] = h;
    return t == BF16 ? ref_bf16(h) : ref_f16(h);
}
static double get(const void *p, DT t, size_t i) {
    if (t == F32) return static_cast<const float *>(p)[i];
    const uint16_t h = static_cast<const uint16_t *>(p)[i];
    return t == BF16 ? ref_bf16(h) : ref_f16(h);
}
static const uint32_t SENTINEL = 0x7fc0dead;   /* a NaN: an element that must not be written */
static bool is_sentinel(float f) { uint32_t u; memcpy(&u, &f, 4); return u == SENTINEL; }
static float sentinel() { float f; memcpy(&f, &SENTINEL, 4); return f; }

/* ======================================================================================================
 * 1. gemm.c's way: row-major C (M, N) = op(A) op(B) [+ bias per column] [+ C], mapped onto cuBLASLt as
 *    core/cuda/gemm.c's plan_make does (B as cuBLASLt's A, A as its B, m = N, n = M, transposes kept).
 * ====================================================================================================== */
struct RM {
    const char *name;
    int64_t batch, M, N, K, lda, ldb, ldc, sa, sb, sc;
    bool ta, tb, bias, beta1, tf32;
    DT ab;
};

static bool lt_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                      int64_t batch, int64_t stride) {
    if (cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld) != CUBLAS_STATUS_SUCCESS) return false;
    if (batch == 1) return true;
    int32_t b = (int32_t)batch;
    return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride) ==
               CUBLAS_STATUS_SUCCESS;
}

static void rm_case(cublasLtHandle_t h, const RM &c) {
    g_cases++;
    const size_t es = dt_size(c.ab);
    const int64_t arows = c.ta ? c.K : c.M, brows = c.tb ? c.N : c.K;   /* row-major stored rows */
    const size_t na = (size_t)((c.batch - 1) * c.sa + arows * c.lda), nb = (size_t)((c.batch - 1) * c.sb + brows * c.ldb);
    const size_t nc = (size_t)((c.batch - 1) * c.sc + c.M * c.ldc);
    Buf A(na * es), B(nb * es), C(nc * 4), bias((size_t)c.N * 4);
    std::vector<double> av(na), bv(nb);
    for (size_t i = 0; i < na; i++) av[i] = put(A.raw, c.ab, i);
    for (size_t i = 0; i < nb; i++) bv[i] = put(B.raw, c.ab, i);
    std::vector<float> c0(nc);
    for (size_t i = 0; i < nc; i++) c0[i] = sentinel();
    for (int64_t b = 0; b < c.batch; b++)
        for (int64_t i = 0; i < c.M; i++)
            for (int64_t j = 0; j < c.N; j++) c0[(size_t)(b * c.sc + i * c.ldc + j)] = c.beta1 ? urand() : sentinel();
    memcpy(C.raw, c0.data(), nc * 4);
    for (int64_t j = 0; j < c.N; j++) bias.at<float>()[j] = urand();

    /* plan_make, as gemm.c writes it */
    const cudaDataType_t t = dt_cuda(c.ab);
    cublasLtMatrixLayout_t la, lb, lc;
    const int64_t ar = c.tb ? c.K : c.N, ac = c.tb ? c.N : c.K;
    const int64_t br = c.ta ? c.M : c.K, bc = c.ta ? c.K : c.M;
    if (!lt_layout(&la, t, ar, ac, c.ldb, c.batch, c.sb) || !lt_layout(&lb, t, br, bc, c.lda, c.batch, c.sa) ||
        !lt_layout(&lc, CUDA_R_32F, c.N, c.M, c.ldc, c.batch, c.sc)) {
        CHECK(0, "%s: layout", c.name);
        return;
    }
    cublasLtMatmulDesc_t desc;
    LT(cublasLtMatmulDescCreate(&desc, c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t opa = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (c.bias) {
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        int32_t bt = CUDA_R_32F;
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = 1 << 20;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    uint32_t al = 256;
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        LT(cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al));
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &res, &n));
    CHECK(n == 1 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize == 0, "%s: heuristic returned %d algos", c.name, n);
    if (c.bias) {
        const float *bp = bias.at<float>();
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    }
    Buf work(1 << 20);
    const float one = 1.f, beta = c.beta1 ? 1.f : 0.f;
    LT(cublasLtMatmul(h, desc, &one, B.raw, la, A.raw, lb, &beta, C.raw, lc, C.raw, lc, &res.algo, work.raw, 1 << 20,
                      (cudaStream_t)nullptr));

    /* the reference, row-major */
    int bad = 0;
    double worst = 0;
    for (int64_t b = 0; b < c.batch; b++)
        for (int64_t i = 0; i < c.M; i++)
            for (int64_t j = 0; j < c.N; j++) {
                double s = 0, mag = 0;
                for (int64_t l = 0; l < c.K; l++) {
                    double x = av[(size_t)(b * c.sa + (c.ta ? l * c.lda + i : i * c.lda + l))];
                    double y = bv[(size_t)(b * c.sb + (c.tb ? j * c.ldb + l : l * c.ldb + j))];
                    if (c.tf32) { x = ref_tf32((float)x); y = ref_tf32((float)y); }
                    s += x * y;
                    mag += std::fabs(x * y);
                }
                const size_t ci = (size_t)(b * c.sc + i * c.ldc + j);
                if (c.beta1) { s += c0[ci]; mag += std::fabs(c0[ci]); }
                if (c.bias) { s += bias.at<float>()[j]; mag += std::fabs(bias.at<float>()[j]); }
                const double got = C.at<float>()[ci], err = std::fabs(got - s);
                if (!(err <= 4e-7 * mag + 1e-30)) {
                    if (!bad) printf("  %s: C[%lld][%lld][%lld] = %.9g, want %.9g\n", c.name, (long long)b, (long long)i,
                                     (long long)j, got, s);
                    bad++;
                }
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
    /* everything outside the batches' M x N windows is untouched */
    std::vector<char> inside(nc, 0);
    for (int64_t b = 0; b < c.batch; b++)
        for (int64_t i = 0; i < c.M; i++)
            for (int64_t j = 0; j < c.N; j++) inside[(size_t)(b * c.sc + i * c.ldc + j)] = 1;
    int touched = 0;
    for (size_t i = 0; i < nc; i++)
        if (!inside[i] && !is_sentinel(C.at<float>()[i])) touched++;
    CHECK(!bad && !touched, "%s (%s%s, %c%c, batch %lld, %lldx%lldx%lld): %d wrong elements (worst rel %.3g), %d written outside",
          c.name, dt_name(c.ab), c.tf32 ? " tf32" : "", c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', (long long)c.batch,
          (long long)c.M, (long long)c.N, (long long)c.K, bad, worst, touched);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
}

/* TF32 must change the result: the same f32 problem without TF32 rounding is far from the TF32 answer */
static void tf32_differs(cublasLtHandle_t h) {
    g_cases++;
    const int m = 16, n = 16, k = 64;
    Buf A(m * k * 4), B(k * n * 4), D1(m * n * 4), D2(m * n * 4);
    for (int i = 0; i < m * k; i++) A.at<float>()[i] = urand();
    for (int i = 0; i < k * n; i++) B.at<float>()[i] = urand();
    cublasLtMatrixLayout_t la, lb, ld;
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    const float one = 1.f, zero = 0.f;
    for (int pass = 0; pass < 2; pass++) {
        cublasLtMatmulDesc_t d;
        LT(cublasLtMatmulDescCreate(&d, pass ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
        LT(cublasLtMatmul(h, d, &one, A.raw, la, B.raw, lb, &zero, nullptr, ld, pass ? D2.raw : D1.raw, ld, nullptr,
                          nullptr, 0, nullptr));
        cublasLtMatmulDescDestroy(d);
    }
    double worst = 0, scale = 0;
    for (int i = 0; i < m * n; i++) {
        worst = std::fmax(worst, std::fabs((double)D1.at<float>()[i] - D2.at<float>()[i]));
        scale = std::fmax(scale, std::fabs((double)D1.at<float>()[i]));
    }
    CHECK(worst > 1e-4 * scale && worst < 5e-3 * scale, "tf32 vs f32: largest difference %.3g of %.3g (want 1e-4..5e-3 of it)",
          worst, scale);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
}

/* The documented numerics, exactly: float products, summed in double, rounded once. One row of A times one
 * column of B (1 x k times k x 1). */
static float dot1(cublasLtHandle_t h, const std::vector<float> &a, const std::vector<float> &b) {
    const int k = (int)a.size();
    Buf A(k * 4), B(k * 4), D(4);
    memcpy(A.raw, a.data(), k * 4);
    memcpy(B.raw, b.data(), k * 4);
    cublasLtMatrixLayout_t la, lb, ld;
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 1, k, 1));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, 1, k));
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 1, 1, 1));
    cublasLtMatmulDesc_t d;
    LT(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const float one = 1.f, zero = 0.f;
    LT(cublasLtMatmul(h, d, &one, A.raw, la, B.raw, lb, &zero, nullptr, ld, D.raw, ld, nullptr, nullptr, 0, nullptr));
    cublasLtMatmulDescDestroy(d);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    return D.at<float>()[0];
}
/* 1 x 1 x 1 with B = 1: D is A's value as the library reads it (16-bit decoding, TF32 rounding) */
static float one_by_one(cublasLtHandle_t h, cudaDataType_t t, uint32_t abits, bool tf32) {
    Buf A(4), B(4), D(4);
    const size_t es = t == CUDA_R_32F ? 4 : 2;
    memcpy(A.raw, &abits, es);
    const uint32_t one_bits = t == CUDA_R_32F ? 0x3f800000u : t == CUDA_R_16BF ? 0x3f80u : 0x3c00u;
    memcpy(B.raw, &one_bits, es);
    cublasLtMatrixLayout_t l;
    LT(cublasLtMatrixLayoutCreate(&l, t, 1, 1, 1));
    cublasLtMatrixLayout_t ld;
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 1, 1, 1));
    cublasLtMatmulDesc_t d;
    LT(cublasLtMatmulDescCreate(&d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const float one = 1.f, zero = 0.f;
    LT(cublasLtMatmul(h, d, &one, A.raw, l, B.raw, l, &zero, nullptr, ld, D.raw, ld, nullptr, nullptr, 0, nullptr));
    cublasLtMatmulDescDestroy(d);
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatrixLayoutDestroy(ld);
    return D.at<float>()[0];
}
static void conversions(cublasLtHandle_t h) {
    struct { const char *name; cudaDataType_t t; uint32_t bits; bool tf32; double want; } cs[] = {
        { "f16 smallest subnormal", CUDA_R_16F, 0x0001, false, std::ldexp(1.0, -24) },
        { "f16 largest subnormal", CUDA_R_16F, 0x03ff, false, 1023 * std::ldexp(1.0, -24) },
        { "f16 -subnormal", CUDA_R_16F, 0x8003, false, -3 * std::ldexp(1.0, -24) },
        { "f16 max", CUDA_R_16F, 0x7bff, false, 65504.0 },
        { "f16 -2", CUDA_R_16F, 0xc000, false, -2.0 },
        { "f16 inf", CUDA_R_16F, 0x7c00, false, INFINITY },
        { "f16 NaN", CUDA_R_16F, 0x7e00, false, NAN },
        { "bf16 subnormal", CUDA_R_16BF, 0x0001, false, std::ldexp(1.0, -133) },
        { "bf16 -inf", CUDA_R_16BF, 0xff80, false, -INFINITY },
        { "bf16 3.140625", CUDA_R_16BF, 0x4049, false, 3.140625 },
        { "tf32 tie 1+2^-11 rounds away", CUDA_R_32F, 0x3f801000u, true, 1.0 + std::ldexp(1.0, -10) },
        { "tf32 -(1+2^-11) rounds away", CUDA_R_32F, 0xbf801000u, true, -(1.0 + std::ldexp(1.0, -10)) },
        { "tf32 below the tie rounds down", CUDA_R_32F, 0x3f800fffu, true, 1.0 },
        { "tf32 keeps 10 bits", CUDA_R_32F, 0x3f802000u, true, 1.0 + std::ldexp(1.0, -10) },
        { "no tf32: all 23 bits", CUDA_R_32F, 0x3f800fffu, false, 1.0 + 4095 * std::ldexp(1.0, -23) },
    };
    for (auto &c : cs) {
        g_cases++;
        const float got = one_by_one(h, c.t, c.bits, c.tf32);
        const bool ok = std::isnan(c.want) ? std::isnan(got) : (double)got == c.want;
        CHECK(ok, "conversion %s: got %.9g, want %.9g", c.name, got, c.want);
    }
}

/* k = 0: D = beta C + bias, A and B unread */
static void k_zero(cublasLtHandle_t h) {
    g_cases++;
    const int m = 3, n = 2;
    Buf C(m * n * 4), D(m * n * 4), bias(m * 4);
    for (int i = 0; i < m * n; i++) C.at<float>()[i] = (float)i;
    for (int i = 0; i < m; i++) bias.at<float>()[i] = 100.f * (float)i;
    cublasLtMatrixLayout_t la, lb, lc;
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, 0, m));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 0, n, 1));
    LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
    cublasLtMatmulDesc_t d;
    LT(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_d<uint32_t>(d, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_d<const void *>(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.raw);
    const float one = 1.f, two = 2.f;
    LT(cublasLtMatmul(h, d, &one, nullptr, la, nullptr, lb, &two, C.raw, lc, D.raw, lc, nullptr, nullptr, 0, nullptr));
    int bad = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) bad += D.at<float>()[i + j * m] != 2.f * (float)(i + j * m) + 100.f * (float)i;
    CHECK(!bad, "k = 0: %d elements are not beta C + bias", bad);
    cublasLtMatmulDescDestroy(d);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
}

static void exact_numerics(cublasLtHandle_t h) {
    g_cases++;
    /* 1 + 16 * 2^-25: a float running sum stays at 1, a double one reaches 1 + 2^-21 (a float) */
    std::vector<float> a(17, std::ldexp(1.f, -25)), b(17, 1.f);
    a[0] = 1.f;
    float got = dot1(h, a, b), want = 1.f + std::ldexp(1.f, -21);
    CHECK(got == want, "sums in double: got %.9g, want %.9g", got, want);
    g_cases++;
    /* (1+2^-12)^2 is rounded to the float 1+2^-11 before it is summed: the result is -(2^-12 + 2^-23), where
       double products would give -(2^-12 + 2^-24) */
    const float e = 1.f + std::ldexp(1.f, -12);
    got = dot1(h, { e, e }, { e, -(1.f + std::ldexp(1.f, -11)) });
    want = -(std::ldexp(1.f, -12) + std::ldexp(1.f, -23));
    CHECK(got == want, "float products: got %.9g, want %.9g", got, want);
}

/* ======================================================================================================
 * 2. Direct column-major problems: the features gemm.c does not use.
 * ====================================================================================================== */
struct Mat {   /* a column-major matrix set with batches, f32 */
    int64_t rows, cols, ld, batch, stride;
    size_t count() const { return (size_t)((batch - 1) * (stride > 0 ? stride : 0) + (cols - 1) * ld + rows); }
    int64_t at(int64_t b, int64_t i, int64_t j) const { return b * stride + i + j * ld; }
};
static cublasLtMatrixLayout_t mk_layout(const Mat &m, cudaDataType_t t = CUDA_R_32F) {
    cublasLtMatrixLayout_t l;
    LT(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)m.rows, (uint64_t)m.cols, m.ld));
    if (m.batch != 1) {
        int32_t b = (int32_t)m.batch;
        LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
        LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride, sizeof m.stride));
    }
    return l;
}

struct Direct {
    const char *name;
    int64_t m, n, k, batch;
    int32_t opa, opb;
    int64_t lda_pad, ldb_pad, ldc, ldd;   /* ldc: -1 = in place (C == D) */
    int64_t sb;                           /* B's batch stride: -1 = packed, 0 = broadcast */
    float alpha, beta;
    uint32_t epi;
    int64_t bias_stride;
    bool device_ptrs, nan_c;
};

static void direct_case(cublasLtHandle_t h, const Direct &c) {
    g_cases++;
    const bool ta = c.opa != CUBLAS_OP_N, tb = c.opb != CUBLAS_OP_N;
    Mat MA{ ta ? c.k : c.m, ta ? c.m : c.k, 0, c.batch, 0 }, MB{ tb ? c.n : c.k, tb ? c.k : c.n, 0, c.batch, 0 };
    MA.ld = MA.rows + c.lda_pad; MA.stride = MA.ld * MA.cols + 3;
    MB.ld = MB.rows + c.ldb_pad; MB.stride = c.sb < 0 ? MB.ld * MB.cols : c.sb;
    const bool in_place = c.ldc < 0;
    Mat MD{ c.m, c.n, c.ldd, c.batch, c.ldd * c.n + 5 };
    Mat MC = in_place ? MD : Mat{ c.m, c.n, c.ldc, c.batch, c.ldc == 0 ? 0 : c.ldc * c.n + 1 };
    Buf A(MA.count() * 4), B(MB.count() * 4), C(MC.count() * 4 + 4), D(MD.count() * 4), bias(4096 * 4);
    for (size_t i = 0; i < MA.count(); i++) A.at<float>()[i] = urand();
    for (size_t i = 0; i < MB.count(); i++) B.at<float>()[i] = urand();
    for (size_t i = 0; i < MC.count(); i++) C.at<float>()[i] = c.nan_c ? NAN : urand();
    for (size_t i = 0; i < MD.count(); i++) D.at<float>()[i] = sentinel();
    if (in_place) memcpy(D.raw, C.raw, MD.count() * 4);
    for (int i = 0; i < 4096; i++) bias.at<float>()[i] = c.epi == CUBLASLT_EPILOGUE_BIAS ? urand() : sentinel();
    std::vector<float> c0(C.at<float>(), C.at<float>() + MC.count());

    cublasLtMatrixLayout_t la = mk_layout(MA), lb = mk_layout(MB), lc = mk_layout(MC), ld = mk_layout(MD);
    cublasLtMatmulDesc_t desc;
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &c.opa, sizeof c.opa));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &c.opb, sizeof c.opb));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epi, sizeof c.epi));
    const void *bp = bias.raw;
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &c.bias_stride, sizeof c.bias_stride));
    Buf scal(8);
    const void *pa = &c.alpha, *pb = &c.beta;
    if (c.device_ptrs) {
        int32_t pm = CUBLASLT_POINTER_MODE_DEVICE;
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
        scal.at<float>()[0] = -7.f;   /* the values at call time: the job must read the later ones */
        scal.at<float>()[1] = -7.f;
        pa = scal.at<float>(0);
        pb = scal.at<float>(4);
        g_mode = DEFERRED;
    }
    LT(cublasLtMatmul(h, desc, pa, A.raw, la, B.raw, lb, pb, in_place ? D.raw : C.raw, lc, D.raw, ld, nullptr, nullptr, 0,
                      nullptr));
    if (c.device_ptrs) {
        scal.at<float>()[0] = c.alpha;
        scal.at<float>()[1] = c.beta;
        drain();
        g_mode = IMMEDIATE;
    }

    int bad = 0, touched = 0;
    std::vector<char> inside(MD.count(), 0);
    for (int64_t b = 0; b < c.batch; b++) {
        for (int64_t i = 0; i < c.m; i++)
            for (int64_t j = 0; j < c.n; j++) {
                double s = 0, mag = 0;
                for (int64_t l = 0; l < c.k; l++) {
                    const double x = A.at<float>()[MA.at(b, ta ? l : i, ta ? i : l)];
                    const double y = B.at<float>()[MB.at(b, tb ? j : l, tb ? l : j)];
                    s += x * y;
                    mag += std::fabs(x * y);
                }
                s *= c.alpha;
                mag *= std::fabs(c.alpha);
                if (c.beta != 0.f) {
                    const double cv = c0[(size_t)MC.at(b, i, j)];
                    s += c.beta * cv;
                    mag += std::fabs(c.beta * cv);
                }
                if (c.epi == CUBLASLT_EPILOGUE_BIAS) {
                    const double bv = bias.at<float>()[b * c.bias_stride + i];
                    s += bv;
                    mag += std::fabs(bv);
                }
                const int64_t di = MD.at(b, i, j);
                inside[(size_t)di] = 1;
                const double got = D.at<float>()[di];
                if (!(std::fabs(got - s) <= 4e-7 * mag + 1e-30)) {
                    if (!bad) printf("  %s: D[%lld](%lld, %lld) = %.9g, want %.9g\n", c.name, (long long)b, (long long)i,
                                     (long long)j, got, s);
                    bad++;
                }
            }
        if (c.epi == CUBLASLT_EPILOGUE_BGRADA || c.epi == CUBLASLT_EPILOGUE_BGRADB) {
            const bool ga = c.epi == CUBLASLT_EPILOGUE_BGRADA;
            for (int64_t i = 0; i < (ga ? c.m : c.n); i++) {
                double s = 0, mag = 0;
                for (int64_t l = 0; l < c.k; l++) {
                    const double x = ga ? A.at<float>()[MA.at(b, ta ? l : i, ta ? i : l)]
                                        : B.at<float>()[MB.at(b, tb ? i : l, tb ? l : i)];
                    s += x;
                    mag += std::fabs(x);
                }
                const double got = bias.at<float>()[b * c.bias_stride + i];
                if (!(std::fabs(got - s) <= 4e-7 * mag + 1e-30)) {
                    if (!bad) printf("  %s: bias grad [%lld][%lld] = %.9g, want %.9g\n", c.name, (long long)b,
                                     (long long)i, got, s);
                    bad++;
                }
            }
        }
    }
    for (size_t i = 0; i < MD.count(); i++)
        if (!inside[i] && !is_sentinel(D.at<float>()[i]) && !in_place) touched++;
    CHECK(!bad && !touched, "%s: %d wrong elements, %d written outside D's windows", c.name, bad, touched);
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(ld);
}

/* ======================================================================================================
 * 3. Stream order: everything is copied at call time, memory is read when the stream runs the job;
 *    a captured job is kept and replays.
 * ====================================================================================================== */
static void stream_semantics(cublasLtHandle_t h) {
    g_cases++;
    const int m = 3, n = 4, k = 5;
    Buf A(m * k * 4), B(k * n * 4), D(m * n * 4);
    for (int i = 0; i < m * k; i++) A.at<float>()[i] = (float)(i % 7) - 3.f;
    for (int i = 0; i < k * n; i++) B.at<float>()[i] = (float)(i % 5) - 2.f;
    for (int i = 0; i < m * n; i++) D.at<float>()[i] = sentinel();
    cublasLtMatrixLayout_t la, lb, ld;
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    cublasLtMatmulDesc_t desc;
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    float alpha = 2.f, beta = 0.f;
    g_mode = DEFERRED;
    LT(cublasLtMatmul(h, desc, &alpha, A.raw, la, B.raw, lb, &beta, nullptr, ld, D.raw, ld, nullptr, nullptr, 0, nullptr));
    CHECK(g_queue.size() == 1, "deferred: %zu jobs queued, want 1", g_queue.size());
    CHECK(is_sentinel(D.at<float>()[0]), "deferred: D was written before the stream ran");
    /* the caller changes everything host-side after the call, and the data before the stream runs */
    alpha = 100.f;
    int32_t t = CUBLAS_OP_T;
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    uint64_t rows = 1;
    LT(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows));
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    A.at<float>()[0] = 10.f;   /* written "on the stream" before the job: the job must see it */
    drain();
    g_mode = IMMEDIATE;
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double)A.at<float>()[i + l * m] * B.at<float>()[l + j * k];
            if (D.at<float>()[i + j * m] != (float)(2 * s)) bad++;
        }
    CHECK(!bad, "deferred: %d elements differ from the problem as it was at call time with A as it was at run time", bad);

    /* capture: the job is recorded, replayed twice with new data, and still valid after its descriptors are gone */
    g_cases++;
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    alpha = 1.f;
    g_mode = CAPTURE;
    LT(cublasLtMatmul(h, desc, &alpha, A.raw, la, B.raw, lb, &beta, nullptr, ld, D.raw, ld, nullptr, nullptr, 0, nullptr));
    g_mode = IMMEDIATE;
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    CHECK(g_queue.size() == 1, "capture: %zu jobs recorded, want 1", g_queue.size());
    if (g_queue.size() == 1) {
        for (int launch = 0; launch < 2; launch++) {
            A.at<float>()[1] = (float)(launch + 5);
            g_queue[0].first(g_queue[0].second);   /* a graph launch */
            bad = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int l = 0; l < k; l++) s += (double)A.at<float>()[i + l * m] * B.at<float>()[l + j * k];
                    if (D.at<float>()[i + j * m] != (float)s) bad++;
                }
            CHECK(!bad, "capture: launch %d: %d elements wrong", launch, bad);
        }
    }
    g_queue.clear();
}

/* ======================================================================================================
 * 4. Rejections: a valid baseline, then one thing changed; the status, the reason, nothing queued, D untouched.
 * ====================================================================================================== */
struct Base {
    int64_t m = 4, n = 6, k = 5;
    Buf A{ 4096 }, B{ 4096 }, C{ 4096 }, D{ 4096 }, bias{ 1024 }, work{ 4096 };
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulPreference_t pref;
    Base() {
        LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
        LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
        LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
        LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
        LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        LT(cublasLtMatmulPreferenceCreate(&pref));
        for (int i = 0; i < 1024; i++) D.at<float>()[i] = sentinel();
    }
    ~Base() {
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(desc);
        cublasLtMatmulPreferenceDestroy(pref);
    }
};

/* runs heuristic + matmul as a caller would, with D = D.raw unless overridden; returns the first failing status */
struct Call {
    const void *A, *B, *C;
    void *D;
    const void *alpha, *beta;
    const cublasLtMatmulAlgo_t *algo;
    void *work;
    size_t work_bytes;
    bool use_heuristic = true;
};
static float g_one = 1.f, g_zero = 0.f;
static Call call_of(Base &b) { return Call{ b.A.raw, b.B.raw, b.C.raw, b.D.raw, &g_one, &g_zero, nullptr, nullptr, 0, true }; }
static cublasStatus_t run_call(cublasLtHandle_t h, Base &b, const Call &c, int *algos = nullptr) {
    cublasLtMatmulHeuristicResult_t res;
    const cublasLtMatmulAlgo_t *algo = c.algo;
    if (c.use_heuristic && !algo) {
        int n = -1;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &res, &n);
        if (algos) *algos = n;
        if (st) return st;
        algo = &res.algo;
    }
    return cublasLtMatmul(h, b.desc, c.alpha, c.A, b.la, c.B, b.lb, c.beta, c.C, b.lc, c.D, b.ld, algo, c.work,
                          c.work_bytes, nullptr);
}

static void expect(const char *name, cublasStatus_t got, cublasStatus_t want, const char *reason, Base &b) {
    g_cases++;
    const std::string why = volt_cudasim_cublaslt_last_error();
    CHECK(got == want, "reject %s: status %d, want %d (%s)", name, (int)got, (int)want, why.c_str());
    if (got == want && reason) CHECK(why.find(reason) != std::string::npos, "reject %s: reason \"%s\" lacks \"%s\"", name, why.c_str(), reason);
    if (want == CUBLAS_STATUS_SUCCESS) {   /* an accepted variant: one job queued; run it */
        CHECK(g_queue.size() == 1, "accept %s: %zu jobs were queued, want 1", name, g_queue.size());
        drain();
        return;
    }
    CHECK(g_queue.empty(), "reject %s: %zu jobs were queued", name, g_queue.size());
    int touched = 0;
    for (int i = 0; i < 1024; i++) touched += !is_sentinel(b.D.at<float>()[i]);
    CHECK(!touched, "reject %s: D was written (%d elements)", name, touched);
    if (got == want && want != CUBLAS_STATUS_SUCCESS) {
        const char *s = cublasLtGetStatusString(got);
        CHECK(strstr(s, "[cublasLt sim:") != nullptr, "reject %s: status string \"%s\" carries no reason", name, s);
    }
    g_queue.clear();
}

template <class T> static void set_l(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, T v) {
    LT(cublasLtMatrixLayoutSetAttribute(l, a, &v, sizeof v));
}
template <class T> static void set_d(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, T v) {
    LT(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v));
}

static void promise4(Base &b) {   /* the caller promises only 4-byte alignment of A, B, C, D */
    uint32_t four = 4;
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        LT(cublasLtMatmulPreferenceSetAttribute(b.pref, (cublasLtMatmulPreferenceAttributes_t)a, &four, sizeof four));
}

static void rejections(cublasLtHandle_t h) {
    g_mode = DEFERRED;   /* so "nothing queued" is observable */
    {   /* the baseline itself passes (then the queue is dropped: expect() checks the queue is empty) */
        Base b;
        g_cases++;
        cublasStatus_t st = run_call(h, b, call_of(b));
        CHECK(st == CUBLAS_STATUS_SUCCESS && g_queue.size() == 1, "baseline: status %d, %zu queued (%s)", (int)st,
              g_queue.size(), volt_cudasim_cublaslt_last_error());
        drain();
    }
#define REJECT(name, want, reason, setup)                                                                            \
    do {                                                                                                             \
        Base b;                                                                                                      \
        Call c = call_of(b);                                                                                         \
        int algos = -1;                                                                                              \
        (void)algos;                                                                                                 \
        setup;                                                                                                       \
        cublasStatus_t st = run_call(h, b, c, &algos);                                                               \
        expect(name, st, want, reason, b);                                                                           \
    } while (0)
    const cublasStatus_t INV = CUBLAS_STATUS_INVALID_VALUE, NS = CUBLAS_STATUS_NOT_SUPPORTED;
    REJECT("A ld < rows", INV, "A's ld 3 < rows 4", set_l<int64_t>(b.la, CUBLASLT_MATRIX_LAYOUT_LD, 3));
    REJECT("B ld < rows", INV, "B's ld 4 < rows 5", set_l<int64_t>(b.lb, CUBLASLT_MATRIX_LAYOUT_LD, 4));
    REJECT("C ld < rows", INV, "C's ld 2 < rows 4", set_l<int64_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_LD, 2));
    REJECT("D ld < rows", INV, "D's ld 3 < rows 4", set_l<int64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_LD, 3));
    REJECT("D ld 0", INV, "D's ld 0", set_l<int64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_LD, 0));
    REJECT("heuristic sees the bad ld", INV, "cublasLtMatmulAlgoGetHeuristic: A's ld",
           { set_l<int64_t>(b.la, CUBLASLT_MATRIX_LAYOUT_LD, 3); });
    {   /* and reports no algorithm */
        Base b;
        set_l<int64_t>(b.la, CUBLASLT_MATRIX_LAYOUT_LD, 3);
        cublasLtMatmulHeuristicResult_t res;
        int n = 7;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &res, &n);
        g_cases++;
        CHECK(st == INV && n == 0, "heuristic on a bad problem: status %d, %d algos", (int)st, n);
    }
    REJECT("k mismatch", INV, "sizes do not chain", set_l<uint64_t>(b.lb, CUBLASLT_MATRIX_LAYOUT_ROWS, 4));
    REJECT("transposed A no longer chains", INV, "sizes do not chain", set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
    REJECT("C shape", INV, "C is 4 x 5 but D is 4 x 6", set_l<uint64_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_COLS, 5));
    REJECT("batch counts differ", INV, "batch counts differ", set_l<int32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2));
    REJECT("batch count 0", INV, "batch count 0", {
        set_l<int32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 0);
    });
    REJECT("TRANSA 7", INV, "TRANSA = 7", set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_TRANSA, 7));
    REJECT("TRANSC T", NS, "TRANSC", set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_T));
    REJECT("fill mode", NS, "fill mode", set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_LOWER));
    REJECT("A and B types differ", NS, "A is CUDA_R_16BF but B is CUDA_R_32F",
           set_l<uint32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16BF));
    REJECT("TF32 with bf16", NS, "FAST_TF32 needs CUDA_R_32F", {
        set_l<uint32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16BF);
        set_l<uint32_t>(b.lb, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16BF);
        set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F_FAST_TF32);
    });
    REJECT("C/D bf16", NS, "C/D type CUDA_R_16BF is not simulated", {
        set_l<uint32_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16BF);
        set_l<uint32_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16BF);
    });
    REJECT("C and D types differ", INV, "C is CUDA_R_16F but D is CUDA_R_32F",
           set_l<uint32_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_16F));
    REJECT("A/B f64", NS, "A/B type CUDA_R_64F", {
        set_l<uint32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_64F);
        set_l<uint32_t>(b.lb, CUBLASLT_MATRIX_LAYOUT_TYPE, CUDA_R_64F);
    });
    REJECT("scale type 16F", NS, "scale type CUDA_R_16F", set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_16F));
    REJECT("compute 64F", NS, "compute type 70", set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_64F));
    REJECT("row order", NS, "order 1", set_l<int32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_ROW));
    REJECT("rows past int32", NS, "must fit in int32", {
        set_l<uint64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_ROWS, 1ull << 31);
        set_l<int64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_LD, 1ll << 31);
    });
    REJECT("pointer-array batch", NS, "pointer-array", set_l<uint32_t>(b.la, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, CUBLASLT_BATCH_MODE_POINTER_ARRAY));
    REJECT("vector pointer mode", NS, "pointer mode 2",
           set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE_VECTOR));
    REJECT("GELU epilogue", NS, "epilogue 32 is not simulated", set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU));
    REJECT("epilogue 3", INV, "epilogue 3 is not", set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, 3u));
    REJECT("bias type bf16", NS, "bias type CUDA_R_16BF", {
        set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF);
        set_d<const void *>(b.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b.bias.raw);
    });
    REJECT("BIAS without a pointer", INV, "needs CUBLASLT_MATMUL_DESC_BIAS_POINTER",
           set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS));
    REJECT("bias misaligned after the heuristic", CUBLAS_STATUS_EXECUTION_FAILED, "misaligned address", {
        set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        cublasLtMatmulHeuristicResult_t res;
        int n;
        LT(cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &res, &n));   /* bias NULL */
        set_d<const void *>(b.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b.bias.at<float>(4));
        static cublasLtMatmulAlgo_t kept;
        kept = res.algo;
        c.algo = &kept;
    });
    {   /* the same 4-byte aligned bias is fine when the heuristic saw it */
        Base b;
        Call c = call_of(b);
        set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        set_d<const void *>(b.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b.bias.at<float>(4));
        expect("bias 4-aligned seen by the heuristic", run_call(h, b, c), CUBLAS_STATUS_SUCCESS, nullptr, b);
    }
    REJECT("in place, C ld != D ld", INV, "C == D (in place)", {
        set_l<int64_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_LD, 8);
        c.C = c.D;
    });
    REJECT("D overlaps A", INV, "D overlaps A", {
        promise4(b);
        c.D = b.A.at<float>(8);
    });
    REJECT("D overlaps B", INV, "D overlaps B", c.D = b.B.raw);
    REJECT("D overlaps C (out of place, beta 1)", INV, "D overlaps C", {
        promise4(b);
        c.beta = &g_one;
        c.D = b.C.at<float>(32);
    });
    REJECT("D batches overlap", INV, "D's elements overlap", {
        for (auto l : { b.la, b.lb, b.lc, b.ld }) set_l<int32_t>(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2);
        set_l<int64_t>(b.la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 20);
        set_l<int64_t>(b.lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 30);
        set_l<int64_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 24);
        set_l<int64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 23);
    });
    {   /* interleaved but disjoint D batches pass: ld 8, stride 4 */
        Base b;
        Call c = call_of(b);
        for (auto l : { b.la, b.lb, b.lc, b.ld }) set_l<int32_t>(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2);
        set_l<int64_t>(b.la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 20);
        set_l<int64_t>(b.lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 30);
        set_l<int64_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_LD, 8);
        set_l<int64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_LD, 8);
        set_l<int64_t>(b.lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 4);
        set_l<int64_t>(b.ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 4);
        g_mode = IMMEDIATE;
        cublasStatus_t st = run_call(h, b, c);
        g_mode = DEFERRED;
        g_cases++;
        int written = 0;
        for (int i = 0; i < 48; i++) written += !is_sentinel(b.D.at<float>()[i]);
        CHECK(st == CUBLAS_STATUS_SUCCESS && written == 48, "interleaved D batches: status %d (%s), %d of 48 written",
              (int)st, volt_cudasim_cublaslt_last_error(), written);
    }
    REJECT("NULL A", INV, "A is NULL", c.A = nullptr);
    REJECT("NULL D", INV, "D is NULL", c.D = nullptr);
    REJECT("NULL alpha", INV, "alpha or beta is NULL", c.alpha = nullptr);
    REJECT("NULL C with beta 1", INV, "C is NULL but beta != 0", {
        c.beta = &g_one;
        c.C = nullptr;
    });
    {
        Base b;
        Call c = call_of(b);
        c.C = nullptr;   /* beta 0: C is not read */
        expect("NULL C with beta 0", run_call(h, b, c), CUBLAS_STATUS_SUCCESS, nullptr, b);
    }
    REJECT("A misaligned for the default 256", NS, "MIN_ALIGNMENT_A_BYTES", c.A = b.A.at<float>(4));
    REJECT("D misaligned for the default 256", NS, "MIN_ALIGNMENT_D_BYTES", c.D = b.D.at<float>(64));
    {   /* promised 4: fine */
        Base b;
        Call c = call_of(b);
        uint32_t four = 4;
        LT(cublasLtMatmulPreferenceSetAttribute(b.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &four, sizeof four));
        c.A = b.A.at<float>(4);
        expect("A 4-aligned as promised", run_call(h, b, c), CUBLAS_STATUS_SUCCESS, nullptr, b);
    }
    {   /* gemm.c shares one preference between plans: an algo keeps the alignment it was chosen with */
        Base b;
        promise4(b);
        cublasLtMatmulHeuristicResult_t r4, r256;
        int n;
        LT(cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &r4, &n));
        uint32_t al = 256;
        for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
            LT(cublasLtMatmulPreferenceSetAttribute(b.pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al));
        LT(cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &r256, &n));
        Call c = call_of(b);
        c.B = b.B.at<float>(4);
        c.algo = &r4.algo;
        expect("B 4-aligned, algo chosen for 4", run_call(h, b, c), CUBLAS_STATUS_SUCCESS, nullptr, b);
        for (int i = 0; i < 1024; i++) b.D.at<float>()[i] = sentinel();
        c.algo = &r256.algo;
        expect("B 4-aligned, algo chosen for 256", run_call(h, b, c), NS, "MIN_ALIGNMENT_B_BYTES", b);
    }
    REJECT("A not element-aligned", NS, "not aligned to its 4-byte elements", {
        uint32_t one = 1;
        LT(cublasLtMatmulPreferenceSetAttribute(b.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &one, sizeof one));
        c.A = b.A.at<char>(2);
    });
    REJECT("NULL algo (implicit heuristic) and a 16-aligned D", NS, "MIN_ALIGNMENT_D_BYTES", {
        c.use_heuristic = false;
        c.D = b.D.at<float>(16);
    });
    REJECT("algo for other types", INV, "other compute/scale/data types", {
        cublasLtMatmulHeuristicResult_t res;
        int n;
        LT(cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &res, &n));
        set_d<int32_t>(b.desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F_FAST_TF32);
        static cublasLtMatmulAlgo_t kept;
        kept = res.algo;
        c.algo = &kept;
    });
    REJECT("algo for another epilogue", NS, "chosen for epilogue 1", {
        cublasLtMatmulHeuristicResult_t res;
        int n;
        LT(cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &res, &n));
        set_d<uint32_t>(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        set_d<const void *>(b.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b.bias.raw);
        static cublasLtMatmulAlgo_t kept;
        kept = res.algo;
        c.algo = &kept;
    });
    REJECT("made-up algo", INV, "not made by cublasLtMatmulAlgoGetHeuristic", {
        static cublasLtMatmulAlgo_t junk;
        memset(&junk, 0, sizeof junk);
        c.algo = &junk;
    });
    REJECT("workspace misaligned", INV, "256-byte aligned", {
        c.work = b.work.at<char>(16);
        c.work_bytes = 1024;
    });
    REJECT("workspace NULL with a size", INV, "256-byte aligned", c.work_bytes = 1024);
    {
        Base b;
        cublasLtMatmulHeuristicResult_t res;
        int n = 5;
        expect("requestedAlgoCount 0", cublasLtMatmulAlgoGetHeuristic(h, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 0, &res, &n),
               INV, "requestedAlgoCount 0", b);
        CHECK(n == 0, "requestedAlgoCount 0: returnAlgoCount %d", n);
    }
    {   /* a destroyed layout handed back is refused, not read */
        Base b;
        cublasLtMatrixLayout_t dead = b.la;
        LT(cublasLtMatrixLayoutCreate(&b.la, CUDA_R_32F, 1, 1, 1));   /* first, so it cannot reuse dead's address */
        LT(cublasLtMatrixLayoutDestroy(dead));
        cublasStatus_t st = cublasLtMatmul(h, b.desc, &g_one, b.A.raw, dead, b.B.raw, b.lb, &g_zero, b.C.raw, b.lc,
                                           b.D.raw, b.ld, nullptr, nullptr, 0, nullptr);
        expect("destroyed layout", st, INV, "A's layout is NULL or not live", b);
    }
    {
        Base b;
        cublasStatus_t st = cublasLtMatmul(nullptr, b.desc, &g_one, b.A.raw, b.la, b.B.raw, b.lb, &g_zero, b.C.raw, b.lc,
                                           b.D.raw, b.ld, nullptr, nullptr, 0, nullptr);
        expect("NULL handle", st, CUBLAS_STATUS_NOT_INITIALIZED, "handle", b);
    }
    {   /* launch failure (e.g. an invalidated capture) is an execution failure, nothing kept */
        Base b;
        g_launch_fail = 1;
        cublasStatus_t st = run_call(h, b, call_of(b));
        g_launch_fail = 0;
        expect("launch fails", st, CUBLAS_STATUS_EXECUTION_FAILED, "cudaLaunchHostFunc failed", b);
    }
    {   /* attribute setters */
        Base b;
        int32_t v = 0;
        int64_t v8 = 0;
        expect("desc attr size", cublasLtMatmulDescSetAttribute(b.desc, CUBLASLT_MATMUL_DESC_TRANSA, &v8, sizeof v8), INV,
               "sizeInBytes 8, the attribute is 4 bytes", b);
        expect("desc attr NULL buf", cublasLtMatmulDescSetAttribute(b.desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4), INV,
               "buf is NULL", b);
        expect("desc attr unknown", cublasLtMatmulDescSetAttribute(b.desc, (cublasLtMatmulDescAttributes_t)9, &v, 4), INV,
               "attribute 9 is not", b);
        expect("desc attr not simulated",
               cublasLtMatmulDescSetAttribute(b.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &b.bias.raw, 8), NS,
               "attribute 11 is not simulated", b);
        expect("layout attr size", cublasLtMatrixLayoutSetAttribute(b.la, CUBLASLT_MATRIX_LAYOUT_LD, &v, sizeof v), INV,
               "sizeInBytes 4, the attribute is 8 bytes", b);
        expect("layout attr unknown", cublasLtMatrixLayoutSetAttribute(b.la, (cublasLtMatrixLayoutAttribute_t)42, &v, 4), INV,
               "attribute 42", b);
        uint32_t three = 3;
        expect("pref alignment 3",
               cublasLtMatmulPreferenceSetAttribute(b.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &three, 4), INV,
               "not a power of two", b);
        uint64_t mask = 1;
        expect("pref impl mask", cublasLtMatmulPreferenceSetAttribute(b.pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &mask, 8), NS,
               "IMPL_MASK", b);
        expect("destroy twice", (cublasLtMatmulPreferenceDestroy(b.pref), cublasLtMatmulPreferenceDestroy(b.pref)), INV,
               "not live", b);
        LT(cublasLtMatmulPreferenceCreate(&b.pref));
    }
#undef REJECT
    g_mode = IMMEDIATE;
}

/* gemm.c's loader: dlopen(RTLD_NOW | RTLD_LOCAL) of the library file, then dlsym of every LT_FUNCS name */
static void loads_like_gemm_c() {
    g_cases++;
    Dl_info info;
    if (!dladdr((void *)&cublasLtCreate, &info) || !info.dli_fname) {
        CHECK(0, "dladdr cannot name the library that holds cublasLtCreate");
        return;
    }
    void *lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != nullptr, "dlopen(%s, RTLD_NOW): %s", info.dli_fname, dlerror());
    if (!lib) return;
    static const char *const names[] = { "cublasLtCreate", "cublasLtDestroy", "cublasLtGetStatusString",
                                         "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceSetAttribute",
                                         "cublasLtMatmulPreferenceDestroy", "cublasLtMatrixLayoutCreate",
                                         "cublasLtMatrixLayoutSetAttribute", "cublasLtMatrixLayoutDestroy",
                                         "cublasLtMatmulDescCreate", "cublasLtMatmulDescSetAttribute",
                                         "cublasLtMatmulDescDestroy", "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul" };
    for (const char *n : names) CHECK(dlsym(lib, n) != nullptr, "%s has no %s", info.dli_fname, n);
    dlclose(lib);
}

int main() {
    loads_like_gemm_c();
    cublasLtHandle_t h;
    LT(cublasLtCreate(&h));

    /* 1. gemm.c's mapping: every transpose pair, f32 / bf16 / f16, tight and padded, batched, beta, bias, TF32 */
    const DT dts[3] = { F32, BF16, F16 };
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (DT dt : dts) {
                const int64_t M = 5, N = 7, K = 9;
                const int64_t lda = ta ? M : K, ldb = tb ? K : N;
                const int64_t arows = ta ? K : M, brows = tb ? N : K;
                rm_case(h, RM{ "tight", 1, M, N, K, lda, ldb, N, 0, 0, 0, ta != 0, tb != 0, false, false, false, dt });
                rm_case(h, RM{ "tight+bias", 1, M, N, K, lda, ldb, N, 0, 0, 0, ta != 0, tb != 0, true, false, false, dt });
                rm_case(h, RM{ "padded batched beta1 bias", 3, M, N, K, lda + 3, ldb + 2, N + 4, arows * (lda + 3) + 7,
                               brows * (ldb + 2) + 1, M * (N + 4) + 3, ta != 0, tb != 0, true, true, false, dt });
                rm_case(h, RM{ "packed batched beta1", 4, M, N, K, lda, ldb, N, arows * lda, brows * ldb, M * N, ta != 0,
                               tb != 0, false, true, false, dt });
                if (dt == F32) {
                    rm_case(h, RM{ "tf32", 1, M, N, K, lda, ldb, N, 0, 0, 0, ta != 0, tb != 0, false, false, true, dt });
                    rm_case(h, RM{ "tf32 batched bias beta1", 2, M, N, K, lda + 1, ldb, N + 1, arows * (lda + 1),
                                   brows * ldb, M * (N + 1), ta != 0, tb != 0, true, true, true, dt });
                }
            }
    rm_case(h, RM{ "larger f32", 1, 33, 65, 130, 130, 65, 65, 0, 0, 0, false, false, true, false, false, F32 });
    rm_case(h, RM{ "larger bf16 TN", 2, 33, 65, 130, 33, 130, 65, 33 * 130, 65 * 130, 33 * 65, true, true, false, true,
                   false, BF16 });
    tf32_differs(h);
    exact_numerics(h);
    k_zero(h);
    conversions(h);

    /* 2. direct column-major problems */
    const int32_t N_ = CUBLAS_OP_N, T_ = CUBLAS_OP_T, C_ = CUBLAS_OP_C;
    const uint32_t DEF = CUBLASLT_EPILOGUE_DEFAULT, BIAS = CUBLASLT_EPILOGUE_BIAS;
    direct_case(h, Direct{ "NN alpha 2 beta .5 out of place", 6, 5, 4, 1, N_, N_, 0, 0, 9, 6, -1, 2.f, .5f, DEF, 0, false, false });
    direct_case(h, Direct{ "TN padded", 6, 5, 4, 1, T_, N_, 3, 1, -1, 8, -1, 1.f, 1.f, DEF, 0, false, false });
    direct_case(h, Direct{ "NT batched", 6, 5, 4, 3, N_, T_, 2, 0, 7, 6, -1, 1.f, 0.f, DEF, 0, false, false });
    direct_case(h, Direct{ "TT batched in place", 6, 5, 4, 2, T_, T_, 0, 2, -1, 7, -1, 1.5f, -1.f, DEF, 0, false, false });
    direct_case(h, Direct{ "OP_C is T for reals", 6, 5, 4, 1, C_, C_, 0, 0, 6, 6, -1, 1.f, 0.f, DEF, 0, false, false });
    direct_case(h, Direct{ "C ld 0 broadcasts a column", 6, 5, 4, 2, N_, N_, 0, 0, 0, 6, -1, 1.f, 1.f, DEF, 0, false, false });
    direct_case(h, Direct{ "beta 0 ignores NaN in C", 6, 5, 4, 1, N_, N_, 0, 0, 6, 6, -1, 1.f, 0.f, DEF, 0, false, true });
    direct_case(h, Direct{ "B broadcast over the batch (stride 0)", 6, 5, 4, 3, N_, T_, 0, 1, 6, 6, 0, 1.f, 0.f, DEF, 0, false, false });
    direct_case(h, Direct{ "bias per batch", 6, 5, 4, 3, N_, N_, 0, 0, -1, 6, -1, 1.f, 0.f, BIAS, 8, false, false });
    direct_case(h, Direct{ "bias shared by batches", 6, 5, 4, 3, T_, N_, 0, 0, -1, 6, -1, 1.f, 1.f, BIAS, 0, false, false });
    direct_case(h, Direct{ "BGRADA", 6, 5, 4, 2, T_, N_, 1, 0, -1, 6, -1, 1.f, 0.f, CUBLASLT_EPILOGUE_BGRADA, 8, false, false });
    direct_case(h, Direct{ "BGRADB", 6, 5, 4, 2, N_, T_, 0, 3, -1, 6, -1, 1.f, 0.f, CUBLASLT_EPILOGUE_BGRADB, 8, false, false });
    direct_case(h, Direct{ "device pointer mode", 6, 5, 4, 1, N_, N_, 0, 0, 6, 6, -1, 3.f, 2.f, DEF, 0, true, false });
    direct_case(h, Direct{ "device pointer mode, beta 0 ignores NaN in C", 6, 5, 4, 1, T_, N_, 0, 0, 6, 6, -1, 3.f, 0.f, DEF, 0, true, true });

    /* 3. stream order and capture */
    stream_semantics(h);

    /* 4. rejections */
    rejections(h);

    LT(cublasLtDestroy(h));
    g_cases++;
    CHECK(cublasLtDestroy(h) == CUBLAS_STATUS_NOT_INITIALIZED, "destroying the handle twice is not refused");
    if (g_fail) {
        printf("test_cublaslt_sim: %d of %d checks FAILED\n", g_fail, g_cases);
        return 1;
    }
    printf("test_cublaslt_sim: %d cases passed\n", g_cases);
    return 0;
}
