/* test_cublaslt_sim (see test_cublaslt_sim.cc): every refusal. A valid baseline problem, one thing changed; the
 * status, the reason (volt_cudasim_cublaslt_last_error), nothing queued on the stream and D untouched. */
#include "test_cublaslt_sim.h"

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


static void promise4(Base &b) {   /* the caller promises only 4-byte alignment of A, B, C, D */
    uint32_t four = 4;
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        LT(cublasLtMatmulPreferenceSetAttribute(b.pref, (cublasLtMatmulPreferenceAttributes_t)a, &four, sizeof four));
}

void rejections(cublasLtHandle_t h) {
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
