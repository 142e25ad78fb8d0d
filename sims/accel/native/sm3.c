/* FedAda2's client step with the SM3-II or the full preconditioner (FedAda2 Alg. 4 with
 * z = 1, Alg. 8 / 10 with z = 1; the client AdaGrad of Alg. 2 / 9 or Adam of Alg. 6 / 7) in
 * one pass per (row, layer), or with SM3-I (Alg. 3; sm3i, SM3I_LAYER below) in two: the
 * fast form of the client rule sims.rules.sm3.SM3 (plan: sims/accel/sm3.py; wrapper:
 * sims/accel/native/sm3.py). For each entry j of a layer whose
 * cover sets are the indices of its axes (sims.rules.sm3.SM3Cover: a matrix's rows and columns; a vector's
 * singletons), with mu the row's cover accumulators:
 *
 *   prev = min over the sets S_r containing j of mu_r     (a vector: its own mu_j)
 *   nu   = prev + g^2                  AdaGrad
 *   nu   = b2 prev + (1 - b2) g^2      Adam;  m <- b1 m + (1 - b1) g
 *   theta <- theta - s u,  u = g / (sqrt(nu) + eps)          AdaGrad (s = eta_l)
 *                          u = m / (sqrt(nu) r + eps)        Adam (s = eta_l / c1,
 *                                                            r = 1 / sqrt(c2); 1, 1 off)
 *   mu_r <- max over j in S_r of nu_j                        (after the whole layer)
 *
 * (the readable rule's (m / c1) / (sqrt(nu / c2) + eps) up to rounding, its sqrt(nu / c2)
 * taken as sqrt(nu) / sqrt(c2) as torch's fused Adam does; the floats round as IEEE says).
 * A layer with axes (n_0, .., n_{k-1}) is walked as n_0 ... n_{k-2} "prefix rows" of n_{k-1}
 * entries: the prefix row's minimum over its k-1 accumulators is one number, the last axis'
 * accumulators and the layer's new maxima (a scratch of the layer's accumulators) stay in
 * the cache, the prefix row's maximum is a register. A vector (k = 1; and every layer of the
 * full preconditioner, sims.rules.sm3.SM3Cover(full=True), whose nu is its mu) writes nu
 * straight into its accumulators. So a step reads g, theta (Adam: m) and the accumulators
 * once and writes theta (m), the accumulators and, when asked (nu_out not null), nu:
 * nothing else goes through memory.
 *
 * Outputs may be their inputs (theta_out = theta, m_out = m, mu_out = mu: in place). rows
 * (optional): the indices of the rows to step (the others are not touched); step_size,
 * rsqrt_c2 (optional) one value per listed row. NaN: the maxima propagate a NaN nu as
 * sims.rules.sm3.SM3Cover.cover_max_nonneg does (theta is NaN then in any case).
 */
#include <string.h>

#include "native.h"

/* 256-bit vectors for this file's loops, whatever -march=native prefers: the step's sqrt and
 * division are 512-bit ops split in two on this machine (AMD EPYC, Zen 4), and the loops ran
 * faster at half the width (docs/speed.md); GCC's own tuning for Intel's AVX-512 server cores prefers
 * 256 bits too. Elementwise IEEE operations: the same bits at either width. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=256")
#endif

#define SM3_MAX_AXES 8

/* The next prefix index (the last axis' entries are a prefix row's loop). */
static inline void sm3_next(int64_t *idx, const int64_t *dims, int64_t k) {
    for (int64_t a = k - 2; a >= 0; --a) {
        if (++idx[a] < dims[a]) return;
        idx[a] = 0;
    }
}

/* The minimum of a prefix row's accumulators on the axes before the last (acc: the
 * accumulators read, idx the prefix index). */
#define SM3_PREFIX_MIN(T, acc)                                                           \
    ({ T pm_ = (T)INFINITY;                                                              \
       for (int64_t a = 0; a < k - 1; ++a) {                                             \
           T v = (acc)[aoff[a] + idx[a]];                                                \
           pm_ = v < pm_ ? v : pm_;                                                      \
       }                                                                                 \
       pm_; })

/* Fold a prefix row's maximum (bits, rmax) into the accumulators of its axes before the
 * last (the scratch's new maxima, idx the prefix index). */
#define SM3_FOLD_PREFIX_MAX(I, rmax)                                                     \
    for (int64_t a = 0; a < k - 1; ++a) {                                                \
        I *x_ = scratch + aoff[a] + idx[a];                                              \
        *x_ = (rmax) > *x_ ? (rmax) : *x_;                                               \
    }

/* One piece of a prefix row, q entries (the rule in the header); returns the piece's
 * maximum of nu as the integer view of its bits (nu >= +0: IEEE floats >= +0 order as their
 * bits read as signed integers, so the maxima are integer maxima, which vectorize, and a
 * NaN with its sign bit clear propagates, as in sims.rules.sm3.SM3Cover.cover_max_nonneg). vec
 * (a vector layer): nu is written to colv (its accumulators, which may be mucol) and no
 * maximum is taken; else colb (the last axis' new maxima, bits) takes the entry-wise
 * maximum. adam, vec and wnu (write nu to nuo) are constants in each caller: every
 * combination is its own loop. ivdep: each output is its input or apart from every input
 * (no dependence across entries: in place is entry by entry). */
/* the dispatch of sm3_seg_any: case c calls the loop with its bits (adam, vec, wnu) as
 * constants */
#define SM3_ARGS tho, thi, g, mo, mi, nuo, mucol, colv, colb, pmin, q, lr, rs2, eps, b1, cb1, \
                 b2, cb2
#define SM3_CASE(SUF, c) \
    case c: return sm3_seg_##SUF(SM3_ARGS, (c) >> 2, ((c) >> 1) & 1, (c) & 1);
#define SM3_CASES(SUF) SM3_CASE(SUF, 0) SM3_CASE(SUF, 1) SM3_CASE(SUF, 2) SM3_CASE(SUF, 3)      \
    SM3_CASE(SUF, 4) SM3_CASE(SUF, 5) SM3_CASE(SUF, 6) SM3_CASE(SUF, 7)

#define SM3_SEG(T, I, SUF, SQRT, IMIN)                                                   \
static inline __attribute__((always_inline)) I                                          \
sm3_seg_##SUF(T *tho, const T *thi, const T *g, T *mo, const T *mi, T *nuo,             \
              const T *mucol, T *colv, I *colb, T pmin, int64_t q, T lr, T rs2, T eps,   \
              T b1, T cb1, T b2, T cb2, const int adam, const int vec, const int wnu) {  \
    I r = IMIN;                                                                          \
    _Pragma("GCC ivdep")                                                                 \
    for (int64_t i = 0; i < q; ++i) {                                                    \
        T gi = g[i], mc = mucol[i];                                                      \
        T prev = vec ? mc : (mc < pmin ? mc : pmin);                                     \
        T nu = adam ? b2 * prev + cb2 * (gi * gi) : prev + gi * gi;                      \
        T num = gi;                                                                      \
        if (adam) {                                                                      \
            num = b1 * mi[i] + cb1 * gi;                                                 \
            mo[i] = num;                                                                 \
        }                                                                                \
        if (wnu) nuo[i] = nu;                                                            \
        if (vec) colv[i] = nu;                                                           \
        else {                                                                           \
            I b;                                                                         \
            memcpy(&b, &nu, sizeof b);                                                   \
            colb[i] = colb[i] > b ? colb[i] : b;                                         \
            r = r > b ? r : b;                                                           \
        }                                                                                \
        tho[i] = thi[i] - lr * num / (SQRT(nu) * rs2 + eps);                             \
    }                                                                                    \
    return r;                                                                            \
}                                                                                        \
                                                                                         \
static I sm3_seg_any_##SUF(T *tho, const T *thi, const T *g, T *mo, const T *mi, T *nuo, \
                           const T *mucol, T *colv, I *colb, T pmin, int64_t q, T lr,    \
                           T rs2, T eps, T b1, T cb1, T b2, T cb2, int adam, int vec) {  \
    int c = adam * 4 + vec * 2 + (nuo != 0);                                             \
    switch (c) { SM3_CASES(SUF) }            /* (adam, vec, wnu) as constants */          \
    return IMIN;                                                                         \
}

/* A matrix layer under SM3-I (sm3_step's sm3i; FedAda2 Alg. 3 with z = 1, the client
 * AdaGrad / Adam of sims.rules.sm3.SM3 with precond "sm3-i"): the cover accumulators take
 * the maxima of this step's g^2 first, and nu is the minimum of the new accumulators over
 * the sets containing each entry:
 *
 *   mu_r <- mu_r + max over j in S_r of g_j^2                AdaGrad
 *   mu_r <- b2 mu_r + (1 - b2) max over j in S_r of g_j^2    Adam;  m <- b1 m + (1 - b1) g
 *   nu_j  = min over the sets S_r containing j of mu_r
 *   theta <- theta - s u   (u as in the header)
 *
 * Two passes over the layer's entries: the first reads g for the row and column maxima (a
 * register and the cache-resident scratch, as integer bits of g^2 >= 0), the second reads g,
 * theta (Adam: m) and writes theta (m) and nu. A vector layer (every set a singleton: nu =
 * mu + g^2) is the SM3-II / full rule's. The body of sm3_step's layer loop (its variables). */
#define SM3I_LAYER(T, I, SQRT, IMIN)                                                      \
            /* pass 1: each set's maximum of g^2 (bits) */                               \
            for (int64_t t = 0; t < span; ++t) scratch[off + t] = IMIN;                  \
            I *colb = scratch + aoff[k - 1];                                             \
            for (int64_t p = 0; p < P; ++p) {                                            \
                const T *gp = gr + lo + p * q;                                           \
                I rmax = IMIN;                                                           \
                _Pragma("GCC ivdep")                                                     \
                for (int64_t i = 0; i < q; ++i) {                                        \
                    T s2 = gp[i] * gp[i];                                                \
                    I b;                                                                 \
                    memcpy(&b, &s2, sizeof b);                                           \
                    colb[i] = colb[i] > b ? colb[i] : b;                                 \
                    rmax = rmax > b ? rmax : b;                                          \
                }                                                                        \
                SM3_FOLD_PREFIX_MAX(I, rmax)                                             \
                sm3_next(idx, dims, k);                                                  \
            }                                                                            \
            /* the accumulators */                                                       \
            for (int64_t t = 0; t < span; ++t) {                                         \
                T inc;                                                                   \
                memcpy(&inc, scratch + off + t, sizeof inc);                             \
                muo[off + t] = adam ? b2 * mui[off + t] + cb2 * inc : mui[off + t] + inc; \
            }                                                                            \
            /* pass 2 (idx is back at zero): nu, the minimum over the entry's sets, and  \
             * the step */                                                               \
            const T *mucol = muo + aoff[k - 1];                                          \
            for (int64_t p = 0; p < P; ++p) {                                            \
                T pmin = SM3_PREFIX_MIN(T, muo);                                         \
                int64_t at = lo + p * q;                                                 \
                T *th = tho + at, *nup = nuo + at;                                       \
                const T *ti = thi + at, *gp = gr + at;                                   \
                T *mp = adam ? mo + at : 0;                                              \
                const T *mq = adam ? mi + at : 0;                                        \
                _Pragma("GCC ivdep")                                                     \
                for (int64_t i = 0; i < q; ++i) {                                        \
                    T gi = gp[i], mc = mucol[i];                                         \
                    T nu = mc < pmin ? mc : pmin;                                        \
                    T num = gi;                                                          \
                    if (adam) {                                                          \
                        num = b1 * mq[i] + cb1 * gi;                                     \
                        mp[i] = num;                                                     \
                    }                                                                    \
                    nup[i] = nu;                                                         \
                    th[i] = ti[i] - s * num / (SQRT(nu) * rs2 + e);                      \
                }                                                                        \
                sm3_next(idx, dims, k);                                                  \
            }

#define SM3_STEP(T, I, SUF, SQRT, IMIN)                                                  \
/* desc: per layer [lo, muoff, k, n_0, .., n_{k-1}] (theta offset, first accumulator,    \
 * axes); scratch: size entries per thread (a layer's new maxima, as bits; null where  \
 * every layer is a vector, none needing it) */                                          \
void sm3_step_##SUF(T *theta_out, const T *theta, const T *g, T *m_out, const T *m,     \
                    T *mu_out, const T *mu, T *nu_out, const int64_t *rows, int64_t nrows, \
                    int64_t d, int64_t size, int64_t nlayers, const int64_t *desc,        \
                    const double *step_size, const double *rsqrt_c2, double lr,           \
                    double eps, int64_t adam, double b1d, double b2d, void *scratch_mem,  \
                    int64_t nthreads, int64_t sm3i) {                                     \
    const T b1 = (T)b1d, cb1 = (T)(1.0 - b1d), b2 = (T)b2d, cb2 = (T)(1.0 - b2d);        \
    const T e = (T)eps;                                                                  \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")  \
    for (int64_t ri = 0; ri < nrows; ++ri) {                                             \
        I *scratch = scratch_mem ? (I *)scratch_mem + NATIVE_THREAD * size : 0;          \
        int64_t r = rows ? rows[ri] : ri;                                                \
        T *tho = theta_out + r * d, *muo = mu_out + r * size;                            \
        const T *thi = theta + r * d, *gr = g + r * d, *mui = mu + r * size;             \
        T *mo = adam ? m_out + r * d : 0, *nuo = nu_out ? nu_out + r * d : 0;            \
        const T *mi = adam ? m + r * d : 0;                                              \
        T s = (T)(step_size ? step_size[ri] : lr);                                       \
        T rs2 = (T)(rsqrt_c2 ? rsqrt_c2[ri] : 1.0);                                      \
        const int64_t *L = desc;                                                         \
        for (int64_t l = 0; l < nlayers; ++l) {                                          \
            int64_t lo = L[0], off = L[1], k = L[2];                                     \
            const int64_t *dims = L + 3;                                                 \
            L += 3 + k;                                                                  \
            int64_t q = dims[k - 1];                                                     \
            if (k == 1) {          /* a vector: nu straight into its accumulators */     \
                sm3_seg_any_##SUF(tho + lo, thi + lo, gr + lo, mo ? mo + lo : 0,         \
                                  mi ? mi + lo : 0, nuo ? nuo + lo : 0, mui + off,       \
                                  muo + off, 0, (T)INFINITY, q, s, rs2, e, b1, cb1, b2,  \
                                  cb2, (int)adam, 1);                                    \
                continue;                                                                \
            }                                                                            \
            int64_t aoff[SM3_MAX_AXES], idx[SM3_MAX_AXES], span = 0, P = 1;              \
            for (int64_t a = 0; a < k; ++a) {                                            \
                aoff[a] = off + span;                                                    \
                span += dims[a];                                                         \
                idx[a] = 0;                                                              \
                if (a < k - 1) P *= dims[a];                                             \
            }                                                                            \
            if (sm3i) {                                                                  \
                SM3I_LAYER(T, I, SQRT, IMIN)                                             \
                continue;                                                                \
            }                                                                            \
            for (int64_t t = 0; t < span; ++t) scratch[off + t] = IMIN;                  \
            for (int64_t p = 0; p < P; ++p) {                                            \
                T pmin = SM3_PREFIX_MIN(T, mui);                                         \
                int64_t at = lo + p * q;                                                 \
                I rmax = sm3_seg_any_##SUF(tho + at, thi + at, gr + at,                  \
                                           mo ? mo + at : 0, mi ? mi + at : 0,           \
                                           nuo ? nuo + at : 0, mui + aoff[k - 1], 0,     \
                                           scratch + aoff[k - 1], pmin, q, s, rs2, e,    \
                                           b1, cb1, b2, cb2, (int)adam, 0);              \
                SM3_FOLD_PREFIX_MAX(I, rmax)                                             \
                sm3_next(idx, dims, k);                                                  \
            }                                                                            \
            memcpy(muo + off, scratch + off, sizeof(T) * (size_t)span);                  \
        }                                                                                \
    }                                                                                    \
}

SM3_SEG(float, int32_t, f32, sqrtf, INT32_MIN)
SM3_SEG(double, int64_t, f64, sqrt, INT64_MIN)
SM3_STEP(float, int32_t, f32, sqrtf, INT32_MIN)
SM3_STEP(double, int64_t, f64, sqrt, INT64_MIN)
