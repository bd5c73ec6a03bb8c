/* test_cublaslt_sim: the simulated cuBLASLt (tests/cudasim/cublaslt*.cc, libvolt_cudasim_cublasLt.so) through the
 * cuBLASLt API, against a naive reference written here (row-major for the gemm.c-style cases, column-major for the
 * direct ones; its own f16 decoding and TF32 rounding). Exits 0 when every case passes, 1 with a line per failing
 * check otherwise. Files: this one (the runtime stand-in, main, gemm.c's mapping, the numerics, the loader),
 * test_cublaslt_sim_direct.cc (column-major features, stream order, graph replay), test_cublaslt_sim_reject.cc
 * (every refusal), test_cublaslt_sim.h (shared helpers).
 *
 * The CUDA runtime is this file's stand-in (cudaLaunchHostFunc, cudaStreamIsCapturing), in three modes: run the
 * host function at once, queue it (the test drains the queue: "the stream runs later"), or record it as a graph
 * capture does (the test replays it). Build and run standalone, from the repository root:
 *   g++ -std=c++17 -O2 -fPIC -shared -I/usr/local/cuda/include tests/cudasim/cublaslt.cc \
 *       tests/cudasim/cublaslt_problem.cc tests/cudasim/cublaslt_run.cc -o libvolt_cudasim_cublasLt.so
 *   g++ -std=c++17 -O2 -I/usr/local/cuda/include tests/cudasim/test_cublaslt_sim.cc \
 *       tests/cudasim/test_cublaslt_sim_direct.cc tests/cudasim/test_cublaslt_sim_reject.cc \
 *       -L. -lvolt_cudasim_cublasLt -Wl,-rpath,'$ORIGIN' -rdynamic -ldl -o test_cublaslt_sim && ./test_cublaslt_sim
 * (-rdynamic: the library's cudaLaunchHostFunc / cudaStreamIsCapturing resolve to this executable's.) */
#include "test_cublaslt_sim.h"

#include <dlfcn.h>

/* ---- the runtime stand-in ---- */
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
void drain() {
    for (auto &q : g_queue) q.first(q.second);
    g_queue.clear();
}

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
    direct_cases(h);

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
