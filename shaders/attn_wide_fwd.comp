#version 450
#extension GL_EXT_control_flow_attributes : require
// Multi-head sliding-window attention, forward, in blocks of 64 queries
// (attn_wide.glsl): what attn_fwd.comp computes, with the same buffers and
// outputs. q, k, v are column blocks of one [T, B, 3A] tensor and c is
// [T, B, A] (attn_layout.glsl); attn is [T, B, NH, W], slot w of query t
// holding key t+1+w-W (0 before the row's start). f0 = 1/sqrt(dh).
//
// One workgroup per (block of 64 queries t0..t0+63, row b, head): workgroup
// (x, y, z) = (t0 / 64, b, head). The keys the block sees, [lo(t0), t0+64),
// are walked in chunks of 64. Invocation 16·qi + ki owns queries t0+qi+16r
// and, in each key chunk, keys ki+16c (r, c = 0..3):
//   1. scores s = q·k · f0 over dh in chunks of 64 (q block in ta, k rows in
//      tb), written to attn (16 invocations write 16 consecutive slots); its
//      maximum per query;
//   2. the row maximum m by a fixed tree;
//   3. e = exp(s - m) in place, and the row sum by the same tree;
//   4. the slots before the row's start get 0;
//   5. c: for each dim chunk, the chunk's weights staged in ta (for the first
//      chunk, a = e / sum computed and written to attn as it is staged) and v
//      rows in tb, c = Σ_j a_j v_j over the keys in order (dims 4ki..4ki+3).
// Each invocation reads back only attn values that it wrote itself. Every sum
// has a fixed order, so the result does not depend on scheduling.
#include "model.glsl"
#include "attn_wide.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer Vv { float v[]; };
layout(std430, binding = 3) buffer Attn { float attn[]; };
layout(std430, binding = 4) writeonly buffer C { float c[]; };
// A carried prefix's keys and values, [P, B, A], P = pc.off2 (attn_fwd.comp:
// the extended key axis).
layout(std430, binding = 5) readonly buffer Kp { float k_pre[]; };
layout(std430, binding = 6) readonly buffer Vp { float v_pre[]; };
// The same buffers as vec4s, for the staging's vec4 loads (AW_STAGE).
layout(std430, binding = 0) readonly buffer Q4 { vec4 q4[]; };
layout(std430, binding = 1) readonly buffer K4 { vec4 k4[]; };
layout(std430, binding = 2) readonly buffer V4 { vec4 v4[]; };
layout(std430, binding = 5) readonly buffer Kp4 { vec4 k_pre4[]; };
layout(std430, binding = 6) readonly buffer Vp4 { vec4 v_pre4[]; };

// First key (on the extended axis) query t sees.
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
    uint col = hd * dh; // the head's first column of a block

    // This invocation's queries t0 + qi + 16r: their first key and attn row.
    uvec4 tq = uvec4(t0 + qi) + uvec4(0u, 16u, 32u, 48u);
    uvec4 lo, arow;
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
        lo[r] = window_lo(tq[r]);
        arow[r] = ((tq[r] * pc.B + b) * pc.NH + hd) * pc.W + pc.W - 1u - (tq[r] + P); // + key = slot
    }
#define VALID(r, j) (tq[r] < t1 && (j) >= lo[r] && (j) <= tq[r] + P)

    // 1. Scores.
    vec4 m = vec4(NEG_INF);
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint kb = j0 + kc * AW_KC;
        uint kn = min(AW_KC, t1 + P - kb);
        vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
        for (uint dc = 0u; dc < ndc; ++dc) {
            uint db = dc * AW_DC, dn = min(AW_DC, dh - db);
            SYNC(); // the previous chunk's reads are done
            if (kc == 0u || ndc > 1u) AW_STAGE(ta, q, t0, t1 - t0, db, dn);
            AW_STAGE_EXT(tb, k, k_pre, P, kb, kn, db, dn);
            SYNC();
            aw_dots(acc, qi, ki, ceil_div(dn, 4u));
        }
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            [[unroll]] for (uint cc = 0u; cc < 4u; ++cc) {
                uint j = kb + ki + 16u * cc;
                if (VALID(r, j)) {
                    float s = acc[r][cc] * pc.f0;
                    attn[arow[r] + j] = s;
                    m[r] = max(m[r], s);
                }
            }
        }
    }

    // 2. Row maxima.
    m = aw_reduce_rows(m, true);

    // 3. Exponentials and row sums.
    vec4 sum = vec4(0.0);
    for (uint kc = 0u; kc < nkc; ++kc) {
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            [[unroll]] for (uint cc = 0u; cc < 4u; ++cc) {
                uint j = j0 + kc * AW_KC + ki + 16u * cc;
                if (VALID(r, j)) {
                    float e = exp(attn[arow[r] + j] - m[r]);
                    attn[arow[r] + j] = e;
                    sum[r] += e;
                }
            }
        }
    }
    sum = aw_reduce_rows(sum, false);

    // 4. Zeros before the row's start (the weights a = e / sum are written
    //    as step 5 stages them).
    for (uint t = t0; t < t1; ++t) {
        uint row = ((t * pc.B + b) * pc.NH + hd) * pc.W;
        uint first = pc.W - 1u + window_lo(t) - (t + P); // slot of the first key
        for (uint w = l; w < first; w += 256u) attn[row + w] = 0.0;
    }

    // 5. c = Σ_j a_j v_j: invocation 16·qi + ki owns dims 4ki..4ki+3 of the chunk.
    for (uint dc = 0u; dc < ndc; ++dc) {
        uint db = dc * AW_DC, dn = min(AW_DC, dh - db);
        vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
        for (uint kc = 0u; kc < nkc; ++kc) {
            uint kb = j0 + kc * AW_KC;
            uint kn = min(AW_KC, t1 + P - kb);
            SYNC(); // the previous chunk's reads are done
            [[unroll]] for (uint r = 0u; r < 4u; ++r) {
                [[unroll]] for (uint cc = 0u; cc < 4u; ++cc) {
                    uint kk = ki + 16u * cc;
                    float a = 0.0;
                    if (VALID(r, kb + kk)) {
                        uint o = arow[r] + kb + kk;
                        a = attn[o];
                        if (dc == 0u) {
                            a /= sum[r];
                            attn[o] = a;
                        }
                    }
                    ta[AW_IX(qi + 16u * r, kk / 4u)][kk % 4u] = a;
                }
            }
            AW_STAGE_EXT(tb, v, v_pre, P, kb, kn, db, dn);
            SYNC();
            aw_wsum(acc, qi, ki, ceil_div(kn, 4u));
        }
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                uint d = 4u * ki + i;
                if (tq[r] < t1 && d < dn) c[ATTN_AT(c, tq[r], col + db + d)] = acc[r][i];
            }
        }
    }
}
