/* The simulated cuBLASLt's private header (tests/cudasim/cublaslt*.cc; the library is described in cublaslt.cc):
 * the objects behind the opaque handles, the problem a descriptor and four layouts describe, the queued job.
 * Everything here is hidden inside libvolt_cudasim_cublasLt.so. */
#ifndef VOLT_CUDASIM_CUBLASLT_SIM_H
#define VOLT_CUDASIM_CUBLASLT_SIM_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

struct cublasLtContext {
    uint64_t magic;
};

#pragma GCC visibility push(hidden)
namespace volt_lt_sim {

enum Kind { K_HANDLE = 1, K_DESC, K_LAYOUT, K_PREF };
extern const char *const kind_name[];

struct Layout {
    uint32_t type;
    int32_t order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
    int64_t plane;
    uint32_t bmode;
};

struct Desc {
    int32_t compute, scale, pmode, ta, tb, tc, fill, sm;
    uint32_t epi;
    const void *bias;
    int64_t bias_stride;
    int32_t bias_type;
};

struct Pref {
    uint32_t search, red_mask;
    uint64_t max_ws;
    uint32_t align[4];   /* A, B, C, D */
    float waves;
};


/* ---- the problem a descriptor and four layouts describe ---- */
struct Problem {
    int32_t compute, pmode;
    bool ta, tb, tf32;
    uint32_t epi;
    uint32_t abtype;
    int64_t m, n, k;
    Layout A, B, C, D;
    const void *bias;
    int64_t bias_stride;
};

/* ---- the queued job ---- */
struct Job {
    Problem p;
    const void *A, *B, *C;
    void *D;
    void *bias;
    float alpha, beta;                 /* pointer mode HOST: read at call time */
    const float *alpha_dev, *beta_dev; /* pointer mode DEVICE: read when the job runs */
    bool kept;
};

constexpr uint64_t ALGO_MAGIC = 0x564f4c54534c5431ull;   /* "VOLTSLT1": an algo (and a handle) made here */

extern std::mutex g_mu;                  /* guards the live-object registry and the kept jobs */
extern std::vector<void *> g_kept;       /* jobs recorded in a graph: kept until exit */

/* cublaslt_problem.cc: failures, live objects, validation, the algorithm, overlaps */
cublasStatus_t fail(cublasStatus_t st, const char *fn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *last_reason();       /* this thread's last failure, "function: why" ("" if none) */
cublasStatus_t last_status();    /* and its status */
void add_live(const void *p, Kind k);
bool is_live(const void *p, Kind k);
bool remove_live(const void *p, Kind k);
size_t elem_size(uint32_t t);
/* the problem of a descriptor and layouts (Cdesc NULL: D's), checked without pointers; SUCCESS or the failure */
cublasStatus_t resolve(const char *fn, cublasLtMatmulDesc_t dh, cublasLtMatrixLayout_t ah, cublasLtMatrixLayout_t bh,
                       cublasLtMatrixLayout_t ch, cublasLtMatrixLayout_t dlh, Problem *p);
uint64_t fingerprint(const Problem &p);
uint32_t ptr_align(const void *ptr);
void make_algo(const Problem &p, const uint32_t align[4], cublasLtMatmulAlgo_t *algo);
cublasStatus_t check_pointer(const char *fn, const char *name, const void *ptr, uint32_t type, uint64_t need);
bool same_layout(const Layout &x, const Layout &y);
typedef std::vector<std::pair<uintptr_t, uintptr_t>> Segs;   /* byte ranges [first, second), sorted by start */
Segs segs(const void *base, const Layout &l, size_t es);     /* one per column per batch */
bool self_overlap(const Segs &s);
bool overlap(const Segs &x, const Segs &y);

/* cublaslt_run.cc: the job, run on the stream (frees itself unless kept) */
void CUDART_CB run_job(void *user);

}   // namespace volt_lt_sim
#pragma GCC visibility pop

#endif
