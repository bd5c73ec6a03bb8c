/* Shared by the three files of test_cublaslt_sim (tests/cudasim/test_cublaslt_sim.cc is the program; see its
 * header): the runtime stand-in's modes and queue, check macros, random data, aligned buffers, the test's own
 * number formats. */
#ifndef VOLT_CUDASIM_TEST_CUBLASLT_SIM_H
#define VOLT_CUDASIM_TEST_CUBLASLT_SIM_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

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
inline Mode g_mode = IMMEDIATE;
inline std::vector<std::pair<cudaHostFn_t, void *>> g_queue;
inline int g_launch_fail = 0;

/* ---- bookkeeping ---- */
inline int g_fail = 0, g_cases = 0;
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

inline uint64_t g_rng = 0x9e3779b97f4a7c15ull;
inline uint32_t rnd() {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}
inline float urand() { return (float)((rnd() & 0xffffff) / 8388608.0 - 1.0); }   /* [-1, 1), full mantissas */

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
inline const char *dt_name(DT t) { return t == F32 ? "f32" : t == BF16 ? "bf16" : "f16"; }
inline cudaDataType_t dt_cuda(DT t) { return t == F32 ? CUDA_R_32F : t == BF16 ? CUDA_R_16BF : CUDA_R_16F; }
inline size_t dt_size(DT t) { return t == F32 ? 4 : 2; }
inline double ref_f16(uint16_t h) {   /* by the formula, not by bit surgery */
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const double v = e ? std::ldexp(1.0 + m / 1024.0, e - 15) : std::ldexp((double)m, -24);
    return s ? -v : v;
}
inline double ref_bf16(uint16_t h) {
    const int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    const double v = e ? std::ldexp(1.0 + m / 128.0, e - 127) : std::ldexp((double)m, -133);
    return s ? -v : v;
}
inline double ref_tf32(float x) {   /* 11 significant bits, round half away from zero */
    int e;
    const double f = std::frexp((double)x, &e);   /* x = f 2^e, 0.5 <= |f| < 1 */
    return std::ldexp(std::round(std::ldexp(f, 11)), e - 11);
}
/* a random element of type t, stored at p[i]; returns its value */
inline double put(void *p, DT t, size_t i) {
    if (t == F32) { const float v = urand(); static_cast<float *>(p)[i] = v; return v; }
    uint16_t h;
    if (t == BF16) h = (uint16_t)((rnd() & 1) << 15 | (120 + rnd() % 10) << 7 | (rnd() & 127));
    else h = (uint16_t)((rnd() & 1) << 15 | (10 + rnd() % 8) << 10 | (rnd() & 1023));
    static_cast<uint16_t *>(p)[i] = h;
    return t == BF16 ? ref_bf16(h) : ref_f16(h);
}
inline double get(const void *p, DT t, size_t i) {
    if (t == F32) return static_cast<const float *>(p)[i];
    const uint16_t h = static_cast<const uint16_t *>(p)[i];
    return t == BF16 ? ref_bf16(h) : ref_f16(h);
}
inline const uint32_t SENTINEL = 0x7fc0dead;   /* a NaN: an element that must not be written */
inline bool is_sentinel(float f) { uint32_t u; memcpy(&u, &f, 4); return u == SENTINEL; }
inline float sentinel() { float f; memcpy(&f, &SENTINEL, 4); return f; }

/* the stand-in queue: run every queued host function in order, then empty it (test_cublaslt_sim.cc) */
void drain();

template <class T> inline void set_l(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, T v) {
    LT(cublasLtMatrixLayoutSetAttribute(l, a, &v, sizeof v));
}
template <class T> inline void set_d(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, T v) {
    LT(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v));
}

/* test_cublaslt_sim_direct.cc: column-major problems gemm.c does not pose; stream order and graph replay */
void direct_cases(cublasLtHandle_t h);
void stream_semantics(cublasLtHandle_t h);
/* test_cublaslt_sim_reject.cc: every refusal, from a valid baseline with one thing changed */
void rejections(cublasLtHandle_t h);

#endif
