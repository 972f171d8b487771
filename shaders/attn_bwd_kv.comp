#version 450
// Attention backward for the keys and values: the queries that see key j are
// t in [j, min(j+W-1, T-1)], at slot j+W-1-t;
//   dk[j] = Σ_t ds[t, slot] q[t],  dv[j] = Σ_t attn[t, slot] dc[t],
// summed in query order. No atomics: the result does not depend on scheduling.
//
// One workgroup per (block of 16 keys j0..j0+15, row b, head), workgroup
// (x, y, z) = (j0 / 16, b, head); the queries that see the block,
// [j0, min(j0+15+W, T)), in chunks of 64 (attn_tile.glsl). For dk, then for
// dv, and each dim chunk: per query chunk, the 64×16 weights (ds or attn) are
// staged as rows4 and the q (or d_c) rows in tileb; invocation 64·g + x sums
// dim x of keys j0+g+4r over the chunk's queries in order.
#include "model.glsl"
#include "attn_tile.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Attn { float attn[]; };
layout(std430, binding = 2) readonly buffer Ds { float ds[]; };
layout(std430, binding = 3) readonly buffer Dc { float dc[]; };
layout(std430, binding = 4) writeonly buffer Dk { float dk[]; };
layout(std430, binding = 5) writeonly buffer Dv { float dv[]; };

void main() {
    uint l = gl_LocalInvocationIndex;
    uint g = l / 64u, x = l % 64u;
    uint b = gl_WorkGroupID.y, hd = gl_WorkGroupID.z;
    uint j0 = gl_WorkGroupID.x * ATTN_QB;
    uint j1 = min(j0 + ATTN_QB, pc.T);
    uint te = min(j1 - 1u + pc.W, pc.T); // past the last query that sees the block
    uint nqc = ceil_div(te - j0, ATTN_KC);
    uint dh = pc.A / pc.NH;
    uint ndc = ceil_div(dh, ATTN_DC);
    uint col = hd * dh;

    for (uint which = 0u; which < 2u; ++which) { // 0: dk from ds and q; 1: dv from attn and d_c
        for (uint c = 0u; c < ndc; ++c) {
            uint db = c * ATTN_DC, dn = min(ATTN_DC, dh - db);
            vec4 acc = vec4(0.0);
            for (uint qc = 0u; qc < nqc; ++qc) {
                uint tb = j0 + qc * ATTN_KC;
                uint tn = min(ATTN_KC, te - tb);
                SYNC(); // the previous chunk's reads are done
                // Weights: 16 consecutive slots of each query's row per 16 invocations.
                for (uint e = l; e < tn * ATTN_QB; e += 256u) {
                    uint i = e / ATTN_QB, kk = e % ATTN_QB;
                    uint t = tb + i, j = j0 + kk;
                    float w = 0.0;
                    if (j < j1 && t >= j && t + 1u <= j + pc.W) {
                        uint o = ((t * pc.B + b) * pc.NH + hd) * pc.W + j + pc.W - 1u - t;
                        w = which == 0u ? ds[o] : attn[o];
                    }
                    rows4[i * 4u + kk % 4u][kk / 4u] = w;
                }
                for (uint e = l; e < tn * dn; e += 256u) {
                    uint i = e / dn, d = e - i * dn;
                    uint o = ((tb + i) * pc.B + b) * pc.A + col + db + d;
                    tileb[i * ATTN_DC + d] = which == 0u ? q[o] : dc[o];
                }
                SYNC();
                if (x < dn) acc = mac_rows(acc, g, x, ATTN_DC, tn);
            }
            for (uint r = 0u; r < 4u; ++r) {
                uint j = j0 + g + 4u * r;
                if (j < j1 && x < dn) {
                    uint o = (j * pc.B + b) * pc.A + col + db + x;
                    if (which == 0u) {
                        dk[o] = acc[r];
                    } else {
                        dv[o] = acc[r];
                    }
                }
            }
        }
    }
}
