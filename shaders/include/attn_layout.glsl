// Where the attention kernels find (position p, batch row b, column j) of
// their [T, B, ·] tensors. q, k and v are the three column blocks of one
// [T, B, 3A] tensor, since one product computes them (Engine::record_attn_fwd),
// and so are their gradients dq, dk and dv (one product takes them back); c,
// dc and a carried prefix's k_pre, v_pre are [T, B, A] (or [P, B, A]) of their
// own. BUF##_RS is a tensor's row stride and BUF##_CO its first column.
// Expects b in scope.
#ifndef DUALSCOPE_ATTN_LAYOUT_GLSL
#define DUALSCOPE_ATTN_LAYOUT_GLSL

#define QKV_RS (3u * pc.A)
#define q_RS QKV_RS
#define q_CO 0u
#define k_RS QKV_RS
#define k_CO pc.A
#define v_RS QKV_RS
#define v_CO (2u * pc.A)
#define dq_RS QKV_RS
#define dq_CO 0u
#define dk_RS QKV_RS
#define dk_CO pc.A
#define dv_RS QKV_RS
#define dv_CO (2u * pc.A)
#define c_RS pc.A
#define c_CO 0u
#define dc_RS pc.A
#define dc_CO 0u
#define k_pre_RS pc.A
#define k_pre_CO 0u
#define v_pre_RS pc.A
#define v_pre_CO 0u
#define dk_pre_RS pc.A
#define dk_pre_CO 0u
#define dv_pre_RS pc.A
#define dv_pre_CO 0u

// The index of (position p, row b, column j) of BUF.
#define ATTN_AT(BUF, p, j) (((p) * pc.B + b) * BUF##_RS + BUF##_CO + (j))

#endif
