/* The "cuda" backend's elementwise kernels: add/mul with row broadcast, scale, the
 * activations (exact erf GELU, never cuBLASLt's tanh epilogue), grad accumulation, column
 * sums, dtype conversion, arange, the layout gathers of permute/slice/concat, and the K = 0
 * GEMM fill. Semantics of core/cpu/basic.c, act.c, shape.c, cast.c. */
#include "core/cuda/common.cuh"

/* The maps below run through k_map (common.cuh): 16-byte vector loads and stores when every
 * pointer is 16-byte aligned (the arena's blocks always are; a pointer into a tensor's middle
 * may not be) and, for a row broadcast, inner % 4 == 0; the same expression per element on
 * both paths. */
template <class Op>
static int map_launch(void *s, const Op &op, int64_t n, bool vec) {
    if (n <= 0) return 0;
    vec = vec && n >= 4;
    k_map<Op><<<volt_cu_blocks(vec ? n / 4 : n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(op, n, vec);
    VOLT_CU_DONE();
}
#define A16(p) volt_cu_aligned((p), 16)
/* Every op says the DRAM bytes it reads and writes per item (bytes_per_item; broadcast rows
 * not counted): the simulator's launch trace reports it (tests/cudasim/README.md), for the
 * step's kernel inventory in docs/CUDA.md. */

struct op_binary {
    int op;
    const float *a, *b;
    float *y;
    int64_t inner;
    __host__ __device__ int bytes_per_item() const { return 8; }
    __device__ float f(float x, float bv) const { return op == 0 ? x + bv : x * bv; }
    __device__ void one(int64_t i) const { y[i] = f(a[i], b[i % inner]); }
    __device__ void four(int64_t q) const {
        const float4 x = VCU_CF4(a, q), bv = *reinterpret_cast<const float4 *>(b + (4 * q) % inner);
        VCU_F4(y, q) = make_float4(f(x.x, bv.x), f(x.y, bv.y), f(x.z, bv.z), f(x.w, bv.w));
    }
};
extern "C" int volt_cu_binary(void *s, int op, const float *a, const float *b, float *y, int64_t outer, int64_t inner) {
    if (outer * inner <= 0) return 0;
    return map_launch(s, op_binary{op, a, b, y, inner}, outer * inner, inner % 4 == 0 && A16(a) && A16(b) && A16(y));
}

struct op_scale {
    const float *x;
    float *y;
    float a;
    __host__ __device__ int bytes_per_item() const { return 8; }
    __device__ void one(int64_t i) const { y[i] = a * x[i]; }
    __device__ void four(int64_t q) const {
        const float4 v = VCU_CF4(x, q);
        VCU_F4(y, q) = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
};
extern "C" int volt_cu_scale(void *s, const float *x, float *y, int64_t n, float alpha) {
    return map_launch(s, op_scale{x, y, alpha}, n, A16(x) && A16(y));
}

struct op_axpy {
    float *dx;
    const float *dy;
    float a;
    bool acc;
    __host__ __device__ int bytes_per_item() const { return acc ? 12 : 8; }
    __device__ float f(float d, float g) const {
        const float v = a == 1.f ? g : a * g;
        return acc ? d + v : 0.f + v;
    }
    __device__ void one(int64_t i) const { dx[i] = f(acc ? dx[i] : 0.f, dy[i]); }
    __device__ void four(int64_t q) const {
        const float4 g = VCU_CF4(dy, q), d = acc ? VCU_F4(dx, q) : make_float4(0.f, 0.f, 0.f, 0.f);
        VCU_F4(dx, q) = make_float4(f(d.x, g.x), f(d.y, g.y), f(d.z, g.z), f(d.w, g.w));
    }
};
extern "C" int volt_cu_axpy_grad(void *s, float *dx, const float *dy, int64_t n, float alpha, bool acc) {
    return map_launch(s, op_axpy{dx, dy, alpha, acc}, n, A16(dx) && A16(dy));
}

struct op_mul_grad_a {
    float *da;
    const float *dy, *b;
    int64_t inner;
    bool acc;
    __host__ __device__ int bytes_per_item() const { return acc ? 12 : 8; }
    __device__ float f(float d, float g, float bv) const {
        const float v = g * bv;
        return acc ? d + v : 0.f + v;
    }
    __device__ void one(int64_t i) const { da[i] = f(acc ? da[i] : 0.f, dy[i], b[i % inner]); }
    __device__ void four(int64_t q) const {
        const float4 g = VCU_CF4(dy, q), bv = *reinterpret_cast<const float4 *>(b + (4 * q) % inner);
        const float4 d = acc ? VCU_F4(da, q) : make_float4(0.f, 0.f, 0.f, 0.f);
        VCU_F4(da, q) = make_float4(f(d.x, g.x, bv.x), f(d.y, g.y, bv.y), f(d.z, g.z, bv.z), f(d.w, g.w, bv.w));
    }
};
extern "C" int volt_cu_mul_grad_a(void *s, float *da, const float *dy, const float *b, int64_t outer, int64_t inner,
                                  bool acc) {
    if (outer * inner <= 0) return 0;
    return map_launch(s, op_mul_grad_a{da, dy, b, inner, acc}, outer * inner,
                      inner % 4 == 0 && A16(da) && A16(dy) && A16(b));
}

/* Column sums, deterministic and spread over the GPU: grid (C / 32 column groups) x (row
 * chunks); a block of 32 x 8 threads owns 32 columns of one chunk, each of its 8 row lanes
 * sums rows r0 + lane, r0 + lane + 8, ... < r1 in order, and the 8 partials are added in a
 * fixed tree. One chunk: the block writes the result; several: each writes its partial row
 * into `part` (chunks x C floats) and a second k_colsum over those rows (one chunk: 8 row
 * lanes, then the tree) adds them. The chunking is
 * a function of (R, C) alone (volt_cu_colsum_chunks), so the bits are the same run to run,
 * eager or replayed, on any GPU. */
__device__ __forceinline__ float tree8(const float (*p)[33], int t) {
    return ((p[0][t] + p[1][t]) + (p[2][t] + p[3][t])) + ((p[4][t] + p[5][t]) + (p[6][t] + p[7][t]));
}
__global__ void k_colsum(const float *dy, const float *a, int64_t R, int64_t C, int64_t rows, float *out, bool acc,
                         float *part, void *hb, int hdt) {
    __shared__ float pv[8][33];
    const int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x, r0 = (int64_t)blockIdx.y * rows;
    const int64_t r1 = r0 + rows < R ? r0 + rows : R;
    float v = 0.f;
    if (c < C)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
            const float d = dy[r * C + c];
            if (hb) vcu_store(hb, hdt, r * C + c, d);   /* dy's 16-bit copy, in the same pass */
            v += a ? d * a[r * C + c] : d;
        }
    pv[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    const float t = tree8(pv, threadIdx.x);
    if (gridDim.y > 1) part[blockIdx.y * C + c] = t;
    else out[c] = acc ? out[c] + t : 0.f + t;
}
extern "C" int64_t volt_cu_colsum_chunks(int64_t R, int64_t C, int64_t *rows) {
    const int64_t gx = (C + 31) / 32;
    int64_t ch = (VOLT_CU_COLSUM_BLOCKS + gx - 1) / gx, maxch = (R + VOLT_CU_COLSUM_MIN_ROWS - 1) / VOLT_CU_COLSUM_MIN_ROWS;
    if (ch > maxch) ch = maxch;
    if (ch < 1) ch = 1;
    int64_t rc = (R + ch - 1) / ch;
    rc = (rc + 7) / 8 * 8;   /* whole rounds of the 8 row lanes */
    if (rc < 8) rc = 8;
    *rows = rc;
    return (R + rc - 1) / rc;
}
static int colsum(void *s, const float *dy, const float *a, int64_t R, int64_t C, float *out, bool acc, float *part,
                  void *hb, int hdt) {
    if (C <= 0) return 0;
    int64_t rows = 8;
    const int64_t ch = R > 0 ? volt_cu_colsum_chunks(R, C, &rows) : 1;
    const unsigned gx = (unsigned)((C + 31) / 32);
    cudaStream_t st = VOLT_CU_STREAM(s);
    k_colsum<<<dim3(gx, (unsigned)ch), dim3(32, 8), 0, st>>>(dy, a, R, C, rows, out, acc, part, hb, hdt);
    /* the chunks' partials (ch rows of C) summed by the same kernel: one chunk, fixed order */
    if (ch > 1) k_colsum<<<gx, dim3(32, 8), 0, st>>>(part, nullptr, ch, C, ch, out, acc, nullptr, nullptr, 0);
    VOLT_CU_DONE();
}
extern "C" int volt_cu_colsum(void *s, const float *dy, const float *a, int64_t R, int64_t C, float *out, bool acc,
                              float *part) {
    if (R == 1 && C > 0) {   /* one row (the grad of a same-shape operand): an elementwise map */
        if (a) return map_launch(s, op_mul_grad_a{out, dy, a, C, acc}, C, A16(out) && A16(dy) && A16(a));
        return map_launch(s, op_axpy{out, dy, 1.f, acc}, C, A16(out) && A16(dy));
    }
    return colsum(s, dy, a, R, C, out, acc, part, nullptr, 0);
}
extern "C" int volt_cu_colsum_convert(void *s, const float *dy, int64_t R, int64_t C, float *out, bool acc, float *part,
                                      void *hb, int hb_dt) {
    return colsum(s, dy, nullptr, R, C, out, acc, part, hb, hb_dt);
}

#define INV_SQRT_2PI 0.39894228040143268f
#define GELU_K0 0.79788456080286536f
#define GELU_K1 0.044715f
__device__ __forceinline__ float phi_cdf(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }

__device__ __forceinline__ float unary_f(int op, float v) {
    switch (op) {
    case VOLT_CU_RELU: return v > 0.f ? v : 0.f;
    case VOLT_CU_GELU: return v * phi_cdf(v);
    case VOLT_CU_GELU_TANH: return v / (1.f + expf(-2.f * GELU_K0 * (v + GELU_K1 * v * v * v)));
    case VOLT_CU_TANH: return tanhf(v);
    default: return 1.f / (1.f + expf(-v));
    }
}
/* four 16-bit values of dtype dt at p[4q .. 4q+3] (8 bytes: p 8-byte aligned) */
__device__ __forceinline__ void vcu_store4_16(void *p, int dt, int64_t q, float4 v) {
    const float f[4] = {v.x, v.y, v.z, v.w};
    uint16_t h[4];
    for (int j = 0; j < 4; j++) {
        const uint32_t u = __float_as_uint(f[j]);
        h[j] = dt == VOLT_CU_BF16 ? volt__f2bf(u) : volt__f2h(u);
    }
    reinterpret_cast<uint2 *>(p)[q] = make_uint2((uint32_t)h[0] | (uint32_t)h[1] << 16, (uint32_t)h[2] | (uint32_t)h[3] << 16);
}
__device__ __forceinline__ float4 vcu_load4_16(const void *p, int dt, int64_t q) {
    const uint2 w = reinterpret_cast<const uint2 *>(p)[q];
    const uint16_t h[4] = {(uint16_t)(w.x & 0xffffu), (uint16_t)(w.x >> 16), (uint16_t)(w.y & 0xffffu), (uint16_t)(w.y >> 16)};
    float f[4];
    for (int j = 0; j < 4; j++) f[j] = __uint_as_float(dt == VOLT_CU_BF16 ? (uint32_t)h[j] << 16 : volt__h2f(h[j]));
    return make_float4(f[0], f[1], f[2], f[3]);
}

struct op_unary {
    int op;
    const float *x;
    float *y;
    void *x16;   /* x's 16-bit rounding, written too (GELU under 16-bit compute: backward's copy) */
    int dt;
    __host__ __device__ int bytes_per_item() const { return x16 ? 10 : 8; }
    __device__ void one(int64_t i) const {
        const float v = x[i];
        y[i] = unary_f(op, v);
        if (x16) vcu_store(x16, dt, i, v);
    }
    __device__ void four(int64_t q) const {
        const float4 v = VCU_CF4(x, q);
        VCU_F4(y, q) = make_float4(unary_f(op, v.x), unary_f(op, v.y), unary_f(op, v.z), unary_f(op, v.w));
        if (x16) vcu_store4_16(x16, dt, q, v);
    }
};
extern "C" int volt_cu_unary(void *s, int op, const float *x, float *y, int64_t n, void *x16, int x16_dt) {
    return map_launch(s, op_unary{op, x, y, x16, x16_dt}, n, A16(x) && A16(y) && (!x16 || volt_cu_aligned(x16, 8)));
}

/* dy * f'(x) from x (relu, gelu, gelu_tanh) or y (tanh, sigmoid) */
__device__ __forceinline__ float unary_d(int op, float v, float yv, float g) {
    switch (op) {
    case VOLT_CU_RELU: return v > 0.f ? g : 0.f;
    case VOLT_CU_GELU: return g * (phi_cdf(v) + v * expf(-0.5f * v * v) * INV_SQRT_2PI);
    case VOLT_CU_GELU_TANH: {
        float v2 = v * v;
        float sg = 1.f / (1.f + expf(-2.f * GELU_K0 * (v + GELU_K1 * v2 * v)));
        float du = GELU_K0 * (1.f + 3.f * GELU_K1 * v2);
        return g * (sg + 2.f * v * sg * (1.f - sg) * du);
    }
    case VOLT_CU_TANH: return g * (1.f - yv * yv);
    default: return g * yv * (1.f - yv);
    }
}
struct op_unary_grad {
    int op;
    const float *x, *y, *dy;   /* x or y (the one the op reads) */
    float *dx;
    bool acc;
    const void *x16;           /* x's 16-bit rounding, read instead of x when set */
    int dt;
    __host__ __device__ int bytes_per_item() const { return (acc ? 12 : 8) - (x16 ? 2 : 0); }
    __device__ bool from_y() const { return op == VOLT_CU_TANH || op == VOLT_CU_SIGMOID; }
    __device__ float f(float d, float v, float g) const {
        const float r = from_y() ? unary_d(op, 0.f, v, g) : unary_d(op, v, 0.f, g);
        return acc ? d + r : 0.f + r;
    }
    __device__ float in(int64_t i) const { return from_y() ? y[i] : x16 ? vcu_load(x16, dt, i) : x[i]; }
    __device__ void one(int64_t i) const { dx[i] = f(acc ? dx[i] : 0.f, in(i), dy[i]); }
    __device__ void four(int64_t q) const {
        const float4 v = from_y() ? VCU_CF4(y, q) : x16 ? vcu_load4_16(x16, dt, q) : VCU_CF4(x, q), g = VCU_CF4(dy, q);
        const float4 d = acc ? VCU_F4(dx, q) : make_float4(0.f, 0.f, 0.f, 0.f);
        VCU_F4(dx, q) = make_float4(f(d.x, v.x, g.x), f(d.y, v.y, g.y), f(d.z, v.z, g.z), f(d.w, v.w, g.w));
    }
};
extern "C" int volt_cu_unary_grad(void *s, int op, const float *x, const float *y, const float *dy, float *dx, int64_t n,
                                  bool acc, const void *x16, int x16_dt) {
    const bool fy = op == VOLT_CU_TANH || op == VOLT_CU_SIGMOID;
    const bool in_ok = fy ? A16(y) : x16 ? volt_cu_aligned(x16, 8) : A16(x);
    return map_launch(s, op_unary_grad{op, x, y, dy, dx, acc, x16, x16_dt}, n, in_ok && A16(dy) && A16(dx));
}

/* Conversions: four items per thread on the vector path (16 bytes of f32, 8 bytes of 16-bit
 * values); f32 -> bf16 is on the path of every GEMM operand (core/cuda/gemm_ops.c). */
struct op_convert {
    void *dst;
    const void *src;
    int ddt, sdt;
    __host__ __device__ int bytes_per_item() const { return (ddt == VOLT_CU_F32 ? 4 : 2) + (sdt == VOLT_CU_F32 ? 4 : 2); }
    __device__ void one(int64_t i) const {
        if (ddt == sdt) {
            if (ddt == VOLT_CU_F32) ((float *)dst)[i] = ((const float *)src)[i];
            else ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
        } else {
            vcu_store(dst, ddt, i, vcu_load(src, sdt, i));
        }
    }
    __device__ void four(int64_t q) const {
        if (ddt == sdt) {
            if (ddt == VOLT_CU_F32) VCU_F4(dst, q) = VCU_CF4(src, q);
            else reinterpret_cast<uint2 *>(dst)[q] = reinterpret_cast<const uint2 *>(src)[q];
            return;
        }
        const float4 v = sdt == VOLT_CU_F32 ? VCU_CF4(src, q) : vcu_load4_16(src, sdt, q);
        if (ddt == VOLT_CU_F32) VCU_F4(dst, q) = v;
        else vcu_store4_16(dst, ddt, q, v);
    }
};
extern "C" int volt_cu_convert(void *s, void *dst, int dst_dt, const void *src, int src_dt, int64_t n) {
    const unsigned da = dst_dt == VOLT_CU_F32 ? 16 : 8, sa = src_dt == VOLT_CU_F32 ? 16 : 8;
    return map_launch(s, op_convert{dst, src, dst_dt, src_dt}, n, volt_cu_aligned(dst, da) && volt_cu_aligned(src, sa));
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
