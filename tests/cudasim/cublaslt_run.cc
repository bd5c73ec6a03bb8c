/* The simulated cuBLASLt (cublaslt.cc): the numbers. 16-bit decoding, TF32 rounding, and the queued job that
 * computes D = alpha op(A) op(B) + beta C (+ epilogue) when the stream runs it. */
#include "cublaslt_sim.h"

#include <cmath>
#include <cstring>

#pragma GCC visibility push(hidden)
namespace volt_lt_sim {

namespace {
/* ---- number formats ---- */
float bf16_to_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
float f16_to_f(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, man = h & 1023;
    uint32_t u;
    if (e == 31) u = sign | 0x7f800000u | man << 13;
    else if (e) u = sign | (e + 112) << 23 | man << 13;
    else if (!man) u = sign;
    else {   /* subnormal: man * 2^-24, exact in float */
        float f = std::ldexp((float)man, -24);
        memcpy(&u, &f, 4);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}
float to_tf32(float x) {   /* round to nearest, ties away (cvt.rna.tf32.f32); inf and NaN unchanged */
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}
float load(const void *base, uint32_t type, int64_t idx) {
    if (type == CUDA_R_32F) return static_cast<const float *>(base)[idx];
    const uint16_t h = static_cast<const uint16_t *>(base)[idx];
    return type == CUDA_R_16BF ? bf16_to_f(h) : f16_to_f(h);
}


void run(Job *j) {
    const Problem &p = j->p;
    const float alpha = j->alpha_dev ? *j->alpha_dev : j->alpha;
    const float beta = j->beta_dev ? *j->beta_dev : j->beta;
    const int64_t m = p.m, n = p.n, k = p.k;
    std::vector<float> a((size_t)(m * k)), b((size_t)(n * k));   /* op(A) by rows, op(B) by columns */
    for (int32_t bt = 0; bt < p.D.batch; bt++) {
        const int64_t oa = bt * p.A.stride, ob = bt * p.B.stride, oc = bt * p.C.stride, od = bt * p.D.stride;
        for (int64_t i = 0; i < m; i++)
            for (int64_t l = 0; l < k; l++)
                a[(size_t)(i * k + l)] = load(j->A, p.abtype, oa + (p.ta ? l + i * p.A.ld : i + l * p.A.ld));
        for (int64_t jj = 0; jj < n; jj++)
            for (int64_t l = 0; l < k; l++)
                b[(size_t)(jj * k + l)] = load(j->B, p.abtype, ob + (p.tb ? jj + l * p.B.ld : l + jj * p.B.ld));
        float *bias = static_cast<float *>(j->bias);
        const int64_t obias = bt * p.bias_stride;
        if (p.epi == CUBLASLT_EPILOGUE_BGRADA)
            for (int64_t i = 0; i < m; i++) {
                double s = 0;
                for (int64_t l = 0; l < k; l++) s += a[(size_t)(i * k + l)];
                bias[obias + i] = (float)s;
            }
        if (p.epi == CUBLASLT_EPILOGUE_BGRADB)
            for (int64_t jj = 0; jj < n; jj++) {
                double s = 0;
                for (int64_t l = 0; l < k; l++) s += b[(size_t)(jj * k + l)];
                bias[obias + jj] = (float)s;
            }
        if (p.tf32) {
            for (float &x : a) x = to_tf32(x);
            for (float &x : b) x = to_tf32(x);
        }
        const float *C = static_cast<const float *>(j->C);
        float *D = static_cast<float *>(j->D);
        for (int64_t jj = 0; jj < n; jj++)
            for (int64_t i = 0; i < m; i++) {
                const float *ar = a.data() + i * k, *bc = b.data() + jj * k;
                double s = 0;
                for (int64_t l = 0; l < k; l++) {
                    const float prod = ar[l] * bc[l];
                    s += (double)prod;
                }
                volatile float v = alpha * (float)s;
                if (beta != 0.f) {
                    volatile float t = beta * C[oc + i + jj * p.C.ld];
                    v = v + t;
                }
                if (p.epi == CUBLASLT_EPILOGUE_BIAS) v = v + bias[obias + i];
                D[od + i + jj * p.D.ld] = v;
            }
    }
}

}   // namespace

void CUDART_CB run_job(void *user) {
    Job *j = static_cast<Job *>(user);
    run(j);
    if (!j->kept) delete j;
}


}   // namespace volt_lt_sim
#pragma GCC visibility pop
