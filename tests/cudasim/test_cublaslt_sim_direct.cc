/* test_cublaslt_sim (see test_cublaslt_sim.cc): column-major problems with the features gemm.c does not use, checked
 * against a naive reference; stream order (state copied at call time, memory read at run time) and graph replay. */
#include "test_cublaslt_sim.h"

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

void direct_cases(cublasLtHandle_t h) {
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
}

/* ======================================================================================================
 * 3. Stream order: everything is copied at call time, memory is read when the stream runs the job;
 *    a captured job is kept and replays.
 * ====================================================================================================== */
void stream_semantics(cublasLtHandle_t h) {
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
