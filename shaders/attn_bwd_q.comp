#version 450
#extension GL_EXT_control_flow_attributes : require
// Attention backward for the queries: dp_j = dc_t · v_j, then
// ds_j = a_j (dp_j - Σ_j a_j dp_j) / sqrt(dh) into ds ([T, B, NH, W], slots as
// attn, 0 before the row's start), and dq_t = Σ_j ds_j k_j. f0 = 1/sqrt(dh).
//
// Tiled as attn_fwd: one workgroup per (block of 16 queries, row b, head),
// workgroup (x, y, z) = (t0 / 16, b, head), keys in chunks of 64
// (attn_tile.glsl). Invocation 64·g + x:
//   1. dp for key x of each chunk and queries t0+g+4r (the d_c block staged as
//      rows4, v rows in tileb), written to ds; partial sums of a·dp;
//   2. the row sums by a fixed tree;
//   3. ds in place, and zeros before the row's start;
//   4. dq: for dim x of each dim chunk, the chunk's ds staged as rows4 and k
//      rows in tileb, dq = Σ_j ds_j k_j over the keys in order.
// Each invocation reads back only ds values that it wrote itself. Every sum
// has a fixed order, so the result does not depend on scheduling.
#include "model.glsl"
#include "attn_tile.glsl"
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

uint window_lo(uint t) { return t + pc.off2 + 1u >= pc.W ? t + pc.off2 + 1u - pc.W : 0u; }

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
    uint col = hd * dh;

    uvec4 tq = uvec4(t0 + g) + uvec4(0u, 4u, 8u, 12u);
    uvec4 lo, arow;
    for (uint r = 0u; r < 4u; ++r) {
        lo[r] = window_lo(tq[r]);
        arow[r] = ((tq[r] * pc.B + b) * pc.NH + hd) * pc.W + pc.W - 1u - (tq[r] + P); // + key = slot
    }
#define VALID(r, j) (tq[r] < t1 && (j) >= lo[r] && (j) <= tq[r] + P)

    // 1. dp = dc · v, and Σ a·dp.
    vec4 sum = vec4(0.0);
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint kb = j0 + kc * ATTN_KC;
        uint kn = min(ATTN_KC, t1 + P - kb);
        vec4 acc = vec4(0.0);
        for (uint c = 0u; c < ndc; ++c) {
            uint db = c * ATTN_DC, dn = min(ATTN_DC, dh - db);
            SYNC(); // the previous chunk's reads are done
            if (kc == 0u || ndc > 1u) STAGE_BLOCK(dc, t0, t1, db, dn);
            STAGE_TILE_EXT(v, v_pre, P, kb, kn, db, dn, ATTN_KPITCH);
            SYNC();
            if (x < kn) acc = mac_rows(acc, g * ATTN_DC, 1u, x * ATTN_KPITCH, 1u, dn);
        }
        uint j = kb + x;
        for (uint r = 0u; r < 4u; ++r) {
            if (VALID(r, j)) {
                ds[arow[r] + j] = acc[r];
                sum[r] += attn[arow[r] + j] * acc[r];
            }
        }
    }

    // 2. Row sums.
    sum = reduce_rows(sum, false);

    // 3. ds, and zeros before the row's start.
    for (uint kc = 0u; kc < nkc; ++kc) {
        uint j = j0 + kc * ATTN_KC + x;
        for (uint r = 0u; r < 4u; ++r) {
            if (VALID(r, j)) {
                uint o = arow[r] + j;
                ds[o] = attn[o] * (ds[o] - sum[r]) * pc.f0;
            }
        }
    }
    for (uint t = t0; t < t1; ++t) {
        uint row = ((t * pc.B + b) * pc.NH + hd) * pc.W;
        uint first = pc.W - 1u + window_lo(t) - (t + P); // slot of the first key
        for (uint w = l; w < first; w += 256u) ds[row + w] = 0.0;
    }

    // 4. dq = Σ_j ds_j k_j: invocation 64·g + x owns dim x of the dim chunk.
    for (uint c = 0u; c < ndc; ++c) {
        uint db = c * ATTN_DC, dn = min(ATTN_DC, dh - db);
        vec4 acc = vec4(0.0);
        for (uint kc = 0u; kc < nkc; ++kc) {
            uint kb = j0 + kc * ATTN_KC;
            uint kn = min(ATTN_KC, t1 + P - kb);
            SYNC(); // the previous chunk's reads are done
            vec4 p = vec4(0.0);
            for (uint r = 0u; r < 4u; ++r) {
                if (VALID(r, kb + x)) p[r] = ds[arow[r] + kb + x];
            }
            rows4[g * ATTN_KC + x] = p;
            STAGE_TILE_EXT(k, k_pre, P, kb, kn, db, dn, ATTN_DC);
            SYNC();
            if (x < dn) acc = mac_rows(acc, g * ATTN_KC, 1u, x, ATTN_DC, kn);
        }
        for (uint r = 0u; r < 4u; ++r) {
            if (tq[r] < t1 && x < dn) dq[ATTN_AT(dq, tq[r], col + db + x)] = acc[r];
        }
    }
}
