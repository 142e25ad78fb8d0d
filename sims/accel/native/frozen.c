/* MimeLite / Mime (and their LAMB variants): one local step with the server's base
 * optimizer state frozen (the rule chain([FirstGradient | SVRG], Frozen(base), [TrustRatio]),
 * sims.rules; wrapper: sims/accel/native/frozen.py, plan: sims/accel/frozen.py). With
 * P = b2 v + eps and Q = vhat + eps of the frozen state (one row of the participants'
 * replica, read from the cache by every row):
 *
 *   g   <- g - anchor + c                     (Mime's SVRG correction; anchor, c optional)
 *   u    = (b1 m + (1 - b1) g) / sqrt(max(P + (1 - b2) g^2, Q))   (Adam base: no Q)
 *   out  = theta - lr u                       (LAMB: theta - lr trust_l(theta, u), per layer)
 *
 * in one pass over each row (LAMB: u into a layer-sized scratch, scratch_len entries a
 * thread, its norms and the step while it is in the cache). out may be theta. lr_rows
 * (optional): a rate per row. Rows are split over nthreads OpenMP threads. */
#include "native.h"

#define FROZEN_STEP(T, SUF, SQRT)                                                            \
static inline T frozen_u_##SUF(T gj, const T *anchor, const T *c, const T *m,            \
                               const T *p, const T *q, int64_t j, T b1, T cb1, T cb2) {  \
    if (anchor) gj = (gj - anchor[j]) + c[j];                                            \
    T den = p[j] + cb2 * gj * gj;                                                        \
    if (q) den = den < q[j] ? q[j] : den;                                                \
    T num = b1 != 0 ? b1 * m[j] + cb1 * gj : gj;                                         \
    return num / SQRT(den);                                                              \
}                                                                                        \
void frozen_step_##SUF(T *out, const T *theta, const T *g, const T *anchor, const T *c,  \
                       const T *m, const T *p, const T *q, int64_t rows, int64_t d,      \
                       const T *lr_rows, double lr, double b1d, double b2d,              \
                       int64_t nlayers, const int64_t *offsets, int64_t phi,             \
                       double phi_min, double phi_max, double lam, T *scratch,           \
                       int64_t scratch_len, int64_t nthreads) {                          \
    const T b1 = (T)b1d, cb1 = (T)(1.0 - b1d), cb2 = (T)(1.0 - b2d);                     \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")  \
    for (int64_t i = 0; i < rows; ++i) {                                                 \
        T *o = out + i * d;                                                              \
        T *sc = scratch ? scratch + NATIVE_THREAD * scratch_len : 0;                     \
        const T *th = theta + i * d, *gi = g + i * d;                                    \
        const T *an = anchor ? anchor + i * d : 0;                                       \
        double lri = lr_rows ? (double)lr_rows[i] : lr;                                  \
        if (nlayers == 0) {                                                              \
            T a = (T)lri;                                                                \
            for (int64_t j = 0; j < d; ++j)                                              \
                o[j] = th[j] - a * frozen_u_##SUF(gi[j], an, c, m, p, q, j, b1, cb1, cb2);\
            continue;                                                                    \
        }                                                                                \
        for (int64_t l = 0; l < nlayers; ++l) {                                          \
            int64_t lo = offsets[l], n = offsets[l + 1] - lo;                            \
            const T *gl = gi;                                                            \
            double acc[3][NATIVE_LANES] = {{0}};                                         \
            for (int64_t b = 0; b < n; b += NATIVE_BLOCK) {  /* u, then its sums in L1 */\
                int64_t e = b + NATIVE_BLOCK < n ? b + NATIVE_BLOCK : n;                 \
                for (int64_t j = b; j < e; ++j)                                          \
                    sc[j] = frozen_u_##SUF(gl[lo + j], an ? an + lo : 0, c ? c + lo : 0, \
                                           m + lo, p + lo, q ? q + lo : 0, j, b1, cb1,   \
                                           cb2);                                         \
                trust_acc_##SUF(acc, th + lo + b, sc + b, e - b, lam);                   \
            }                                                                            \
            trust_apply_##SUF(o + lo, th + lo, sc, n, acc, lri, phi, phi_min, phi_max,   \
                              lam);                                                      \
        }                                                                                \
    }                                                                                    \
}
FROZEN_STEP(float, f32, sqrtf)
FROZEN_STEP(double, f64, sqrt)
