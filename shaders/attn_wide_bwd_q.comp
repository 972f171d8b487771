#version 450
#extension GL_EXT_control_flow_attributes : require
// Attention backward for the queries in blocks of 64 (attn_wide.glsl): what
// attn_bwd_q.comp computes, with the same buffers. dp_j = dc_t · v_j, then
// ds_j = a_j (dp_j - Σ_j a_j dp_j) / sqrt(dh) into ds ([T, B, NH, W], slots
// as attn, 0 before the row's start), and dq_t = Σ_j ds_j k_j. f0 = 1/sqrt(dh).
//
// Tiled as attn_wide_fwd: one workgroup per (block of 64 queries, row b,
// head), keys in chunks of 64; invocation 16·qi + ki owns queries t0+qi+16r
// and keys ki+16c of each chunk:
//   1. dp (the d_c block in ta, v rows in tb), written to ds; partial sums of
//      a·dp;
//   2. the row sums by a fixed tree;
//   3. zeros before the row's start;
//   4. dq: for each dim chunk, the chunk's ds staged in ta (for the first
//      chunk, ds = a (dp - Σ a dp) / sqrt(dh) computed and written as it is
//      staged) and k rows in tb, dq = Σ_j ds_j k_j over the keys in order
//      (dims 4ki..4ki+3).
// Each invocation reads back only ds values that it wrote itself. Every sum
// has a fixed order, so the result does not depend on scheduling.
#include "model.glsl"
#include "attn_wide.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer Vv { float v[]; };
layout(std430, binding = 2) readonly buffer Attn { float attn[]; };
layout(std430, binding = 3) readonly buffer Dc { float dc[]; };
layout(std430, binding = 4) buffer Ds { float ds[]; };
layout(std430, binding = 5) writeonly buffer Dq { float dq[]; };
// A carried prefix's keys and values, [P, B, A], P = pc.off2 (attn_fwd.comp:
// the extended key axis).
layout(std430, binding = 6) readonly buffer Kp { float k_pre[]; };
layout(std430, binding = 7) readonly buffer Vp { float v_pre[]; };
// The same buffers as vec4s, for the staging's vec4 loads (AW_STAGE).
layout(std430, binding = 0) readonly buffer K4 { vec4 k4[]; };
layout(std430, binding = 1) readonly buffer V4 { vec4 v4[]; };
layout(std430, binding = 3) readonly buffer Dc4 { vec4 dc4[]; };
layout(std430, binding = 6) readonly buffer Kp4 { vec4 k_pre4[]; };
layout(std430, binding = 7) readonly buffer Vp4 { vec4 v_pre4[]; };

uint window_lo(uint t) { return t + pc.off2 + 1u >= pc.W ? t + pc.off2 + 1u - pc.W : 0u; }

void main() {
    uint l = gl_LocalInvocationIndex;
    uint qi = l / 16u, ki = l % 16u;
    uint b = gl_WorkGroupID.y, hd = gl_WorkGroupID.z;
    uint t0 = gl_WorkGroupID.x * AW_QB;
    uint t1 = min(t0 + AW_QB, pc.T);
    uint dh = pc.A / pc.NH;
    uint P = pc.off2;
    uint j0 = window_lo(t0);
    uint nkc = ceil_div(t1 + P - j0, AW_KC);
    uint ndc = ceil_div(dh, AW_DC);
    uint col = hd * dh;

    uvec4 tq = uvec4(t0 + qi) + uvec4(0u, 16u, 32u, 48u);
    uvec4 lo, arow;
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
        lo[r] = window_lo(tq[r]);
        arow[r] = ((tq[r] * pc.B + b) * pc.NH + hd) * pc.W + pc.W - 1u - (tq[r] + P); // + key = slot
    }
#define VALID(r, j) (tq[r] < t1 && (j) >= lo[r] && (j) <= tq[r] + P)

    // 1. dp = dc · v, and Σ a·dp.
    vec4 sum = vec4(0.0);
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint kb = j0 + kc * AW_KC;
        uint kn = min(AW_KC, t1 + P - kb);
        vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
        for (uint c = 0u; c < ndc; ++c) {
            uint db = c * AW_DC, dn = min(AW_DC, dh - db);
            SYNC(); // the previous chunk's reads are done
            if (kc == 0u || ndc > 1u) AW_STAGE(ta, dc, t0, t1 - t0, db, dn);
            AW_STAGE_EXT(tb, v, v_pre, P, kb, kn, db, dn);
            SYNC();
            aw_dots(acc, qi, ki, ceil_div(dn, 4u));
        }
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            [[unroll]] for (uint cc = 0u; cc < 4u; ++cc) {
                uint j = kb + ki + 16u * cc;
                if (VALID(r, j)) {
                    ds[arow[r] + j] = acc[r][cc];
                    sum[r] += attn[arow[r] + j] * acc[r][cc];
                }
            }
        }
    }

    // 2. Row sums.
    sum = aw_reduce_rows(sum, false);

    // 3. Zeros before the row's start (ds itself is written as step 4 stages it).
    for (uint t = t0; t < t1; ++t) {
        uint row = ((t * pc.B + b) * pc.NH + hd) * pc.W;
        uint first = pc.W - 1u + window_lo(t) - (t + P); // slot of the first key
        for (uint w = l; w < first; w += 256u) ds[row + w] = 0.0;
    }

    // 4. dq = Σ_j ds_j k_j: invocation 16·qi + ki owns dims 4ki..4ki+3 of the chunk.
    for (uint c = 0u; c < ndc; ++c) {
        uint db = c * AW_DC, dn = min(AW_DC, dh - db);
        vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
        for (uint kc = 0u; kc < nkc; ++kc) {
            uint kb = j0 + kc * AW_KC;
            uint kn = min(AW_KC, t1 + P - kb);
            SYNC(); // the previous chunk's reads are done
            [[unroll]] for (uint r = 0u; r < 4u; ++r) {
                [[unroll]] for (uint cc = 0u; cc < 4u; ++cc) {
                    uint kk = ki + 16u * cc;
                    float x = 0.0;
                    if (VALID(r, kb + kk)) {
                        uint o = arow[r] + kb + kk;
                        x = ds[o];
                        if (c == 0u) {
                            x = attn[o] * (x - sum[r]) * pc.f0;
                            ds[o] = x;
                        }
                    }
                    ta[AW_IX(qi + 16u * r, kk / 4u)][kk % 4u] = x;
                }
            }
            AW_STAGE_EXT(tb, k, k_pre, P, kb, kn, db, dn);
            SYNC();
            aw_wsum(acc, qi, ki, ceil_div(kn, 4u));
        }
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                uint d = 4u * ki + i;
                if (tq[r] < t1 && d < dn) dq[ATTN_AT(dq, tq[r], col + db + d)] = acc[r][i];
            }
        }
    }
}
