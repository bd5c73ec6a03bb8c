/* tests/cudasim/include/cudasim_mma.h — nvcuda::wmma for the CUDA simulator (in place of the toolkit's
 * mma.h; only the 16x16x16 shapes core/cuda uses). Every lane holds the whole 16x16 tile
 * (a GPU spreads it over the warp's registers; no code may depend on which lane holds what,
 * and core/cuda does not touch fragment elements), and every lane loads, multiplies and
 * stores all of it. load_matrix_sync and store_matrix_sync wait until every lane of the warp
 * has arrived, as the CUDA guide defines them (so all lanes load a tile before any lane
 * stores over it); they are not fences after the store: a lane that reads or rewrites
 * another lane's part of a stored tile before a __syncwarp races with the later lanes'
 * stores, here as on a GPU. mma_sync and fill_fragment touch only the lane's registers. The preconditions the hardware has are
 * checked: the pointer 32-byte aligned (256 bits), ldm a multiple of 16 bytes' worth of
 * elements; a violation ends the launch with cudaErrorMisalignedAddress. Products are exact
 * in f32 (16-bit inputs), summed in k order in f32. */
#ifndef CUDASIM_MMA_H
#define CUDASIM_MMA_H
#include <stdint.h>
#include <string.h>
#include <type_traits>

namespace cudasim {
void wmma_fault(const char *what, const void *p, unsigned ldm);   /* runtime.cc: fails the launch */
}

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the simulator has the 16x16x16 shape only");
    T x[256];   /* element (r, c) at x[r * 16 + c], whatever the memory layout was */
    enum { num_elements = 256 };
};

template <class T>
static inline float to_f(T v) { return (float)v; }

template <class T>
static inline void check_ptr(const char *what, const T *p, unsigned ldm) {
    if (((uintptr_t)p & 31u) || ldm % (16 / sizeof(T)))
        ::cudasim::wmma_fault(what, (const void *)p, ldm);
}

template <class Use, class T, class L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm) {
    ::cudasim::sync_warp();
    check_ptr("load_matrix_sync", p, ldm);
    const bool col = std::is_same<L, col_major>::value;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float, void> &f, const float *p, unsigned ldm,
                             layout_t l) {
    ::cudasim::sync_warp();
    check_ptr("load_matrix_sync", p, ldm);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float, void> &f, unsigned ldm,
                              layout_t l) {
    ::cudasim::sync_warp();
    check_ptr("store_matrix_sync", p, ldm);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * 16 + c];
}
template <class Use, class T, class L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, T v) {
    for (int i = 0; i < 256; i++) f.x[i] = v;
}
/* Every lane of a warp multiplies the same tiles (each holds all of them), so the lanes after
 * the first would repeat its 4,096 products. A one-entry cache per host thread (the lanes of a
 * warp run on one) keeps the last product: a lane whose inputs are byte for byte the cached ones,
 * of the same element type, takes the cached result. The result is a function of those bytes
 * alone, so the cache changes no value; a lane with other inputs computes and replaces it. */
struct mma_memo {
    const void *type;   /* &mma_type_tag<T>: bf16 and half tiles of equal bytes differ */
    unsigned char a[256 * 4], b[256 * 4];
    float c[256], d[256];
};
template <class T>
struct mma_type_tag { static const char tag; };
template <class T>
const char mma_type_tag<T>::tag = 0;
static inline mma_memo &mma_memo_slot() {
    static thread_local mma_memo m = { nullptr, {}, {}, {}, {} };
    return m;
}
template <class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float, void> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float, void> &c) {
    static_assert(sizeof(a.x) <= sizeof(mma_memo::a), "mma_memo holds 256 elements of up to 4 bytes");
    mma_memo &m = mma_memo_slot();
    if (m.type == &mma_type_tag<T>::tag && !memcmp(m.a, a.x, sizeof(a.x)) && !memcmp(m.b, b.x, sizeof(b.x)) &&
        !memcmp(m.c, c.x, sizeof(c.x))) {
        memcpy(d.x, m.d, sizeof(d.x));
        return;
    }
    float fa[256], fb[256], out[256];
    for (int i = 0; i < 256; i++) { fa[i] = to_f(a.x[i]); fb[i] = to_f(b.x[i]); out[i] = c.x[i]; }
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) {
            const float av = fa[r * 16 + k];
            for (int n = 0; n < 16; n++) out[r * 16 + n] += av * fb[k * 16 + n];   /* k order per element */
        }
    m.type = &mma_type_tag<T>::tag;
    memcpy(m.a, a.x, sizeof(a.x));
    memcpy(m.b, b.x, sizeof(b.x));
    memcpy(m.c, c.x, sizeof(c.x));
    memcpy(m.d, out, sizeof(out));
    for (int i = 0; i < 256; i++) d.x[i] = out[i];
}
} /* namespace wmma */
} /* namespace nvcuda */
#endif
