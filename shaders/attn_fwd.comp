#version 450
#extension GL_EXT_control_flow_attributes : require
// Multi-head sliding-window attention, forward. q, k, v are column blocks of
// one [T, B, 3A] tensor and c is [T, B, A] (attn_layout.glsl); attn
// is [T, B, NH, W], slot w of query t holding key t+1+w-W (0 before the row's
// start). f0 = 1/sqrt(dh).
//
// One workgroup per (block of 16 queries t0..t0+15, row b, head): workgroup
// (x, y, z) = (t0 / 16, b, head). The keys the block sees, [lo(t0), t0+16),
// are walked in chunks of 64 (attn_tile.glsl). Invocation 64·g + x:
//   1. scores: for key x of each chunk and queries t0+g+4r, s = q·k · f0 over
//      dh in chunks of 64 (the q block staged as rows4, k rows in tileb),
//      written to attn; keeps its maximum per query;
//   2. the row maximum m by a fixed tree;
//   3. e = exp(s - m) in place, and the row sum by the same tree;
//   4. a = e / sum in place; the slots before the row's start get 0;
//   5. c: for dim x of each dim chunk, the chunk's weights staged as rows4 and
//      v rows in tileb, c = Σ_j a_j v_j over the keys in order.
// Each invocation reads back only attn values that it wrote itself; all other
// sharing goes through shared memory. Every sum has a fixed order, so the
// result does not depend on scheduling.
//
// Planted bugs (separate variants): FAULT_NO_MAX, the softmax without the
// maximum subtracted (exp overflows on large scores); FAULT_WINDOW_OFF_BY_ONE,
// the window's oldest key dropped (J_t starts at t-W+2), seen once t ≥ W-1.
#include "model.glsl"
#include "attn_tile.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer Vv { float v[]; };
layout(std430, binding = 3) buffer Attn { float attn[]; };
layout(std430, binding = 4) writeonly buffer C { float c[]; };
// A carried prefix's keys and values, [P, B, A], P = pc.off2 (0: none). Keys
// live on an extended axis e = 0 .. P + T - 1 (the prefix, then the row);
// query t sits at e = P + t (docs/carry-state.md). With P = 0 every index
// below is today's.
layout(std430, binding = 5) readonly buffer Kp { float k_pre[]; };
layout(std430, binding = 6) readonly buffer Vp { float v_pre[]; };

// First key (on the extended axis) query t sees.
uint window_lo(uint t) {
    uint e = t + pc.off2;
#ifdef FAULT_WINDOW_OFF_BY_ONE
    return e + 2u >= pc.W ? e + 2u - pc.W : 0u;
#else
    return e + 1u >= pc.W ? e + 1u - pc.W : 0u;
#endif
}

void main() {
    uint l = gl_LocalInvocationIndex;
    uint g = l / 64u, x = l % 64u;
    uint b = gl_WorkGroupID.y, hd = gl_WorkGroupID.z;
    uint t0 = gl_WorkGroupID.x * ATTN_QB;
    uint t1 = min(t0 + ATTN_QB, pc.T);
    uint dh = pc.A / pc.NH;
    uint P = pc.off2;
    uint j0 = window_lo(t0);
    uint nkc = ceil_div(t1 + P - j0, ATTN_KC);
    uint ndc = ceil_div(dh, ATTN_DC);
    uint col = hd * dh; // the head's first column of a block

    // This invocation's queries t0 + g + 4r: their first key and attn row.
    uvec4 tq = uvec4(t0 + g) + uvec4(0u, 4u, 8u, 12u);
    uvec4 lo, arow;
    for (uint r = 0u; r < 4u; ++r) {
        lo[r] = window_lo(tq[r]);
        arow[r] = ((tq[r] * pc.B + b) * pc.NH + hd) * pc.W + pc.W - 1u - (tq[r] + P); // + key = slot
    }
#define VALID(r, j) (tq[r] < t1 && (j) >= lo[r] && (j) <= tq[r] + P)

    // 1. Scores.
    vec4 m = vec4(NEG_INF);
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint kb = j0 + kc * ATTN_KC;
        uint kn = min(ATTN_KC, t1 + P - kb);
        vec4 acc = vec4(0.0);
        for (uint dc = 0u; dc < ndc; ++dc) {
            uint db = dc * ATTN_DC, dn = min(ATTN_DC, dh - db);
            SYNC(); // the previous chunk's reads are done
            if (kc == 0u || ndc > 1u) STAGE_BLOCK(q, t0, t1, db, dn);
            STAGE_TILE_EXT(k, k_pre, P, kb, kn, db, dn, ATTN_KPITCH);
            SYNC();
            if (x < kn) acc = mac_rows(acc, g * ATTN_DC, 1u, x * ATTN_KPITCH, 1u, dn);
        }
        uint j = kb + x;
        for (uint r = 0u; r < 4u; ++r) {
            if (VALID(r, j)) {
                float s = acc[r] * pc.f0;
                attn[arow[r] + j] = s;
                m[r] = max(m[r], s);
            }
        }
    }

    // 2. Row maxima.
    m = reduce_rows(m, true);
#ifdef FAULT_NO_MAX
    m = vec4(0.0);
#endif

    // 3. Exponentials and row sums.
    vec4 sum = vec4(0.0);
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint j = j0 + kc * ATTN_KC + x;
        for (uint r = 0u; r < 4u; ++r) {
            if (VALID(r, j)) {
                float e = exp(attn[arow[r] + j] - m[r]);
                attn[arow[r] + j] = e;
                sum[r] += e;
            }
        }
    }
    sum = reduce_rows(sum, false);

    // 4. Weights, and zeros before the row's start.
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint j = j0 + kc * ATTN_KC + x;
        for (uint r = 0u; r < 4u; ++r) {
            if (VALID(r, j)) attn[arow[r] + j] /= sum[r];
        }
    }
    for (uint t = t0; t < t1; ++t) {
        uint row = ((t * pc.B + b) * pc.NH + hd) * pc.W;
        uint first = pc.W - 1u + window_lo(t) - (t + P); // slot of the first key
        for (uint w = l; w < first; w += 256u) attn[row + w] = 0.0;
    }

    // 5. c = Σ_j a_j v_j: invocation 64·g + x owns dim x of the dim chunk.
    for (uint dc = 0u; dc < ndc; ++dc) {
        uint db = dc * ATTN_DC, dn = min(ATTN_DC, dh - db);
        vec4 acc = vec4(0.0);
        for (uint kc = 0u; kc < nkc; ++kc) {
            uint kb = j0 + kc * ATTN_KC;
            uint kn = min(ATTN_KC, t1 + P - kb);
            SYNC(); // the previous chunk's reads are done
            vec4 p = vec4(0.0);
            for (uint r = 0u; r < 4u; ++r) {
                if (VALID(r, kb + x)) p[r] = attn[arow[r] + kb + x];
            }
            rows4[g * ATTN_KC + x] = p;
            STAGE_TILE_EXT(v, v_pre, P, kb, kn, db, dn, ATTN_DC);
            SYNC();
            if (x < dn) acc = mac_rows(acc, g * ATTN_KC, 1u, x, ATTN_DC, kn);
        }
        for (uint r = 0u; r < 4u; ++r) {
            if (tq[r] < t1 && x < dn) c[ATTN_AT(c, tq[r], col + db + x)] = acc[r];
        }
    }
}
