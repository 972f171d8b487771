#version 450
#extension GL_EXT_control_flow_attributes : require
// Attention backward for the keys and values in blocks of 64 keys
// (attn_wide.glsl): what attn_bwd_kv.comp computes, with the same buffers.
// The queries that see key j are t in [j, min(j+W-1, T-1)], at slot j+W-1-t;
//   dk[j] = Σ_t ds[t, slot] q[t],  dv[j] = Σ_t attn[t, slot] dc[t],
// summed in query order. No atomics: the result does not depend on scheduling.
//
// One workgroup per (block of 64 keys j0..j0+63 on the extended axis, row b,
// head), workgroup (x, y, z) = (j0 / 64, b, head); the queries that see the
// block, in chunks of 64. For dk, then dv, and each dim chunk: per query
// chunk, the 64 × 64 weights (ds or attn) are staged in ta as [query][key]
// (64 invocations read 64 consecutive slots of one row) and the q (or d_c)
// rows in tb; invocation 16·qi + ki sums dims 4ki..4ki+3 of keys j0+4qi+r
// (r = 0..3) over the chunk's queries in order: one vec4 of weights and one
// vec4 of q per query and 16 multiply-adds.
#include "model.glsl"
#include "attn_wide.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Attn { float attn[]; };
layout(std430, binding = 2) readonly buffer Ds { float ds[]; };
layout(std430, binding = 3) readonly buffer Dc { float dc[]; };
layout(std430, binding = 4) writeonly buffer Dk { float dk[]; };
layout(std430, binding = 5) writeonly buffer Dv { float dv[]; };
// With a carried prefix of P = pc.off2 positions, keys e < P are the
// prefix's: their gradients go to dk_pre, dv_pre ([P, B, A]), and the engine
// dispatches blocks over P + T keys (attn_bwd_kv.comp).
layout(std430, binding = 6) writeonly buffer Dkp { float dk_pre[]; };
layout(std430, binding = 7) writeonly buffer Dvp { float dv_pre[]; };
// The same buffers as vec4s, for the staging's vec4 loads (AW_STAGE).
layout(std430, binding = 0) readonly buffer Q4 { vec4 q4[]; };
layout(std430, binding = 3) readonly buffer Dc4 { vec4 dc4[]; };

void main() {
    uint l = gl_LocalInvocationIndex;
    uint qi = l / 16u, ki = l % 16u;
    uint b = gl_WorkGroupID.y, hd = gl_WorkGroupID.z;
    uint P = pc.off2;
    uint j0 = gl_WorkGroupID.x * AW_QB;
    uint j1 = min(j0 + AW_QB, pc.T + P);
    // Queries [qs, te) see the block: query t sees key e where t + P is in [e, e + W).
    uint qs = j0 > P ? j0 - P : 0u;
    uint te_e = min(j1 - 1u + pc.W, pc.T + P);
    uint te = te_e > P ? te_e - P : 0u; // past the last query that sees the block
    uint nqc = te > qs ? ceil_div(te - qs, AW_KC) : 0u;
    uint dh = pc.A / pc.NH;
    uint ndc = ceil_div(dh, AW_DC);
    uint col = hd * dh;

    for (uint which = 0u; which < 2u; ++which) { // 0: dk from ds and q; 1: dv from attn and d_c
        for (uint c = 0u; c < ndc; ++c) {
            uint db = c * AW_DC, dn = min(AW_DC, dh - db);
            vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
            for (uint qc = 0u; qc < nqc; ++qc) {
                uint tb0 = qs + qc * AW_KC;
                uint tn = min(AW_KC, te - tb0);
                SYNC(); // the previous chunk's reads are done
                // Weights: invocation l loads the slot of key j0 + l % 64 in
                // the rows of queries l / 64 + 4i of the chunk.
                uint kk = l % AW_QB, j = j0 + kk;
                float w[16];
                [[unroll]] for (uint i = 0u; i < 16u; ++i) {
                    uint t = tb0 + l / AW_QB + 4u * i;
                    uint o = ((t * pc.B + b) * pc.NH + hd) * pc.W + j + pc.W - 1u - (t + P);
                    bool seen = t < tb0 + tn && j < j1 && t + P >= j && t + P + 1u <= j + pc.W;
                    w[i] = seen ? (which == 0u ? ds[o] : attn[o]) : 0.0;
                }
                [[unroll]] for (uint i = 0u; i < 16u; ++i) {
                    ta[AW_IX(l / AW_QB + 4u * i, kk / 4u)][kk % 4u] = w[i];
                }
                if (which == 0u) {
                    AW_STAGE(tb, q, tb0, tn, db, dn);
                } else {
                    AW_STAGE(tb, dc, tb0, tn, db, dn);
                }
                SYNC();
                for (uint t4 = 0u; t4 < ceil_div(tn, 4u); ++t4) {
                    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                        uint t = 4u * t4 + i;
                        vec4 wk = ta[AW_IX(t, qi)], x = tb[AW_IX(t, ki)];
                        acc[0] += wk.x * x;
                        acc[1] += wk.y * x;
                        acc[2] += wk.z * x;
                        acc[3] += wk.w * x;
                    }
                }
            }
            [[unroll]] for (uint r = 0u; r < 4u; ++r) {
                uint j = j0 + 4u * qi + r;
                [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                    uint d = 4u * ki + i;
                    if (j >= j1 || d >= dn) continue;
                    if (j >= P) {
                        uint o = col + db + d;
                        if (which == 0u) {
                            dk[ATTN_AT(dk, j - P, o)] = acc[r][i];
                        } else {
                            dv[ATTN_AT(dv, j - P, o)] = acc[r][i];
                        }
                    } else {
                        uint o = col + db + d;
                        if (which == 0u) {
                            dk_pre[ATTN_AT(dk_pre, j, o)] = acc[r][i];
                        } else {
                            dv_pre[ATTN_AT(dv_pre, j, o)] = acc[r][i];
                        }
                    }
                }
            }
        }
    }
}
