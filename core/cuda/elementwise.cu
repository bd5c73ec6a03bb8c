/* The "cuda" backend's elementwise kernels: add/mul with row broadcast, scale, the
 * activations (exact erf GELU, never cuBLASLt's tanh epilogue), grad accumulation, column
 * sums, dtype conversion, arange, the layout gathers of permute/slice/concat, and the K = 0
 * GEMM fill. Semantics of core/cpu/basic.c, act.c, shape.c, cast.c. */
#include "core/cuda/common.cuh"

__global__ void k_binary(int op, const float *a, const float *b, float *y, int64_t outer, int64_t inner) {
    VOLT_CU_FOR(i, outer * inner) {
        float bv = b[i % inner];
        y[i] = op == 0 ? a[i] + bv : a[i] * bv;
    }
}
extern "C" int volt_cu_binary(void *s, int op, const float *a, const float *b, float *y, int64_t outer, int64_t inner) {
    if (outer * inner <= 0) return 0;
    k_binary<<<volt_cu_blocks(outer * inner), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(op, a, b, y, outer, inner);
    VOLT_CU_DONE();
}

__global__ void k_scale(const float *x, float *y, int64_t n, float a) { VOLT_CU_FOR(i, n) y[i] = a * x[i]; }
extern "C" int volt_cu_scale(void *s, const float *x, float *y, int64_t n, float alpha) {
    if (n <= 0) return 0;
    k_scale<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, y, n, alpha);
    VOLT_CU_DONE();
}

__global__ void k_axpy(float *dx, const float *dy, int64_t n, float a, bool acc) {
    VOLT_CU_FOR(i, n) {
        float v = a == 1.f ? dy[i] : a * dy[i];
        dx[i] = acc ? dx[i] + v : 0.f + v;
    }
}
extern "C" int volt_cu_axpy_grad(void *s, float *dx, const float *dy, int64_t n, float alpha, bool acc) {
    if (n <= 0) return 0;
    k_axpy<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(dx, dy, n, alpha, acc);
    VOLT_CU_DONE();
}

__global__ void k_mul_grad_a(float *da, const float *dy, const float *b, int64_t outer, int64_t inner, bool acc) {
    VOLT_CU_FOR(i, outer * inner) {
        float v = dy[i] * b[i % inner];
        da[i] = acc ? da[i] + v : 0.f + v;
    }
}
extern "C" int volt_cu_mul_grad_a(void *s, float *da, const float *dy, const float *b, int64_t outer, int64_t inner,
                                  bool acc) {
    if (outer * inner <= 0) return 0;
    k_mul_grad_a<<<volt_cu_blocks(outer * inner), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(da, dy, b, outer, inner, acc);
    VOLT_CU_DONE();
}

/* Column sums: a block of 32 x 8 threads owns 32 columns; each of the 8 row lanes sums
 * rows r = lane, lane + 8, ... in order, then the 8 partials are added in a fixed order. */
__global__ void k_colsum(const float *dy, const float *a, int64_t R, int64_t C, float *out, bool acc) {
    __shared__ float part[8][33];
    const int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x;
    float v = 0.f;
    if (c < C)
        for (int64_t r = threadIdx.y; r < R; r += 8) v += a ? dy[r * C + c] * a[r * C + c] : dy[r * C + c];
    part[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = ((part[0][threadIdx.x] + part[1][threadIdx.x]) + (part[2][threadIdx.x] + part[3][threadIdx.x])) +
                  ((part[4][threadIdx.x] + part[5][threadIdx.x]) + (part[6][threadIdx.x] + part[7][threadIdx.x]));
        out[c] = acc ? out[c] + t : 0.f + t;
    }
}
extern "C" int volt_cu_colsum(void *s, const float *dy, const float *a, int64_t R, int64_t C, float *out, bool acc) {
    if (C <= 0) return 0;
    k_colsum<<<(unsigned)((C + 31) / 32), dim3(32, 8), 0, VOLT_CU_STREAM(s)>>>(dy, a, R, C, out, acc);
    VOLT_CU_DONE();
}

#define INV_SQRT_2PI 0.39894228040143268f
#define GELU_K0 0.79788456080286536f
#define GELU_K1 0.044715f
__device__ __forceinline__ float phi_cdf(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }

__global__ void k_unary(int op, const float *x, float *y, int64_t n) {
    VOLT_CU_FOR(i, n) {
        float v = x[i], r;
        switch (op) {
        case VOLT_CU_RELU: r = v > 0.f ? v : 0.f; break;
        case VOLT_CU_GELU: r = v * phi_cdf(v); break;
        case VOLT_CU_GELU_TANH: r = v / (1.f + expf(-2.f * GELU_K0 * (v + GELU_K1 * v * v * v))); break;
        case VOLT_CU_TANH: r = tanhf(v); break;
        default: r = 1.f / (1.f + expf(-v)); break;
        }
        y[i] = r;
    }
}
extern "C" int volt_cu_unary(void *s, int op, const float *x, float *y, int64_t n) {
    if (n <= 0) return 0;
    k_unary<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(op, x, y, n);
    VOLT_CU_DONE();
}

__global__ void k_unary_grad(int op, const float *x, const float *y, const float *dy, float *dx, int64_t n, bool acc) {
    VOLT_CU_FOR(i, n) {
        float d;
        switch (op) {
        case VOLT_CU_RELU: d = x[i] > 0.f ? dy[i] : 0.f; break;
        case VOLT_CU_GELU: {
            float v = x[i];
            d = dy[i] * (phi_cdf(v) + v * expf(-0.5f * v * v) * INV_SQRT_2PI);
            break;
        }
        case VOLT_CU_GELU_TANH: {
            float v = x[i], v2 = v * v;
            float sg = 1.f / (1.f + expf(-2.f * GELU_K0 * (v + GELU_K1 * v2 * v)));
            float du = GELU_K0 * (1.f + 3.f * GELU_K1 * v2);
            d = dy[i] * (sg + 2.f * v * sg * (1.f - sg) * du);
            break;
        }
        case VOLT_CU_TANH: d = dy[i] * (1.f - y[i] * y[i]); break;
        default: d = dy[i] * y[i] * (1.f - y[i]); break;
        }
        dx[i] = acc ? dx[i] + d : 0.f + d;
    }
}
extern "C" int volt_cu_unary_grad(void *s, int op, const float *x, const float *y, const float *dy, float *dx, int64_t n,
                                  bool acc) {
    if (n <= 0) return 0;
    k_unary_grad<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(op, x, y, dy, dx, n, acc);
    VOLT_CU_DONE();
}

__global__ void k_convert(void *dst, int ddt, const void *src, int sdt, int64_t n) {
    VOLT_CU_FOR(i, n) {
        if (ddt == sdt) {
            if (ddt == VOLT_CU_F32) ((float *)dst)[i] = ((const float *)src)[i];
            else ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
        } else {
            vcu_store(dst, ddt, i, vcu_load(src, sdt, i));
        }
    }
}
extern "C" int volt_cu_convert(void *s, void *dst, int dst_dt, const void *src, int src_dt, int64_t n) {
    if (n <= 0) return 0;
    k_convert<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(dst, dst_dt, src, src_dt, n);
    VOLT_CU_DONE();
}

__global__ void k_arange(void *y, int64_t n, bool is64) {
    VOLT_CU_FOR(i, n) {
        if (is64) ((int64_t *)y)[i] = i;
        else ((int32_t *)y)[i] = (int32_t)i;
    }
}
extern "C" int volt_cu_arange(void *s, void *y, int64_t n, bool is64) {
    if (n <= 0) return 0;
    k_arange<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(y, n, is64);
    VOLT_CU_DONE();
}

struct g4 { int64_t D[4], S[4]; };
__device__ __forceinline__ int64_t g4_src(const g4 &g, int64_t i) {
    int64_t i3 = i % g.D[3], t = i / g.D[3];
    int64_t i2 = t % g.D[2];
    t /= g.D[2];
    int64_t i1 = t % g.D[1], i0 = t / g.D[1];
    return i0 * g.S[0] + i1 * g.S[1] + i2 * g.S[2] + i3 * g.S[3];
}
template <typename T>
__global__ void k_gather4(const T *src, T *dst, g4 g, int64_t n) { VOLT_CU_FOR(i, n) dst[i] = src[g4_src(g, i)]; }
__global__ void k_gather4_add(const float *src, float *dst, g4 g, int64_t n) { VOLT_CU_FOR(i, n) dst[i] += src[g4_src(g, i)]; }

extern "C" int volt_cu_gather4(void *s, const void *src, void *dst, int esz, const int64_t D[4], const int64_t S[4]) {
    g4 g;
    for (int k = 0; k < 4; k++) { g.D[k] = D[k]; g.S[k] = S[k]; }
    int64_t n = D[0] * D[1] * D[2] * D[3];
    if (n <= 0) return 0;
    unsigned nb = volt_cu_blocks(n);
    cudaStream_t st = VOLT_CU_STREAM(s);
    switch (esz) {
    case 1: k_gather4<<<nb, VOLT_CU_THREADS, 0, st>>>((const uint8_t *)src, (uint8_t *)dst, g, n); break;
    case 2: k_gather4<<<nb, VOLT_CU_THREADS, 0, st>>>((const uint16_t *)src, (uint16_t *)dst, g, n); break;
    case 4: k_gather4<<<nb, VOLT_CU_THREADS, 0, st>>>((const uint32_t *)src, (uint32_t *)dst, g, n); break;
    default: k_gather4<<<nb, VOLT_CU_THREADS, 0, st>>>((const uint64_t *)src, (uint64_t *)dst, g, n); break;
    }
    VOLT_CU_DONE();
}
extern "C" int volt_cu_gather4_add_f32(void *s, const float *src, float *dst, const int64_t D[4], const int64_t S[4]) {
    g4 g;
    for (int k = 0; k < 4; k++) { g.D[k] = D[k]; g.S[k] = S[k]; }
    int64_t n = D[0] * D[1] * D[2] * D[3];
    if (n <= 0) return 0;
    k_gather4_add<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(src, dst, g, n);
    VOLT_CU_DONE();
}

__global__ void k_add2d(const float *src, int64_t sld, float *dst, int64_t dld, int64_t rows, int64_t cols) {
    VOLT_CU_FOR(i, rows * cols) {
        int64_t r = i / cols, j = i % cols;
        dst[r * dld + j] += src[r * sld + j];
    }
}
extern "C" int volt_cu_add2d(void *s, const float *src, int64_t sld, float *dst, int64_t dld, int64_t rows, int64_t cols) {
    if (rows * cols <= 0) return 0;
    k_add2d<<<volt_cu_blocks(rows * cols), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(src, sld, dst, dld, rows, cols);
    VOLT_CU_DONE();
}

__global__ void k_fill_bias(float *C, int64_t ldc, int64_t sc, int64_t batch, int64_t M, int64_t N, const float *bias,
                            float beta) {
    VOLT_CU_FOR(i, batch * M * N) {
        int64_t z = i / (M * N), r = (i / N) % M, j = i % N;
        float *c = C + z * sc + r * ldc + j;
        float v = beta == 0.f ? 0.f : beta * *c;
        *c = bias ? v + bias[j] : v;
    }
}
extern "C" int volt_cu_fill_bias(void *s, float *C, int64_t ldc, int64_t sc, int64_t batch, int64_t M, int64_t N,
                                 const float *bias, float beta) {
    if (batch * M * N <= 0) return 0;
    k_fill_bias<<<volt_cu_blocks(batch * M * N), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(C, ldc, sc, batch, M, N, bias, beta);
    VOLT_CU_DONE();
}
