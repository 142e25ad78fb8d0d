/* TopK sparsification (Fed-EF Sec. 3, footnote 2; wrapper: sims/accel/native/topk.py): each row
 * of a layer keeps its k entries of largest magnitude and zeroes the rest,
 *
 *   out[i, j] = x[i, j] if |x[i, j]| is among row i's k largest magnitudes, else 0,
 *
 * with ties at the k-th magnitude kept in index order (lowest first). Magnitudes are
 * compared as the bit patterns of |x| (the "key": a non-negative IEEE float orders as its
 * bits; NaN above +inf, as torch.topk ranks it). A row is x + i * ld (a layer's columns of a
 * [B, d] tensor); rows are split over nthreads OpenMP threads, each with its own workspace
 * (topk_ws: candidate indices, int32, and their keys).
 *
 * A row's selection finds a key hi and a tie list: the kept entries are those with key >= hi
 * and the first `need` indices of the tie list (entries below hi, in index order). Steps:
 *
 *  1. Sample (topk_sample_lo). 128 evenly spaced runs of 16 entries (64 bytes of float32
 *     each; all their lines requested at once, the next row's while this one is worked on)
 *     give the key lo that 3/2 k S / n + 3 sqrt(k S / n) + 16 of the S = 2048 sampled keys
 *     reach: about 2-3 k entries of the row reach it (Fed-EF's TopK-0.01 rows: ~3 k).
 *  2. Collect (topk_collect), in the pass that reads the row anyway (ef_topk: the one
 *     computing target = delta + error), the indices and keys of the entries with key >= lo,
 *     in index order: 16 entries at a time, a vector compare and a compress of the
 *     indices and keys that pass (no branch on the data) with AVX-512, or with AVX2 (float32)
 *     through a table of permutations; else one by one.
 *  3. If fewer than k were collected (the sample misled), or the row is short or k above
 *     about 10% of it, the whole row's first 11 bits are histogrammed instead (4
 *     interleaved counts: equal neighbours do not wait on each other's increments) and the
 *     bucket of the k-th largest collected (topk_bucket).
 *  4. Radix selection among the collected keys (topk_radix), 8 bits a step below the bits
 *     they all share (so the first step already splits them finely), until those left in the
 *     k-th largest one's bucket are all taken or share every bit.
 *
 * The write pass then sets every entry from the comparison with hi (vectorized; ef_topk's
 * message and residual with streaming stores where AVX-512 is compiled in) and the tie
 * list's first `need` afterwards. The selection is the same whichever way steps 1-3 go (the
 * tests force each). */
#include <string.h>
#include "native.h"

#define TOPK_RADIX 11                /* the whole-row histogram's bits (step 3) */
#define TOPK_CAND_RADIX 8            /* the candidates' bits per step (step 4) */
#define TOPK_SAMPLE_RUNS 128
#define TOPK_SAMPLE_LEN 16
#define TOPK_SAMPLE (TOPK_SAMPLE_RUNS * TOPK_SAMPLE_LEN)
#define TOPK_SAMPLE_MIN_N (8 * TOPK_SAMPLE)   /* shorter rows: step 3 directly */
#define TOPK_RUN(r, n) ((r) * ((n) - TOPK_SAMPLE_LEN) / (TOPK_SAMPLE_RUNS - 1))  /* run r's start */
#define TOPK_GROUP 16                /* entries per compare in step 2 */
#define TOPK_EVEN(n) (((n) + 1) & ~(int64_t)1)
/* a workspace row: room for n candidates and a group's slack (the compress stores 16) */
#define TOPK_WS_ROW(n) (TOPK_EVEN(n) + TOPK_GROUP)

#if defined(__AVX512F__) && defined(__AVX512VL__)
#define TOPK_LEVEL 2                 /* the vector forms compiled in: AVX-512 (and AVX2) */
#elif defined(__AVX2__)
#define TOPK_LEVEL 1                 /* AVX2 */
#else
#define TOPK_LEVEL 0                 /* none: one entry at a time */
#endif
static int topk_simd = TOPK_LEVEL;   /* the vector forms used (topk_config) */
static int topk_sampling = 1;        /* steps 1-2 where they apply */
static int64_t topk_misled = 0;      /* rows where step 2 collected fewer than k */

/* For the tests: the vector forms used up to level simd (2 AVX-512, 1 AVX2, 0 none; no
 * more than compiled in), steps 1-2 taken where they apply or never (sampling), this
 * process; -1 leaves a setting as it is. Returns the level compiled in. */
int topk_config(int simd, int sampling) {
    if (simd >= 0) topk_simd = simd < TOPK_LEVEL ? simd : TOPK_LEVEL;
    if (sampling >= 0) topk_sampling = sampling != 0;
    return TOPK_LEVEL;
}

/* How many rows so far fell back from step 2 to step 3 (the sample misled). */
int64_t topk_misled_rows(void) {
    int64_t v;
    _Pragma("omp atomic read")
    v = topk_misled;
    return v;
}

static inline int topk_top_bit(uint64_t v) { return 63 - __builtin_clzll(v); }  /* v > 0 */

#if TOPK_LEVEL >= 1
#include <immintrin.h>
#endif
#if TOPK_LEVEL >= 2
/* Step 2 on the group at j: v = a[j..j+16) (+ b[j..j+16), stored at t + j, when b is
 * given); the indices and keys of the entries with key >= lo stored at idx + m, keys + m
 * (compressed: 16 stored, the passing ones first); returns m + their count. */
static inline int64_t topk_group_simd_f32(float *t, const float *a, const float *b,
                                          int64_t j, uint32_t lo, int32_t *idx,
                                          uint32_t *keys, int64_t m) {
    __m512 v = _mm512_loadu_ps(a + j);
    if (b) {
        v = _mm512_add_ps(v, _mm512_loadu_ps(b + j));
        _mm512_storeu_ps(t + j, v);
    }
    __m512i kk = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    __mmask16 pass = _mm512_cmpge_epu32_mask(kk, _mm512_set1_epi32((int)lo));
    __m512i at = _mm512_add_epi32(_mm512_set1_epi32((int)j),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                    12, 13, 14, 15));
    _mm512_storeu_si512((void *)(idx + m), _mm512_maskz_compress_epi32(pass, at));
    _mm512_storeu_si512((void *)(keys + m), _mm512_maskz_compress_epi32(pass, kk));
    return m + __builtin_popcount((unsigned)pass);
}
static inline int64_t topk_group_simd_f64(double *t, const double *a, const double *b,
                                          int64_t j, uint64_t lo, int32_t *idx,
                                          uint64_t *keys, int64_t m) {
    const __m512i abs_bits = _mm512_set1_epi64(0x7fffffffffffffffLL);
    const __m512i l = _mm512_set1_epi64((long long)lo);
    for (int h = 0; h < 2; ++h, j += 8) {
        __m512d v = _mm512_loadu_pd(a + j);
        if (b) {
            v = _mm512_add_pd(v, _mm512_loadu_pd(b + j));
            _mm512_storeu_pd(t + j, v);
        }
        __m512i kk = _mm512_and_si512(_mm512_castpd_si512(v), abs_bits);
        __mmask8 pass = _mm512_cmpge_epu64_mask(kk, l);
        __m256i at = _mm256_add_epi32(_mm256_set1_epi32((int)j),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_storeu_si256((void *)(idx + m), _mm256_maskz_compress_epi32(pass, at));
        _mm512_storeu_si512((void *)(keys + m), _mm512_maskz_compress_epi64(pass, kk));
        m += __builtin_popcount((unsigned)pass);
    }
    return m;
}
/* ef_row's write pass (msg = t where key(t) >= hi else 0, err = t - msg), msg with stores
 * that bypass the cache (not read again here; docs/speed.md), from its first 64-byte aligned entry (the ones before it one by one) to the last
 * whole vector; err likewise where it is a new tensor with msg's alignment, else with plain
 * stores: where err is written over the error in place (err == er, whose lines step 2 has
 * just read) or is aligned otherwise (client-state rows of 159,010 float32 start 8 bytes
 * apart modulo 64: 1 in 8 shares msg's; the choice measured: docs/speed.md).
 * Returns the entry where the rest starts. */
#define TOPK_EF_WRITE_SIMD(T, U, SUF, LANES, VEC, MASK, LOAD, CAST, CMP, AND, SET1, MOV, SUB, STREAM, STOREU, SIGN) \
static inline int64_t topk_ef_write_simd_##SUF(const T *t, T *msg, T *err, int64_t n, \
                                               U hi, int in_place) {                   \
    int64_t j = 0;                                                                     \
    for (; j < n && ((uintptr_t)(msg + j) & 63); ++j) {                                \
        U kk;                                                                          \
        memcpy(&kk, t + j, sizeof kk);                                                 \
        int keep = (kk & ~SIGN) >= hi;                                                 \
        msg[j] = keep ? t[j] : (T)0;                                                   \
        err[j] = keep ? t[j] - t[j] : t[j];                                            \
    }                                                                                  \
    if (j + LANES <= n) {                                                              \
        const __m512i abs_bits = SET1(~SIGN), h = SET1(hi);                            \
        if (!in_place && ((uintptr_t)(err + j) & 63) == 0)                             \
            for (; j + LANES <= n; j += LANES) {                                       \
                VEC v = LOAD(t + j);                                                   \
                MASK keep = CMP(AND(CAST(v), abs_bits), h);                            \
                STREAM(msg + j, MOV(keep, v));                                         \
                STREAM(err + j, SUB(v, keep, v, v));                                   \
            }                                                                          \
        else                                                                           \
            for (; j + LANES <= n; j += LANES) {                                       \
                VEC v = LOAD(t + j);                                                   \
                MASK keep = CMP(AND(CAST(v), abs_bits), h);                            \
                STREAM(msg + j, MOV(keep, v));                                         \
                STOREU(err + j, SUB(v, keep, v, v));                                   \
            }                                                                          \
        _mm_sfence();                    /* before the tie list's plain stores */     \
    }                                                                                  \
    return j;                                                                          \
}
TOPK_EF_WRITE_SIMD(float, uint32_t, f32, 16, __m512, __mmask16, _mm512_loadu_ps,
                   _mm512_castps_si512, _mm512_cmpge_epu32_mask, _mm512_and_si512,
                   _mm512_set1_epi32, _mm512_maskz_mov_ps, _mm512_mask_sub_ps,
                   _mm512_stream_ps, _mm512_storeu_ps, 0x80000000u)
TOPK_EF_WRITE_SIMD(double, uint64_t, f64, 8, __m512d, __mmask8, _mm512_loadu_pd,
                   _mm512_castpd_si512, _mm512_cmpge_epu64_mask, _mm512_and_si512,
                   _mm512_set1_epi64, _mm512_maskz_mov_pd, _mm512_mask_sub_pd,
                   _mm512_stream_pd, _mm512_storeu_pd, 0x8000000000000000ull)
#else
#define topk_ef_write_simd_f32(t, msg, err, n, hi, in_place) 0
#define topk_ef_write_simd_f64(t, msg, err, n, hi, in_place) 0
#define topk_group_simd_f32(t, a, b, j, lo, idx, keys, m) (m)
#define topk_group_simd_f64(t, a, b, j, lo, idx, keys, m) (m)
#endif

#if TOPK_LEVEL >= 1
/* Step 2 on the group at j with AVX2 (float32 only; float64 takes the entries one by
 * one): as topk_group_simd_f32, 8 entries a compare, compressed through a table of the
 * 256 masks' permutations (built when the library loads). */
#define TOPK_AVX2_f32 1
static uint8_t topk_perm8[256][8];
__attribute__((constructor)) static void topk_perm8_init(void) {
    for (int mask = 0; mask < 256; ++mask) {
        int m = 0;
        for (int r = 0; r < 8; ++r)
            if (mask >> r & 1) topk_perm8[mask][m++] = (uint8_t)r;
        while (m < 8) topk_perm8[mask][m++] = 0;
    }
}
static inline int64_t topk_group_avx2_f32(float *t, const float *a, const float *b,
                                          int64_t j, uint32_t lo, int32_t *idx,
                                          uint32_t *keys, int64_t m) {
    const __m256i abs_bits = _mm256_set1_epi32(0x7fffffff);
    const __m256i below = _mm256_set1_epi32((int)(lo - 1));    /* keys < 2^31: signed */
    for (int h = 0; h < 2; ++h, j += 8) {
        __m256 v = _mm256_loadu_ps(a + j);
        if (b) {
            v = _mm256_add_ps(v, _mm256_loadu_ps(b + j));
            _mm256_storeu_ps(t + j, v);
        }
        __m256i kk = _mm256_and_si256(_mm256_castps_si256(v), abs_bits);
        int pass = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(kk, below)));
        __m256i perm = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)topk_perm8[pass]));
        __m256i at = _mm256_add_epi32(_mm256_set1_epi32((int)j),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_storeu_si256((__m256i *)(idx + m), _mm256_permutevar8x32_epi32(at, perm));
        _mm256_storeu_si256((__m256i *)(keys + m), _mm256_permutevar8x32_epi32(kk, perm));
        m += __builtin_popcount((unsigned)pass);
    }
    return m;
}
#else
#define TOPK_AVX2_f32 0
#define topk_group_avx2_f32(t, a, b, j, lo, idx, keys, m) (m)
#endif
#define TOPK_AVX2_f64 0
#define topk_group_avx2_f64(t, a, b, j, lo, idx, keys, m) (m)

#define TOPK_KERNELS(T, U, KEYBITS, SUF)                                               \
/* this thread's workspace: TOPK_WS_ROW(n) int32 indices, then as many keys */          \
static inline int32_t *topk_ws_##SUF(void *ws, int64_t n) {                            \
    return (int32_t *)((char *)ws + NATIVE_THREAD * TOPK_WS_ROW(n) * (4 + sizeof(U))); \
}                                                                                      \
static inline U topk_key_##SUF(T v) {                                                  \
    U u;                                                                               \
    memcpy(&u, &v, sizeof u);                                                          \
    return u & (((U)1 << KEYBITS) - 1);          /* the sign bit cleared: |v|'s bits */\
}                                                                                      \
/* step 4: among m candidates (index order, key >> shift == prefix for all), the *need  \
 * largest kept, ties lowest index first. Returns hi (keys >= hi kept); the first *need \
 * of idx (keys) are the kept ones below hi. */                                        \
static U topk_radix_##SUF(int32_t *idx, U *keys, int64_t m, int64_t *need, U prefix,   \
                          int shift) {                                                 \
    uint32_t hist[1 << TOPK_CAND_RADIX];                                               \
    int64_t left = *need;                                                              \
    while (shift > 0 && left < m) {                                                    \
        U lo = keys[0], hi = keys[0];            /* skip the bits all of them share */  \
        for (int64_t c = 1; c < m; ++c) {                                              \
            lo = keys[c] < lo ? keys[c] : lo;                                          \
            hi = keys[c] > hi ? keys[c] : hi;                                          \
        }                                                                              \
        if (lo == hi) { shift = 0; prefix = lo; break; }                               \
        int top = topk_top_bit((uint64_t)(lo ^ hi)) + 1;                               \
        if (top < shift) { shift = top; prefix = hi >> shift; }                        \
        int w = shift < TOPK_CAND_RADIX ? shift : TOPK_CAND_RADIX;                     \
        uint32_t nb = 1u << w, mask = nb - 1;                                          \
        shift -= w;                                                                    \
        memset(hist, 0, nb * sizeof hist[0]);                                          \
        for (int64_t c = 0; c < m; ++c) ++hist[(keys[c] >> shift) & mask];             \
        uint32_t b = mask;                       /* the bucket of the left-th largest */\
        while (hist[b] < left) left -= hist[b--];                                      \
        prefix = (prefix << w) | b;                                                    \
        int64_t mm = 0;              /* its members, in index order (no branch: mm <= c) */\
        for (int64_t c = 0; c < m; ++c) {                                              \
            U kc = keys[c];                                                            \
            idx[mm] = idx[c];                                                          \
            keys[mm] = kc;                                                             \
            mm += (kc >> shift) == prefix;                                             \
        }                                                                              \
        m = mm;                                                                        \
    }                                                                                  \
    *need = left;                                                                      \
    return (U)((prefix + 1) << shift);           /* <= 2^KEYBITS: no overflow in U */  \
}                                                                                      \
/* step 1's lines of a row requested (the next row's, while this one is worked on) */  \
static inline void topk_prefetch_sample_##SUF(const T *a, const T *b, int64_t n) {     \
    if (!topk_sampling || n < TOPK_SAMPLE_MIN_N) return;                               \
    for (int r = 0; r < TOPK_SAMPLE_RUNS; ++r) {                                       \
        __builtin_prefetch(a + TOPK_RUN(r, n));                                        \
        if (b) __builtin_prefetch(b + TOPK_RUN(r, n));                                 \
    }                                                                                  \
}                                                                                      \
/* step 1: a key lo that ~2 k of the row's n entries reach, estimated from a sample; 0  \
 * (take step 3) where sampling does not pay. The sampled entry is a[j] (+ b[j] when b   \
 * is given, as the collecting pass computes it). */                                   \
static U topk_sample_lo_##SUF(const T *a, const T *b, int64_t n, int64_t k) {          \
    if (!topk_sampling || n < TOPK_SAMPLE_MIN_N || n >= ((int64_t)1 << 31)) return 0;  \
    double mean = (double)k * TOPK_SAMPLE / (double)n;                                 \
    int64_t want = (int64_t)(1.5 * mean + 3.0 * sqrt(mean)) + 16;                      \
    if (want * 4 > TOPK_SAMPLE) return 0;        /* k over ~10% of the row */           \
    int32_t idx[TOPK_SAMPLE];                                                          \
    U keys[TOPK_SAMPLE];                                                               \
    topk_prefetch_sample_##SUF(a, b, n);         /* every line requested at once */    \
    int64_t m = 0;                                                                     \
    for (int r = 0; r < TOPK_SAMPLE_RUNS; ++r)                                         \
        for (int64_t j = TOPK_RUN(r, n); j < TOPK_RUN(r, n) + TOPK_SAMPLE_LEN; ++j) {  \
            idx[m] = (int32_t)m;                                                       \
            keys[m++] = topk_key_##SUF(b ? a[j] + b[j] : a[j]);                        \
        }                                                                              \
    int64_t need = want;                                                               \
    U hi = topk_radix_##SUF(idx, keys, m, &need, 0, KEYBITS);                          \
    for (int64_t c = 0; c < need; ++c) hi = keys[c] < hi ? keys[c] : hi;               \
    return hi;                                   /* the want-th largest sampled key */ \
}                                                                                      \
/* step 2: the entries of the row a (+ b, then stored at t) with key >= lo, in index     \
 * order, into idx / keys; returns their count */                                      \
static inline int64_t topk_collect_##SUF(T *restrict t, const T *restrict a,           \
                                         const T *restrict b, int64_t n, U lo,         \
                                         int32_t *idx, U *keys) {                      \
    int64_t m = 0, j = 0;                                                              \
    if (topk_simd >= 2)                                                                \
        for (; j + TOPK_GROUP <= n; j += TOPK_GROUP)                                   \
            m = topk_group_simd_##SUF(t, a, b, j, lo, idx, keys, m);                   \
    else if (topk_simd == 1 && TOPK_AVX2_##SUF)                                        \
        for (; j + TOPK_GROUP <= n; j += TOPK_GROUP)                                   \
            m = topk_group_avx2_##SUF(t, a, b, j, lo, idx, keys, m);                   \
    for (; j < n; ++j) {                                                               \
        T v = a[j];                                                                    \
        if (b) t[j] = v = v + b[j];                                                    \
        if (topk_key_##SUF(v) >= lo) { idx[m] = (int32_t)j; keys[m++] = topk_key_##SUF(v); }\
    }                                                                                  \
    return m;                                                                          \
}                                                                                      \
/* step 3: the whole row's first TOPK_RADIX bits; the k-th largest one's bucket         \
 * collected (indices and keys, index order) into idx / keys; *need is how many of them \
 * are kept, *prefix / *shift the bucket (key >> shift == prefix). Returns its size. */  \
static int64_t topk_bucket_##SUF(const T *x, int64_t n, int64_t k, int32_t *idx,       \
                                 U *keys, int64_t *need, U *prefix, int *shift) {      \
    uint32_t h4[4][1 << TOPK_RADIX];                                                   \
    const int s = KEYBITS - TOPK_RADIX;                                                \
    memset(h4, 0, sizeof h4);                                                          \
    int64_t j = 0;                                                                     \
    for (; j + 4 <= n; j += 4)                                                         \
        for (int r = 0; r < 4; ++r) ++h4[r][topk_key_##SUF(x[j + r]) >> s];            \
    for (; j < n; ++j) ++h4[0][topk_key_##SUF(x[j]) >> s];                             \
    int64_t left = k;                                                                  \
    uint32_t b = (1u << TOPK_RADIX) - 1, c;                                            \
    while ((c = h4[0][b] + h4[1][b] + h4[2][b] + h4[3][b]) < left) { left -= c; --b; } \
    int64_t m = 0;                                                                     \
    for (j = 0; j < n; ++j) {                                                          \
        U kk = topk_key_##SUF(x[j]);                                                   \
        if ((kk >> s) == b) { idx[m] = (int32_t)j; keys[m++] = kk; }                   \
    }                                                                                  \
    *need = left; *prefix = b; *shift = s;                                             \
    return m;                                                                          \
}                                                                                      \
/* A row's selection (0 < k < n): x the row (for ef_topk: t = a + b written by step 2;   \
 * for topk_keep t = NULL, b = NULL, a = x). Returns hi; the first *need of idx are the  \
 * kept entries below it. */                                                           \
static U topk_select_##SUF(T *t, const T *a, const T *b, int64_t n, int64_t k,         \
                           int32_t *idx, U *keys, int64_t *need) {                     \
    U lo = topk_sample_lo_##SUF(a, b, n, k), prefix = 0;                               \
    int64_t m = 0;                                                                     \
    const T *x = b ? t : a;                                                            \
    if (lo) m = topk_collect_##SUF(t, a, b, n, lo, idx, keys);                         \
    else if (b) for (int64_t j = 0; j < n; ++j) t[j] = a[j] + b[j];                    \
    int shift = KEYBITS;                                                               \
    *need = k;                                                                         \
    if (m < k) {                                                                       \
        if (lo) {                                                                      \
            _Pragma("omp atomic update")                                               \
            ++topk_misled;                                                             \
        }                                                                              \
        m = topk_bucket_##SUF(x, n, k, idx, keys, need, &prefix, &shift);              \
    }                                                                                  \
    return topk_radix_##SUF(idx, keys, m, need, prefix, shift);                        \
}                                                                                      \
static void topk_row_##SUF(T *out, const T *x, int64_t n, int64_t k, int32_t *idx,    \
                           U *keys) {                                                  \
    if (k >= n) { memcpy(out, x, (size_t)n * sizeof(T)); return; }                     \
    if (k <= 0) { memset(out, 0, (size_t)n * sizeof(T)); return; }                     \
    int64_t need;                                                                      \
    U hi = topk_select_##SUF(NULL, x, NULL, n, k, idx, keys, &need);                   \
    for (int64_t j = 0; j < n; ++j) {            /* as bits, as in ef_row */          \
        U vb;                                                                          \
        memcpy(&vb, x + j, sizeof vb);                                                 \
        vb &= -(U)(topk_key_##SUF(x[j]) >= hi);                                        \
        memcpy(out + j, &vb, sizeof vb);                                               \
    }                                                                                  \
    for (int64_t c = 0; c < need; ++c) out[idx[c]] = x[idx[c]];  /* ties: lowest first */\
}                                                                                      \
void topk_keep_##SUF(T *out, const T *x, int64_t rows, int64_t n, int64_t ld,          \
                     int64_t k, void *ws, int64_t nthreads) {                          \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")\
    for (int64_t i = 0; i < rows; ++i) {                                               \
        int32_t *idx = topk_ws_##SUF(ws, n);                                           \
        if (i + 1 < rows) topk_prefetch_sample_##SUF(x + (i + 1) * ld, NULL, n);       \
        topk_row_##SUF(out + i * ld, x + i * ld, n, k, idx,                            \
                       (U *)(idx + TOPK_WS_ROW(n)));                                   \
    }                                                                                  \
}                                                                                      \
/* Error feedback around TopK (Fed-EF Alg. 2 lines 11-12), two passes over a row: target \
 * = delta + error written as step 2 reads it, then msg = TopK(target) and err = target  \
 * - msg (t - t where kept: 0, or NaN for inf as the subtraction gives) from target,     \
 * still in the cache. err may be er itself (the residual written over the error in      \
 * place): every entry of er is read (steps 1-3) before the write pass writes err, so    \
 * neither is restrict. */                                                             \
static void ef_row_##SUF(T *restrict t, T *restrict msg, T *err, const T *restrict dl, \
                         const T *er, int64_t n, int64_t k, int32_t *idx, U *keys) {   \
    int64_t need = 0;                                                                  \
    U hi = (U)1 << KEYBITS;                      /* above every key: none kept */       \
    if (k > 0 && k < n) hi = topk_select_##SUF(t, dl, er, n, k, idx, keys, &need);     \
    else {                                                                             \
        for (int64_t j = 0; j < n; ++j) t[j] = dl[j] + er[j];                          \
        if (k >= n) hi = 0;                                                            \
    }                                                                                  \
    int64_t j0 = topk_simd >= 2 ? topk_ef_write_simd_##SUF(t, msg, err, n, hi, err == er) : 0;\
    for (int64_t j = j0; j < n; ++j) {                                                 \
        T v = t[j], z = v - v;       /* selected as bits: the loop vectorizes (a float */\
        U vb, zb;                    /* select does not, under IEEE exception rules) */ \
        memcpy(&vb, &v, sizeof vb);                                                    \
        memcpy(&zb, &z, sizeof zb);                                                    \
        U keep = -(U)(topk_key_##SUF(v) >= hi), mb = vb & keep, eb = (zb & keep) | (vb & ~keep);\
        memcpy(msg + j, &mb, sizeof mb);                                               \
        memcpy(err + j, &eb, sizeof eb);                                               \
    }                                                                                  \
    for (int64_t c = 0; c < need; ++c) {                                               \
        int64_t j = idx[c];                                                            \
        msg[j] = t[j];                                                                 \
        err[j] = t[j] - t[j];                                                          \
    }                                                                                  \
}                                                                                      \
void ef_topk_##SUF(T *target, T *msg, T *err, const T *delta, const T *error,          \
                   int64_t rows, int64_t n, int64_t ld, int64_t k, void *ws,           \
                   int64_t nthreads) {                                                 \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")\
    for (int64_t i = 0; i < rows; ++i) {                                               \
        int32_t *idx = topk_ws_##SUF(ws, n);                                           \
        if (i + 1 < rows)                                                              \
            topk_prefetch_sample_##SUF(delta + (i + 1) * ld, error + (i + 1) * ld, n);  \
        ef_row_##SUF(target + i * ld, msg + i * ld, err + i * ld, delta + i * ld,       \
                     error + i * ld, n, k, idx,                                        \
                     (U *)(idx + TOPK_WS_ROW(n)));                                     \
    }                                                                                  \
}
TOPK_KERNELS(float, uint32_t, 31, f32)
TOPK_KERNELS(double, uint64_t, 63, f64)
