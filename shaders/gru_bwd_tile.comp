#version 450
// Backpropagation through time for a GRU layer, tiled over the device: the
// workgroups form a JG × BG grid, workgroup (jg, bg) owning 16 hidden units
// (j = 16·jg ..) for one group of batch rows (bg). At each step t (from pc.t
// down, pc.n steps), for each of its (row, unit):
//   dh_t = d_h[t] + dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]
// then the gate gradients of step t, as gru_bwd_seq. The product needs
// d_gh[t+1] of every unit, for the workgroup's rows only: 8 rows × 3H values
// per step (gru_bwd_grid, which owns 4 units of every row, reads all B rows
// each step; across the device that is JG/BG times less traffic through L2).
// W_hh's columns j come from its transpose (wt, [H, 3H]) through the cache.
// Between steps, a grid-wide barrier (include/grid.glsl), or one step per
// dispatch (pc.n = 1).
//   wt [H, 3H]; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H]; d_h [T,B,H] (from
//   above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H]; off1 = BG, the row groups.
// A step stages the rows' d_gh[t+1] in shared memory in two halves of r
// (every invocation's loads issued first); 8 work items (2 groups of 8 units ×
// 4 parts of each half) sum their products over a subgroup (r = lane + S·i),
// combine them with a butterfly of shuffles, and the 4 parts are added in a
// fixed order.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"
#include "butterfly.glsl"

#define UJ 16u
#define MAXH 512u
// Rows per pass, and d_gh values one invocation prefetches (8 rows × 3·512 / 256).
#define PR 8u
#define PRE 48u
#define HALF (3u * MAXH / 2u)
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Wt { float wt[]; };
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
layout(std430, binding = 7) coherent buffer Dgh { float d_gh[]; };
#define GRID_STATE_BINDING 8
#define GRID_SYNC_BINDING 9
#include "grid.glsl"

// d_gh[t+1] of the pass's rows, one half of r at a time: [row][r - half start].
shared float stage[PR * HALF];
// The 4 parts' sums, [part][row][unit].
shared float part[4u * PR * UJ];

struct Inputs {
    float d_h, r, z, n, hp, ghn, z_next;
};

Inputs load_inputs(uint t, uint b, uint j, bool above) {
    uint H = pc.H;
    uint rh = pc.T * pc.B * H;
    uint x = (t * pc.B + b) * H + j;
    Inputs v;
    v.d_h = d_h[x];
    v.r = gates[x];
    v.z = gates[rh + x];
    v.n = gates[2u * rh + x];
    v.hp = t > 0u ? h[x - pc.B * H] : 0.0;
    v.ghn = gh[(t * pc.B + b) * 3u * H + 2u * H + j];
    v.z_next = above ? gates[rh + x + pc.B * H] : 0.0;
    return v;
}

// The gate gradients of step t for (row b, unit j), given the carry; returns dh_t.
float step_grads(uint t, uint b, uint j, Inputs v, float carry) {
    uint H = pc.H;
    uint H3 = 3u * H;
    uint row = t * pc.B + b;
    float dh = v.d_h + carry;
    dh_tot[row * H + j] = dh;
    float dn = dh * (1.0 - v.z);
    float dz = dh * (v.hp - v.n);
    float dan = dn * (1.0 - v.n * v.n);
    float dar = dan * v.ghn * v.r * (1.0 - v.r);
    float daz = dz * v.z * (1.0 - v.z);
    d_gi[row * H3 + j] = dar;
    d_gi[row * H3 + H + j] = daz;
    d_gi[row * H3 + 2u * H + j] = dan;
    d_gh[row * H3 + j] = dar;
    d_gh[row * H3 + H + j] = daz;
    d_gh[row * H3 + 2u * H + j] = dan * v.r;
    return dh;
}

void put(uint w, uint v, float x) {
    // Value v = row·8 + unit of work item w (unit group w % 2, part w / 2).
    part[((w >> 1) * PR + v / 8u) * UJ + (w & 1u) * 8u + v % 8u] = x;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint JG = (H + UJ - 1u) / UJ;
    uint jg = gl_WorkGroupID.x % JG, bg = gl_WorkGroupID.x / JG;
    uint j0 = jg * UJ;
    uint rows_per = (pc.B + pc.off1 - 1u) / pc.off1;
    uint rb0 = bg * rows_per, rb1 = min(pc.B, rb0 + rows_per);
    uint half_len = (H3 + 1u) / 2u;
    uint part_len = (half_len + 3u) / 4u;

    uint S = gl_SubgroupSize;
    uint lane = gl_SubgroupInvocationID;
    uint sg = gl_SubgroupID;
    // One pass with one (row, unit) per invocation: inputs loaded before the
    // barrier, dh_{t+1} kept in a register.
    bool one = rb1 <= rb0 + PR;
    uint fb = rb0 + lid / UJ, fj = j0 + lid % UJ;
    bool mine = one && lid < PR * UJ && fb < rb1 && fj < H;
    float fdh = 0.0;
    if (mine && pc.t + 1u < pc.T) fdh = dh_tot[((pc.t + 1u) * pc.B + fb) * H + fj];
    for (uint s = 0u; s < pc.n; ++s) {
        uint t = pc.t - s;
        bool above = t + 1u < pc.T;
        Inputs fin;
        if (mine) fin = load_inputs(t, fb, fj, above);
        if (s > 0u) grid_sync(s);
        for (uint p0 = rb0; p0 < rb1; p0 += PR) {
            uint nrows = min(PR, rb1 - p0);
            if (above) {
                float pre[PRE];
                uint base = ((t + 1u) * pc.B + p0) * H3;
                [[unroll]] for (uint i = 0u; i < PRE; ++i) {
                    uint e = lid + 256u * i;
                    pre[i] = e < nrows * H3 ? d_gh[base + e] : 0.0;
                }
                float acc[PR][8];
                [[unroll]] for (uint r = 0u; r < PR; ++r)
                    [[unroll]] for (uint u = 0u; u < 8u; ++u) acc[r][u] = 0.0;
                for (uint hf = 0u; hf < 2u; ++hf) {
                    uint lo = hf * half_len, hi = min(H3, lo + half_len);
                    barrier();
                    [[unroll]] for (uint i = 0u; i < PRE; ++i) {
                        uint e = lid + 256u * i;
                        uint row = e / H3, r = e - row * H3;
                        if (row < nrows && r >= lo && r < hi) stage[row * HALF + r - lo] = pre[i];
                    }
                    barrier();
                    if (sg < 8u) {
                        uint ug = sg & 1u, pt = sg >> 1;
                        uint r0 = lo + pt * part_len, r1 = min(hi, r0 + part_len);
                        for (uint r = r0 + lane; r < r1; r += S) {
                            float g[PR];
                            [[unroll]] for (uint row = 0u; row < PR; ++row) g[row] = stage[row * HALF + r - lo];
                            [[unroll]] for (uint u = 0u; u < 8u; ++u) {
                                uint j = j0 + ug * 8u + u;
                                float w = j < H ? wt[j * H3 + r] : 0.0;
                                [[unroll]] for (uint row = 0u; row < PR; ++row) acc[row][u] += g[row] * w;
                            }
                        }
                    }
                }
                if (sg < 8u) {
                    if (S >= 8u && S <= 64u) {
                        float v64[64];
                        [[unroll]] for (uint r = 0u; r < PR; ++r)
                            [[unroll]] for (uint u = 0u; u < 8u; ++u) v64[r * 8u + u] = acc[r][u];
                        float v32[32], v16[16], v8[8];
                        HALVE(v32, v64, 64u, 1u);
                        HALVE(v16, v32, 32u, 2u);
                        HALVE(v8, v16, 16u, 4u);
                        uint g = ((lane & 1u) != 0u ? 32u : 0u) + ((lane & 2u) != 0u ? 16u : 0u)
                               + ((lane & 4u) != 0u ? 8u : 0u);
                        if (S == 8u) {
                            [[unroll]] for (uint i = 0u; i < 8u; ++i) put(sg, g + i, v8[i]);
                        } else {
                            float v4[4];
                            HALVE(v4, v8, 8u, 8u);
                            g += (lane & 8u) != 0u ? 4u : 0u;
                            if (S == 16u) {
                                [[unroll]] for (uint i = 0u; i < 4u; ++i) put(sg, g + i, v4[i]);
                            } else {
                                float v2[2];
                                HALVE(v2, v4, 4u, 16u);
                                g += (lane & 16u) != 0u ? 2u : 0u;
                                if (S == 32u) {
                                    put(sg, g, v2[0]);
                                    put(sg, g + 1u, v2[1]);
                                } else {
                                    float v1[1];
                                    HALVE(v1, v2, 2u, 32u);
                                    put(sg, g + ((lane & 32u) != 0u ? 1u : 0u), v1[0]);
                                }
                            }
                        }
                    } else {
                        [[unroll]] for (uint r = 0u; r < PR; ++r)
                            [[unroll]] for (uint u = 0u; u < 8u; ++u) {
                                float x = subgroupAdd(acc[r][u]);
                                if (lane == 0u) put(sg, r * 8u + u, x);
                            }
                    }
                }
            }
            barrier();
            if (one) {
                if (mine) {
                    uint rl = fb - p0, u = fj - j0;
                    float carry = 0.0;
                    if (above) {
                        float m = ((part[rl * UJ + u] + part[(PR + rl) * UJ + u])
                                 + part[(2u * PR + rl) * UJ + u]) + part[(3u * PR + rl) * UJ + u];
                        carry = fdh * fin.z_next + m;
                    }
                    fdh = step_grads(t, fb, fj, fin, carry);
                }
            } else {
                for (uint i = lid; i < nrows * UJ; i += 256u) {
                    uint rl = i / UJ, u = i - rl * UJ;
                    uint b = p0 + rl, j = j0 + u;
                    if (j >= H) continue;
                    Inputs in_ = load_inputs(t, b, j, above);
                    float carry = 0.0;
                    if (above) {
                        float m = ((part[rl * UJ + u] + part[(PR + rl) * UJ + u])
                                 + part[(2u * PR + rl) * UJ + u]) + part[(3u * PR + rl) * UJ + u];
                        carry = dh_tot[((t + 1u) * pc.B + b) * H + j] * in_.z_next + m;
                    }
                    step_grads(t, b, j, in_, carry);
                }
            }
            barrier();
        }
    }
}
