#version 450
#extension GL_EXT_control_flow_attributes : require
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
// With a carried prefix of P = pc.off2 positions (attn_fwd.comp: the extended
// key axis), keys e < P are the prefix's: their gradients go to dk_pre, dv_pre
// ([P, B, A]), and the engine dispatches blocks over P + T keys.
layout(std430, binding = 6) writeonly buffer Dkp { float dk_pre[]; };
layout(std430, binding = 7) writeonly buffer Dvp { float dv_pre[]; };

void main() {
    uint l = gl_LocalInvocationIndex;
    uint g = l / 64u, x = l % 64u;
    uint b = gl_WorkGroupID.y, hd = gl_WorkGroupID.z;
    uint P = pc.off2;
    uint j0 = gl_WorkGroupID.x * ATTN_QB;
    uint j1 = min(j0 + ATTN_QB, pc.T + P);
    // Queries [qs, te) see the block: query t sees key e where t + P is in [e, e + W).
    uint qs = j0 > P ? j0 - P : 0u;
    uint te_e = min(j1 - 1u + pc.W, pc.T + P);
    uint te = te_e > P ? te_e - P : 0u; // past the last query that sees the block
    uint nqc = te > qs ? ceil_div(te - qs, ATTN_KC) : 0u;
    uint dh = pc.A / pc.NH;
    uint ndc = ceil_div(dh, ATTN_DC);
    uint col = hd * dh;

    for (uint which = 0u; which < 2u; ++which) { // 0: dk from ds and q; 1: dv from attn and d_c
        for (uint c = 0u; c < ndc; ++c) {
            uint db = c * ATTN_DC, dn = min(ATTN_DC, dh - db);
            vec4 acc = vec4(0.0);
            for (uint qc = 0u; qc < nqc; ++qc) {
                uint tb = qs + qc * ATTN_KC;
                uint tn = min(ATTN_KC, te - tb);
                SYNC(); // the previous chunk's reads are done
                // Weights: invocation l loads the slot of key j0 + l % 16 in the
                // rows of queries l / 16 + 16i of the chunk (16 invocations read
                // 16 consecutive slots of one row).
                uint kk = l % ATTN_QB, j = j0 + kk;
                float w[4];
                [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                    uint t = tb + l / ATTN_QB + 16u * i;
                    uint o = ((t * pc.B + b) * pc.NH + hd) * pc.W + j + pc.W - 1u - (t + P);
                    bool seen = t < tb + tn && j < j1 && t + P >= j && t + P + 1u <= j + pc.W;
                    w[i] = seen ? (which == 0u ? ds[o] : attn[o]) : 0.0;
                }
                [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                    rows4[(l / ATTN_QB + 16u * i) * 4u + kk % 4u][kk / 4u] = w[i];
                }
                if (which == 0u) {
                    STAGE_TILE(q, tb, tn, db, dn, ATTN_DC);
                } else {
                    STAGE_TILE(dc, tb, tn, db, dn, ATTN_DC);
                }
                SYNC();
                if (x < dn) acc = mac_rows(acc, g, 4u, x, ATTN_DC, tn);
            }
            for (uint r = 0u; r < 4u; ++r) {
                uint j = j0 + g + 4u * r;
                if (j < j1 && x < dn && j >= P) {
                    uint o = col + db + x;
                    if (which == 0u) {
                        dk[ATTN_AT(dk, j - P, o)] = acc[r];
                    } else {
                        dv[ATTN_AT(dv, j - P, o)] = acc[r];
                    }
                } else if (j < j1 && x < dn) {
                    uint o = col + db + x;
                    if (which == 0u) {
                        dk_pre[ATTN_AT(dk_pre, j, o)] = acc[r];
                    } else {
                        dv_pre[ATTN_AT(dv_pre, j, o)] = acc[r];
                    }
                }
            }
        }
    }
}
