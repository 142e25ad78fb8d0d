/* The local AMSGrad / Adam / Yogi step (Fed-AMS, Fed-LAMB, LocalAdam, FedLADA, local Yogi) in one pass over each
 * row: the fast form of the client rule chain(Adaptive, TrustRatio?, Amend?) between
 * weight-decay terms (sims.rules; wrapper: sims/accel/native/adaptive.py, plan:
 * sims/accel/adaptive.py). Per element, with g' = g + wd theta (coupled decay):
 *
 *   m' = b1 m + (1 - b1) g'                 v' = b2 v + (1 - b2) g'^2
 *   s  = max(vhat, v' vsc)  -> vhat'         (mode AMS_STEP: AMSGrad, vhat per step)
 *      = vhat                                (mode AMS_ROUND: a round-fixed vhat, read only)
 *      = v'                                  (mode ADAM)
 *   v' = v - (1 - b2) g'^2 sign(v - g'^2), s = v'   (mode YOGI, Zaheer et al. 2018 Alg. 2)
 *   u  = km m' / sqrt(s + eps_r)                (YOGI: km m' / (sqrt(s) + eps_r))
 *   out = theta - lr alpha u - lr (1 - alpha) g_a - lr wd theta       (decoupled decay)
 *
 * (trust: u_l -> ratio_l (u_l + lam theta_l), per layer, native.h's trust_ratio, with u
 * in a layer-sized scratch while it is in the cache). The per-row constants come from the
 * state's counts n, nm (before the step) in double: c1 = 1 - b1^(nm+1), c2 = 1 - b2^(n+1)
 * (1 without bias correction): AMS_STEP vsc = 1 / c2 (the max of the corrected v, Fed-LAMB
 * Alg. 2 lines 11-12), km = 1 / c1, eps_r = eps; AMS_ROUND vsc = 1, km = 1 / c1, eps_r =
 * eps; ADAM km = sqrt(c2) / c1, eps_r = eps c2 (m'/c1 / sqrt(v'/c2 + eps)); YOGI km =
 * sqrt(c2) / c1, eps_r = eps sqrt(c2) (m'/c1 / (sqrt(v'/c2) + eps)).
 *
 * Outputs may be their own input (in place, element for element); g_a is one row of
 * ga_stride 0 (a server row read by every row of the call) or a row per row (stride d).
 * lr_rows (optional): a rate per row; row_mask (optional): rows with 0 keep theta and their
 * state (copied where the output is another tensor). The specialised loops (mode x coupled
 * x amended x decoupled) keep the options' branches out of the inner loops. */
#include <string.h>
#include "native.h"

enum { ADA_AMS_STEP = 0, ADA_AMS_ROUND = 1, ADA_ADAM = 2, ADA_YOGI = 3 };

#define ADA_INLINE static inline __attribute__((always_inline))

/* the arguments of one row's loops, as the dispatcher names them */
#define ADA_ROW_ARGS o, th, gi, mo, mi, vo, vi, vho, vhi, gai, lo, hi, b1, cb1, b2, cb2, wdt,  \
                     vsc, epsr, km, au, aga, awd
#define ADA_ROW_CASE(SUF, M, C, A, D) \
    case M * 8 + C * 4 + A * 2 + D: ada_row_##SUF(M, C, A, D, ADA_ROW_ARGS); break;
#define ADA_C2(SUF, M, C, A) ADA_ROW_CASE(SUF, M, C, A, 0) ADA_ROW_CASE(SUF, M, C, A, 1)
#define ADA_C4(SUF, M, C) ADA_C2(SUF, M, C, 0) ADA_C2(SUF, M, C, 1)
#define ADA_C8(SUF, M) ADA_C4(SUF, M, 0) ADA_C4(SUF, M, 1)
#define ADA_CASES(SUF) ADA_C8(SUF, 0) ADA_C8(SUF, 1) ADA_C8(SUF, 2) ADA_C8(SUF, 3)
#define ADA_U_CASE(SUF, M, C) \
    case M * 2 + C: ada_layer_u_##SUF(M, C, scratch, sq, lamt, ADA_ROW_ARGS); break;
#define ADA_U_CASES(SUF) ADA_U_CASE(SUF, 0, 0) ADA_U_CASE(SUF, 0, 1) ADA_U_CASE(SUF, 1, 0) \
                         ADA_U_CASE(SUF, 1, 1) ADA_U_CASE(SUF, 2, 0) ADA_U_CASE(SUF, 2, 1) \
                         ADA_U_CASE(SUF, 3, 0) ADA_U_CASE(SUF, 3, 1)

#define ADA_TRUST_CASE(SUF, A, D)                                                          \
    case A * 2 + D:                                                                        \
        ada_trust_out_##SUF(A, D, o + lo, th + lo, scratch, a_, len, fu, lamt, aga, awd);  \
        break;
#define ADA_TRUST_CASES(SUF)                                                                \
    ADA_TRUST_CASE(SUF, 0, 0) ADA_TRUST_CASE(SUF, 0, 1) ADA_TRUST_CASE(SUF, 1, 0)           \
    ADA_TRUST_CASE(SUF, 1, 1)

#define ADAPTIVE_STEP(T, SUF, SQRT)                                                          \
/* one element's u; writes m', v' (and vhat') */                                             \
ADA_INLINE T ada_u_##SUF(const int mode, const int wdc, int64_t j, const T *th, const T *g,  \
                         T *mo, const T *m, T *vo, const T *v, T *vho, const T *vh, T b1,    \
                         T cb1, T b2, T cb2, T wd, T vsc, T epsr, T km) {                    \
    T gj = g[j];                                                                             \
    if (wdc) gj = gj + wd * th[j];                                                           \
    T mj = b1 * m[j] + cb1 * gj;                                                             \
    T g2 = gj * gj, vj;                                                                      \
    if (mode == ADA_YOGI) {                                                                  \
        T dv = v[j] - g2;                                                                    \
        vj = v[j] - cb2 * g2 * (T)((dv > 0) - (dv < 0));                                     \
    } else vj = b2 * v[j] + cb2 * g2;                                                        \
    T s;                                                                                     \
    if (mode == ADA_AMS_STEP) { T h = vh[j], c = vj * vsc; s = h < c ? c : h; }              \
    else if (mode == ADA_AMS_ROUND) s = vh[j];                                               \
    else s = vj;                                                                             \
    mo[j] = mj;                                                                              \
    vo[j] = vj;                                                                              \
    if (mode == ADA_AMS_STEP) vho[j] = s;                                                    \
    if (mode == ADA_YOGI) return km * mj / (SQRT(s) + epsr);                                 \
    return km * mj / SQRT(s + epsr);                                                         \
}                                                                                            \
/* columns [lo, hi) of one row without a trust ratio */                                      \
ADA_INLINE void ada_row_##SUF(const int mode, const int wdc, const int amend, const int wdd, \
                              T *o, const T *th, const T *g, T *mo, const T *m, T *vo,       \
                              const T *v, T *vho, const T *vh, const T *ga, int64_t lo,      \
                              int64_t hi, T b1, T cb1, T b2, T cb2, T wd, T vsc, T epsr,     \
                              T km, T au, T aga, T awd) {                                    \
    NATIVE_IVDEP                                                                             \
    for (int64_t j = lo; j < hi; ++j) {                                                      \
        T u = ada_u_##SUF(mode, wdc, j, th, g, mo, m, vo, v, vho, vh, b1, cb1, b2, cb2, wd,  \
                          vsc, epsr, km);                                                    \
        T t = th[j];                                                                         \
        T r = t - au * u;                                                                    \
        if (amend) r = r - aga * ga[j];                                                      \
        if (wdd) r = r - awd * t;                                                            \
        o[j] = r;                                                                            \
    }                                                                                        \
}                                                                                            \
/* columns [lo, hi) of one row (a layer): u into scratch[0, hi - lo) (m, v, vhat written)  \
 * and the layer's squared norms of theta, u and u + lam theta, summed as native.h's sumsq   \
 * (the same lanes and order: the same numbers) while the values are in registers */         \
ADA_INLINE void ada_layer_u_##SUF(const int mode, const int wdc, T *restrict scratch,        \
                                  double *restrict sq, T lam, T *o, const T *th, const T *g, \
                                  T *mo, const T *m, T *vo, const T *v, T *vho, const T *vh, \
                                  const T *ga, int64_t lo, int64_t hi, T b1, T cb1, T b2,    \
                                  T cb2, T wd, T vsc, T epsr, T km, T au, T aga, T awd) {    \
    (void)o; (void)ga; (void)au; (void)aga; (void)awd;                                       \
    double at[NATIVE_LANES] = {0}, au2[NATIVE_LANES] = {0}, aw[NATIVE_LANES] = {0};          \
    int64_t j = lo;                                                                          \
    for (; j + NATIVE_LANES <= hi; j += NATIVE_LANES) {                                      \
        NATIVE_IVDEP                                                                         \
        for (int k = 0; k < NATIVE_LANES; ++k) {                                             \
            T u = ada_u_##SUF(mode, wdc, j + k, th, g, mo, m, vo, v, vho, vh, b1, cb1, b2,   \
                              cb2, wd, vsc, epsr, km);                                       \
            T t = th[j + k], w = u + lam * t;                                                \
            scratch[j + k - lo] = u;                                                         \
            at[k] += (double)t * (double)t;                                                  \
            au2[k] += (double)u * (double)u;                                                 \
            aw[k] += (double)w * (double)w;                                                  \
        }                                                                                    \
    }                                                                                        \
    double st = 0.0, su = 0.0, sw = 0.0;                                                     \
    for (; j < hi; ++j) {                                                                    \
        T u = ada_u_##SUF(mode, wdc, j, th, g, mo, m, vo, v, vho, vh, b1, cb1, b2, cb2, wd,  \
                          vsc, epsr, km);                                                    \
        T t = th[j], w = u + lam * t;                                                        \
        scratch[j - lo] = u;                                                                 \
        st += (double)t * (double)t;                                                         \
        su += (double)u * (double)u;                                                         \
        sw += (double)w * (double)w;                                                         \
    }                                                                                        \
    for (int k = 0; k < NATIVE_LANES; ++k) { st += at[k]; su += au2[k]; sw += aw[k]; }       \
    sq[0] = st; sq[1] = su; sq[2] = sw;                                                      \
}                                                                                            \
/* a layer's step from u in scratch: out = theta + fu (u + lam theta) - aga g_a - awd theta */\
ADA_INLINE void ada_trust_out_##SUF(const int amend, const int wdd, T *o, const T *th,       \
                                    const T *restrict u, const T *ga, int64_t n, T fu,       \
                                    T lam, T aga, T awd) {                                   \
    NATIVE_IVDEP                                                                             \
    for (int64_t j = 0; j < n; ++j) {                                                        \
        T t = th[j];                                                                         \
        T r = t + fu * (u[j] + lam * t);                                                     \
        if (amend) r = r - aga * ga[j];                                                      \
        if (wdd) r = r - awd * t;                                                            \
        o[j] = r;                                                                            \
    }                                                                                        \
}                                                                                            \
void adaptive_step_##SUF(T *out, const T *theta, const T *g, T *m_out, const T *m,          \
                         T *v_out, const T *v, T *vh_out, const T *vh, const T *ga,          \
                         int64_t ga_stride, int64_t rows, int64_t d, const T *n,             \
                         const T *nm, const T *lr_rows, const uint8_t *row_mask, double lr,  \
                         int64_t mode, int64_t bc, double b1d, double b2d, double eps,       \
                         double alpha, double wdd_, int64_t wd_coupled, int64_t nlayers,     \
                         const int64_t *offsets, int64_t phi, double phi_min,                \
                         double phi_max, double lam, T *scratch_all, int64_t scratch_len,    \
                         int64_t nthreads) {                                                 \
    const T b1 = (T)b1d, cb1 = (T)(1.0 - b1d), b2 = (T)b2d, cb2 = (T)(1.0 - b2d);            \
    const T wdt = (T)wdd_, lamt = (T)lam;                                                    \
    const int wdc = wdd_ != 0.0 && wd_coupled, wdd = wdd_ != 0.0 && !wd_coupled;             \
    const int amend = alpha != 1.0;                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)")      \
    for (int64_t i = 0; i < rows; ++i) {                                                     \
        double sq[3] = {0.0, 0.0, 0.0};          /* this row's layer sums (trust) */         \
        T *scratch = scratch_all ? scratch_all + NATIVE_THREAD * scratch_len : 0;            \
        int64_t at = i * d;                                                                  \
        T *o = out + at, *mo = m_out + at, *vo = v_out + at;                                 \
        const T *th = theta + at, *gi = g + at, *mi = m + at, *vi = v + at;                  \
        const T *vhi = vh ? vh + at : 0;                                                     \
        if (row_mask && !row_mask[i]) {          /* a masked row keeps theta and its state */ \
            size_t size = (size_t)d * sizeof(T);                                             \
            if (o != th) memcpy(o, th, size);                                                \
            if (mo != mi) memcpy(mo, mi, size);                                              \
            if (vo != vi) memcpy(vo, vi, size);                                              \
            if (vh_out && vh_out + at != vhi) memcpy(vh_out + at, vhi, size);                \
            continue;                                                                        \
        }                                                                                    \
        double c1 = bc ? 1.0 - pow(b1d, (double)nm[i] + 1.0) : 1.0;                          \
        double c2 = bc ? 1.0 - pow(b2d, (double)n[i] + 1.0) : 1.0;                           \
        double vs = mode == ADA_AMS_STEP ? 1.0 / c2 : 1.0, k = 1.0 / c1, e = eps;            \
        if (mode == ADA_ADAM) {                                                              \
            k = sqrt(c2) / c1; e = eps * c2;                                                 \
        } else if (mode == ADA_YOGI) {                                                       \
            k = sqrt(c2) / c1; e = eps * sqrt(c2);                                           \
        }                                                                                    \
        const T vsc = (T)vs, km = (T)k, epsr = (T)e;                                         \
        double lri = lr_rows ? (double)lr_rows[i] : lr;                                      \
        const T au = (T)(lri * alpha), aga = (T)(lri * (1.0 - alpha)), awd = (T)(lri * wdd_);\
        T *vho = vh_out ? vh_out + at : 0;                                                   \
        const T *gai = ga ? ga + i * ga_stride : 0;                                          \
        if (nlayers == 0) {                                                                  \
            int64_t lo = 0, hi = d;                                                          \
            switch ((int)(mode * 8 + wdc * 4 + amend * 2 + wdd)) { ADA_CASES(SUF) }          \
            continue;                                                                        \
        }                                                                                    \
        for (int64_t l = 0; l < nlayers; ++l) {                                              \
            int64_t lo = offsets[l], hi = offsets[l + 1], len = hi - lo;                     \
            switch ((int)(mode * 2 + wdc)) { ADA_U_CASES(SUF) }                              \
            double ratio = trust_ratio(phi, phi_min, phi_max, sq[0],                         \
                                       lam != 0.0 ? sq[2] : sq[1], sq[1]);                   \
            const T fu = (T)(-lri * alpha * ratio);                                          \
            const T *a_ = gai ? gai + lo : 0;                                                \
            switch ((int)(amend * 2 + wdd)) { ADA_TRUST_CASES(SUF) }                         \
        }                                                                                    \
    }                                                                                        \
}
ADAPTIVE_STEP(float, f32, sqrtf)
ADAPTIVE_STEP(double, f64, sqrt)
