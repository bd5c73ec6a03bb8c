/* The simulated cuBLASLt (cublaslt.cc): failures and their reasons, the live-object registry, the validation of a
 * descriptor with its four layouts, the algorithm the heuristic hands out, and the exact overlap test. */
#include "cublaslt_sim.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#pragma weak cudaDeviceSynchronize   /* a runtime without it: nothing to drain */

#pragma GCC visibility push(hidden)
namespace volt_lt_sim {

const char *const kind_name[] = { "", "handle", "matmul descriptor", "matrix layout", "preference" };

std::mutex g_mu;
std::unordered_map<const void *, Kind> g_live;   /* every object made and not destroyed */
std::vector<void *> g_kept;                       /* jobs recorded in a graph: kept until exit */

namespace {
struct KeptJobs {   /* graph-recorded jobs live until exit (a graph may replay them at any launch); defined after
                       g_mu and g_kept in this file, so destroyed before them */
    ~KeptJobs() {
        /* a graph launched last and never waited for may still run one (a process may end with work
         * in flight, as on a GPU): the device drains first */
        if (&cudaDeviceSynchronize != nullptr) cudaDeviceSynchronize();
        std::lock_guard<std::mutex> g(g_mu);
        for (void *j : g_kept) delete static_cast<Job *>(j);
        g_kept.clear();
    }
} g_kept_jobs;
}   // namespace

namespace {
thread_local std::string t_reason;
thread_local cublasStatus_t t_status = CUBLAS_STATUS_SUCCESS;
}   // namespace

const char *last_reason() { return t_reason.c_str(); }
cublasStatus_t last_status() { return t_status; }

int log_level() {
    static int lvl = [] {
        const char *e = getenv("CUBLASLT_LOG_LEVEL");
        return e ? atoi(e) : 0;
    }();
    return lvl;
}

cublasStatus_t fail(cublasStatus_t st, const char *fn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
cublasStatus_t fail(cublasStatus_t st, const char *fn, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t_reason = std::string(fn) + ": " + buf;
    t_status = st;
    if (log_level() >= 1) fprintf(stderr, "[cublasLt sim] %s\n", t_reason.c_str());
    return st;
}

void add_live(const void *p, Kind k) {
    std::lock_guard<std::mutex> g(g_mu);
    g_live[p] = k;
}
bool is_live(const void *p, Kind k) {
    if (!p) return false;
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_live.find(p);
    return it != g_live.end() && it->second == k;
}
bool remove_live(const void *p, Kind k) {
    if (!p) return false;
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_live.find(p);
    if (it == g_live.end() || it->second != k) return false;
    g_live.erase(it);
    return true;
}

const char *type_name(uint32_t t) {
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "another cudaDataType";
    }
}

size_t elem_size(uint32_t t) { return t == CUDA_R_32F ? 4 : 2; }   /* only simulated types reach this */


bool simulated_epilogue(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_BGRADA ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}
bool known_epilogue(uint32_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU: case CUBLASLT_EPILOGUE_DRELU_BGRAD: case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_BIAS: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU: case CUBLASLT_EPILOGUE_DGELU_BGRAD: case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: return true;
    default: return false;
    }
}

cublasStatus_t check_layout(const char *fn, const char *name, const Layout &l, bool is_c) {
    if (l.order != CUBLASLT_ORDER_COL)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "%s's order %d is not simulated (only CUBLASLT_ORDER_COL)", name,
                    l.order);
    if (l.bmode != CUBLASLT_BATCH_MODE_STRIDED)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "%s's pointer-array batch mode is not simulated", name);
    if (l.plane != 0) return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "%s: planar complex is not simulated", name);
    if (l.rows > INT32_MAX || l.cols > INT32_MAX)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "%s is %llu x %llu: rows and columns must fit in int32", name,
                    (unsigned long long)l.rows, (unsigned long long)l.cols);
    const int64_t need = std::max<int64_t>(1, (int64_t)l.rows);
    if (!(is_c && l.ld == 0) && l.ld < need)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s's ld %lld < rows %llu (column-major: ld >= max(1, rows))", name,
                    (long long)l.ld, (unsigned long long)l.rows);
    if (l.batch < 1) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s's batch count %d < 1", name, l.batch);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t resolve(const char *fn, cublasLtMatmulDesc_t dh, cublasLtMatrixLayout_t ah, cublasLtMatrixLayout_t bh,
                       cublasLtMatrixLayout_t ch, cublasLtMatrixLayout_t dlh, Problem *p) {
    if (!is_live(dh, K_DESC)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "the matmul descriptor is NULL or not live");
    const cublasLtMatrixLayout_t hs[4] = { ah, bh, ch ? ch : dlh, dlh };
    const char *const names[4] = { "A", "B", "C", "D" };
    for (int i = 0; i < 4; i++)
        if (!is_live(hs[i], K_LAYOUT))
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s's layout is NULL or not live", names[i]);
    const Desc &d = *reinterpret_cast<const Desc *>(dh);
    p->A = *reinterpret_cast<const Layout *>(ah);
    p->B = *reinterpret_cast<const Layout *>(bh);
    p->C = *reinterpret_cast<const Layout *>(hs[2]);
    p->D = *reinterpret_cast<const Layout *>(dlh);

    /* types */
    if (d.compute != CUBLAS_COMPUTE_32F && d.compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
        d.compute != CUBLAS_COMPUTE_32F_FAST_TF32)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                    "compute type %d is not simulated (CUBLAS_COMPUTE_32F, _PEDANTIC, _FAST_TF32 are)", d.compute);
    if (d.scale != CUDA_R_32F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "scale type %s with a 32F compute type (CUDA_R_32F only)",
                    type_name((uint32_t)d.scale));
    if (p->A.type != p->B.type)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "A is %s but B is %s (A and B must have one type)",
                    type_name(p->A.type), type_name(p->B.type));
    if (p->A.type != CUDA_R_32F && p->A.type != CUDA_R_16BF && p->A.type != CUDA_R_16F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "A/B type %s is not simulated", type_name(p->A.type));
    if (p->C.type != p->D.type)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "C is %s but D is %s (C and D must have one type)",
                    type_name(p->C.type), type_name(p->D.type));
    if (p->D.type != CUDA_R_32F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "C/D type %s is not simulated (CUDA_R_32F only)",
                    type_name(p->D.type));
    if (d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && p->A.type != CUDA_R_32F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "CUBLAS_COMPUTE_32F_FAST_TF32 needs CUDA_R_32F A/B, not %s",
                    type_name(p->A.type));

    /* descriptor */
    if (d.pmode != CUBLASLT_POINTER_MODE_HOST && d.pmode != CUBLASLT_POINTER_MODE_DEVICE)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "pointer mode %d is not simulated (HOST, DEVICE are)", d.pmode);
    const int32_t ops[2] = { d.ta, d.tb };
    for (int i = 0; i < 2; i++)
        if (ops[i] != CUBLAS_OP_N && ops[i] != CUBLAS_OP_T && ops[i] != CUBLAS_OP_C)
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "TRANS%c = %d is not a cublasOperation_t", "AB"[i], ops[i]);
    if (d.tc != CUBLAS_OP_N)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "TRANSC = %d: only CUBLAS_OP_N is supported", d.tc);
    if (d.fill != CUBLAS_FILL_MODE_FULL)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "fill mode %d is not simulated (FULL only)", d.fill);
    if (!known_epilogue(d.epi)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "epilogue %u is not a cublasLtEpilogue_t", d.epi);
    if (!simulated_epilogue(d.epi))
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "epilogue %u is not simulated (DEFAULT, BIAS, BGRADA, BGRADB are)",
                    d.epi);
    if (d.epi != CUBLASLT_EPILOGUE_DEFAULT && d.bias_type != -1 && d.bias_type != CUDA_R_32F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bias type %s with D of CUDA_R_32F (the bias has D's type)",
                    type_name((uint32_t)d.bias_type));

    /* layouts and sizes */
    for (int i = 0; i < 4; i++) {
        const Layout &l = i == 0 ? p->A : i == 1 ? p->B : i == 2 ? p->C : p->D;
        cublasStatus_t st = check_layout(fn, names[i], l, i == 2 && ch != nullptr && ch != dlh);
        if (st) return st;
    }
    p->ta = d.ta != CUBLAS_OP_N;
    p->tb = d.tb != CUBLAS_OP_N;
    p->m = (int64_t)p->D.rows;
    p->n = (int64_t)p->D.cols;
    const int64_t am = (int64_t)(p->ta ? p->A.cols : p->A.rows), ak = (int64_t)(p->ta ? p->A.rows : p->A.cols);
    const int64_t bk = (int64_t)(p->tb ? p->B.cols : p->B.rows), bn = (int64_t)(p->tb ? p->B.rows : p->B.cols);
    if (am != p->m || bn != p->n || ak != bk)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                    "sizes do not chain: op(A) is %lld x %lld, op(B) %lld x %lld, D %lld x %lld", (long long)am,
                    (long long)ak, (long long)bk, (long long)bn, (long long)p->m, (long long)p->n);
    if (p->C.rows != p->D.rows || p->C.cols != p->D.cols)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "C is %llu x %llu but D is %llu x %llu",
                    (unsigned long long)p->C.rows, (unsigned long long)p->C.cols, (unsigned long long)p->D.rows,
                    (unsigned long long)p->D.cols);
    p->k = ak;
    if (p->A.batch != p->D.batch || p->B.batch != p->D.batch || p->C.batch != p->D.batch)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "batch counts differ: A %d, B %d, C %d, D %d", p->A.batch,
                    p->B.batch, p->C.batch, p->D.batch);
    p->compute = d.compute;
    p->tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    p->pmode = d.pmode;
    p->epi = d.epi;
    p->abtype = p->A.type;
    p->bias = d.bias;
    p->bias_stride = d.bias_stride;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the algorithm: what the heuristic chose it for ---- */
uint64_t fingerprint(const Problem &p) {
    return (uint64_t)(uint32_t)p.compute | (uint64_t)CUDA_R_32F << 16 | (uint64_t)p.abtype << 24 |
           (uint64_t)p.D.type << 32;
}
uint32_t ptr_align(const void *ptr) {
    uintptr_t a = (uintptr_t)ptr;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}
void make_algo(const Problem &p, const uint32_t align[4], cublasLtMatmulAlgo_t *algo) {
    memset(algo, 0, sizeof *algo);
    algo->data[0] = ALGO_MAGIC;
    algo->data[1] = fingerprint(p);
    algo->data[2] = p.epi;
    for (int i = 0; i < 4; i++) algo->data[3 + i] = align[i];
    /* the heuristic reads BIAS_POINTER to learn its alignment; NULL: a kernel's widest bias load, 16 bytes */
    algo->data[7] = p.bias ? std::min<uint32_t>(16, ptr_align(p.bias)) : 16;
}

/* ---- exact overlap of matrices: one byte range per column per batch ---- */
typedef std::vector<std::pair<uintptr_t, uintptr_t>> Segs;
Segs segs(const void *base, const Layout &l, size_t es) {
    Segs s;
    if (!base || !l.rows || !l.cols) return s;
    s.reserve((size_t)l.batch * l.cols);
    for (int64_t b = 0; b < l.batch; b++)
        for (uint64_t c = 0; c < l.cols; c++) {
            const uintptr_t lo = (uintptr_t)base + (uintptr_t)((b * l.stride + (int64_t)c * l.ld) * (int64_t)es);
            s.push_back({ lo, lo + l.rows * es });
        }
    std::sort(s.begin(), s.end());
    return s;
}
bool self_overlap(const Segs &s) {
    for (size_t i = 1; i < s.size(); i++)
        if (s[i].first < s[i - 1].second) return true;   /* sorted by start: overlap iff it starts before one ends */
    return false;
}
bool overlap(const Segs &x, const Segs &y) {
    /* both sorted by start: an x interval that ends before y[jj] starts meets no later y, and the other way round */
    size_t i = 0, jj = 0;
    while (i < x.size() && jj < y.size()) {
        if (x[i].second <= y[jj].first) i++;
        else if (y[jj].second <= x[i].first) jj++;
        else return true;
    }
    return false;
}

uint32_t pref_default_align(int i, const Pref *pr) { return pr ? pr->align[i] : 256; }

cublasStatus_t check_pointer(const char *fn, const char *name, const void *ptr, uint32_t type, uint64_t need) {
    if ((uintptr_t)ptr % elem_size(type))
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "%s = %p is not aligned to its %zu-byte elements", name, ptr,
                    elem_size(type));
    if (need && (uintptr_t)ptr % need)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                    "%s = %p is %u-byte aligned but the algo was chosen for %llu (MIN_ALIGNMENT_%s_BYTES)", name, ptr,
                    ptr_align(ptr), (unsigned long long)need, name);
    return CUBLAS_STATUS_SUCCESS;
}

bool same_layout(const Layout &x, const Layout &y) {
    return x.type == y.type && x.order == y.order && x.rows == y.rows && x.cols == y.cols && x.ld == y.ld &&
           x.batch == y.batch && (x.batch == 1 || x.stride == y.stride) && x.plane == y.plane && x.bmode == y.bmode;
}


}   // namespace volt_lt_sim
#pragma GCC visibility pop
