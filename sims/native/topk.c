/* TopK sparsification (Fed-EF Sec. 3, footnote 2; wrapper: sims/native/topk.py): each row
 * of a layer keeps its k entries of largest magnitude and zeroes the rest,
 *
 *   out[i, j] = x[i, j] if |x[i, j]| is among row i's k largest magnitudes, else 0,
 *
 * with ties at the k-th magnitude kept in index order (lowest first). The k-th magnitude
 * is found by radix selection on the bit patterns of |x| (a non-negative IEEE float orders
 * as its bits; NaN above +inf, as torch.topk ranks it): a histogram of the top 11 bits
 * (4 interleaved counts), the bucket holding the k-th largest, then one pass that writes
 * every entry (x above the bucket, 0 else) and collects the bucket's indices in index
 * order; then the next 11 bits among those candidates (entries above their bucket
 * written), until the candidates left are all taken or share every bit. A row is x + i *
 * ld (a layer's columns of a [B, d] tensor); cand holds n indices per thread. Rows are
 * split over nthreads OpenMP threads. */
#include <string.h>
#include "native.h"

#define TOPK_RADIX 11

#define TOPK_KEEP(T, U, KEYBITS, SUF)                                                  \
static inline U topk_key_##SUF(const T *x, int64_t j) {                                \
    U u;                                                                               \
    memcpy(&u, x + j, sizeof u);                                                       \
    return u & (((U)1 << KEYBITS) - 1);          /* the sign bit cleared: |x|'s bits */\
}                                                                                      \
static void topk_row_##SUF(T *out, const T *x, int64_t n, int64_t k, int64_t *cand) {  \
    if (k >= n) { memcpy(out, x, (size_t)n * sizeof(T)); return; }                     \
    if (k <= 0) { memset(out, 0, (size_t)n * sizeof(T)); return; }                     \
    uint32_t hist[1 << TOPK_RADIX];                                                    \
    int64_t ncand = -1, need = k;                /* ncand < 0: every entry a candidate */\
    U prefix = 0;                                                                      \
    int shift = KEYBITS;                                                               \
    while (shift > 0 && ncand != 0) {                                                  \
        int w = shift < TOPK_RADIX ? shift : TOPK_RADIX;                               \
        uint32_t nb = 1u << w, mask = nb - 1;                                          \
        shift -= w;                                                                    \
        memset(hist, 0, nb * sizeof hist[0]);                                          \
        if (ncand < 0) {         /* 4 interleaved counts: equal neighbours do not wait */\
            uint32_t h4[4][1 << TOPK_RADIX];                                           \
            memset(h4, 0, sizeof h4);                                                  \
            int64_t j = 0;                                                             \
            for (; j + 4 <= n; j += 4)                                                 \
                for (int r = 0; r < 4; ++r)                                            \
                    ++h4[r][(topk_key_##SUF(x, j + r) >> shift) & mask];               \
            for (; j < n; ++j) ++h4[0][(topk_key_##SUF(x, j) >> shift) & mask];        \
            for (uint32_t v = 0; v < nb; ++v)                                          \
                hist[v] = h4[0][v] + h4[1][v] + h4[2][v] + h4[3][v];                   \
        } else                                                                         \
            for (int64_t c = 0; c < ncand; ++c)                                        \
                ++hist[(topk_key_##SUF(x, cand[c]) >> shift) & mask];                  \
        uint32_t b = mask;                       /* the bucket of the need-th largest */\
        while (hist[b] < need) need -= hist[b--];                                      \
        prefix = (prefix << w) | b;                                                    \
        /* above the bucket: kept; in it: the next candidates, in index order */       \
        int64_t m = 0;                                                                 \
        if (ncand < 0) {                         /* one pass writes every entry */     \
            for (int64_t j = 0; j < n; ++j) {                                          \
                U kk = topk_key_##SUF(x, j) >> shift;                                  \
                out[j] = kk > prefix ? x[j] : (T)0;                                    \
                if (kk == prefix) cand[m++] = j;                                       \
            }                                                                          \
        } else {                                                                       \
            for (int64_t c = 0; c < ncand; ++c) {                                      \
                int64_t j = cand[c];                                                   \
                U kk = topk_key_##SUF(x, j) >> shift;                                  \
                if (kk > prefix) out[j] = x[j];                                        \
                else if (kk == prefix) cand[m++] = j;                                  \
            }                                                                          \
        }                                                                              \
        ncand = m;                                                                     \
        if (need == ncand) break;                /* the whole bucket is kept */        \
    }                                                                                  \
    for (int64_t c = 0; c < need; ++c) out[cand[c]] = x[cand[c]];  /* ties: lowest first */\
}                                                                                      \
void topk_keep_##SUF(T *out, const T *x, int64_t rows, int64_t n, int64_t ld,          \
                     int64_t k, int64_t *cand, int64_t nthreads) {                     \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")\
    for (int64_t i = 0; i < rows; ++i)                                                 \
        topk_row_##SUF(out + i * ld, x + i * ld, n, k, cand + NATIVE_THREAD * n);      \
}
/* Error feedback around TopK (Fed-EF Alg. 2 lines 11-12) in one call per row: target =
 * delta + error, msg = TopK(target) (topk_row's selection), err = target - msg, each row's
 * target read back from the cache by the selection and the residual pass. */
#define EF_TOPK(T, SUF)                                                                \
void ef_topk_##SUF(T *target, T *msg, T *err, const T *delta, const T *error,          \
                   int64_t rows, int64_t n, int64_t ld, int64_t k, int64_t *cand,      \
                   int64_t nthreads) {                                                 \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")\
    for (int64_t i = 0; i < rows; ++i) {                                               \
        T *t = target + i * ld, *mo = msg + i * ld, *eo = err + i * ld;                \
        const T *dl = delta + i * ld, *er = error + i * ld;                            \
        for (int64_t j = 0; j < n; ++j) t[j] = dl[j] + er[j];                          \
        topk_row_##SUF(mo, t, n, k, cand + NATIVE_THREAD * n);                         \
        for (int64_t j = 0; j < n; ++j) eo[j] = t[j] - mo[j];                          \
    }                                                                                  \
}
TOPK_KEEP(float, uint32_t, 31, f32)
TOPK_KEEP(double, uint64_t, 63, f64)
EF_TOPK(float, f32)
EF_TOPK(double, f64)
