#version 450
// Backpropagation through time for a GRU layer, spread over the whole device
// as gru_fwd_grid: workgroup g owns U = 4 hidden units (j = 4g .. 4g+3) for
// every batch row and keeps the columns j of W_hh (all 3H rows) in shared
// memory. The dispatch walks t = pc.t down to pc.t + 1 - pc.n; at each step,
// for its units,
//   dh_t = d_h[t] + dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]
// (the last term needs d_gh[t+1] of every unit: written by all workgroups
// before the grid-wide barrier), then the gate gradients of step t.
//   p: W_hh [3H, H] at off0; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H];
//   d_h [T,B,H] (from above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H].
// The same arithmetic as gru_bwd_seq, with the W_hh product's sum split over a
// subgroup (r = lane + S·i) and combined with subgroupAdd. When B·U fits one
// pass and one invocation each, each invocation keeps one (row, unit): its
// inputs of the step are loaded before the barrier, dh_{t+1} in a register.
// VEC4 (built as gru_bwd_grid_vec4, used where H % 4 == 0): d_gh as vec4;
// with OPERANDS_NONCOHERENT as well, gru_bwd_grid_nc.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"
#include "probe_bits.glsl"
#include "butterfly.glsl"

#define U 4u
#define MAXH 512u
#define NB 4u
// d_gh values per row an invocation loads at once.
#define KC 24u
#define PASS_ROWS 128u
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
#ifdef VEC4
// H % 4 == 0: d_gh read four values at a time (fewer, wider loads per step).
layout(std430, binding = 7) coherent buffer Dgh { vec4 d_gh4[]; };
#define DGH_AT(i) d_gh4[(i) >> 2][(i) & 3u]
#ifdef OPERANDS_NONCOHERENT
// gru_bwd_grid_nc: the product's loads of d_gh[t+1] through an alias without
// `coherent` (as gru_fwd_grid_nc's of h_{t-1}; H % 32 == 0, so a row of 3H
// values is whole lines, and a step reads only rows of step t+1, past B none).
layout(std430, binding = 7) readonly buffer DghOperand { vec4 d_gh4_op[]; };
#define DGH_OPERAND d_gh4_op
#else
#define DGH_OPERAND d_gh4
#endif
// Where W_hh row r sits in wc: grouped by r % 4, so that the invocations of
// a subgroup (r = 4·lane + c) read neighbouring entries.
#define WC_AT(r) (((r) & 3u) * ((3u * pc.H) >> 2) + ((r) >> 2))
#else
layout(std430, binding = 7) coherent buffer Dgh { float d_gh[]; };
#define DGH_AT(i) d_gh[i]
#define WC_AT(r) (r)
#endif
#define GRID_STATE_BINDING 8
#define GRID_SYNC_BINDING 9
#include "grid.glsl"

// Columns j0 .. j0+3 of W_hh, by row: wc[r] (zero past H).
shared vec4 wc[3u * MAXH];
// A pass's sums (d_gh[t+1] · W_hh)[:, j0 .. j0+3], by row in the pass.
shared vec4 sums[PASS_ROWS];

// What step t of (row b, unit j) reads besides the carry.
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

// The gate gradients of step t for (row b, unit j), given the carry
// dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]; returns dh_t.
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
    DGH_AT(row * H3 + j) = dar;
    DGH_AT(row * H3 + H + j) = daz;
    DGH_AT(row * H3 + 2u * H + j) = dan * v.r;
    return dh;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint j0 = gl_WorkGroupID.x * U;
    for (uint r = lid; r < H3; r += 256u) {
        vec4 w = vec4(0.0);
        for (uint u = 0u; u < U; ++u) {
            if (j0 + u < H) w[u] = p[pc.off0 + r * H + j0 + u];
        }
        wc[WC_AT(r)] = w;
    }
    barrier();
    if (pc.flag == PROBE_BARRIERS_ONLY) {
        // The barrier alone, pc.n - 1 times (Engine::check_grid_residency).
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }

    uint S = gl_SubgroupSize;
    uint lane = gl_SubgroupInvocationID;
    uint sg = gl_SubgroupID;
    uint groups = min(gl_NumSubgroups, PASS_ROWS / NB);
    uint pass_rows = groups * NB;
    uint rh = pc.T * pc.B * H;
    // One pass, one (row, unit) per invocation (lid = b·U + u): the step's
    // inputs are loaded before the barrier and dh_{t+1} stays in a register.
    bool one = pc.B <= pass_rows && pc.B * U <= 256u;
    uint fb = lid / U, fj = j0 + lid % U;
    bool mine = one && fb < pc.B && fj < H;
    float fdh = 0.0;
    if (mine && pc.t + 1u < pc.T) fdh = dh_tot[((pc.t + 1u) * pc.B + fb) * H + fj];
    for (uint s = 0u; s < pc.n; ++s) {
        uint t = pc.t - s;
        bool above = t + 1u < pc.T;
        Inputs fin;
        if (mine) fin = load_inputs(t, fb, fj, above);
        if (s > 0u) grid_sync(s);
        for (uint b0 = 0u; b0 < pc.B; b0 += pass_rows) {
            if (sg < groups && above && b0 + sg * NB < pc.B) {
                vec4 acc[NB];
                for (uint i = 0u; i < NB; ++i) acc[i] = vec4(0.0);
                uint rb = b0 + sg * NB;
                uint grow = (t + 1u) * pc.B + rb;
                // KC values of each row per invocation are loaded before any is
                // used, so their latencies overlap (one round trip per chunk).
#ifdef VEC4
                for (uint kb = 0u; kb < H3; kb += KC * S) {
                    vec4 gs[NB][KC / 4u];
                    [[unroll]] for (uint c = 0u; c < KC / 4u; ++c) {
                        uint r = kb + 4u * (lane + S * c);
                        [[unroll]] for (uint i = 0u; i < NB; ++i)
                            gs[i][c] = r < H3 && rb + i < pc.B ? DGH_OPERAND[((grow + i) * H3 + r) >> 2] : vec4(0.0);
                    }
                    [[unroll]] for (uint c = 0u; c < KC / 4u; ++c) {
                        uint r = kb + 4u * (lane + S * c);
                        if (r >= H3) break;
                        [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                            vec4 w = wc[WC_AT(r + e)];
                            [[unroll]] for (uint i = 0u; i < NB; ++i) acc[i] += gs[i][c][e] * w;
                        }
                    }
                }
#else
                for (uint kb = 0u; kb < H3; kb += KC * S) {
                    float gs[NB][KC];
                    [[unroll]] for (uint c = 0u; c < KC; ++c) {
                        uint r = kb + lane + S * c;
                        [[unroll]] for (uint i = 0u; i < NB; ++i)
                            gs[i][c] = r < H3 && rb + i < pc.B ? d_gh[(grow + i) * H3 + r] : 0.0;
                    }
                    [[unroll]] for (uint c = 0u; c < KC; ++c) {
                        uint r = kb + lane + S * c;
                        if (r >= H3) break;
                        vec4 w = wc[r];
                        [[unroll]] for (uint i = 0u; i < NB; ++i) acc[i] += gs[i][c] * w;
                    }
                }
#endif
                uint so = sg * NB;
                if (S >= 8u && S <= 64u) {
                    // Butterfly: the 16 sums end spread over the lanes,
                    // value g = row·4 + unit.
                    float v16[16];
                    [[unroll]] for (uint i = 0u; i < NB; ++i)
                        [[unroll]] for (uint c = 0u; c < 4u; ++c) v16[i * 4u + c] = acc[i][c];
                    float v8[8], v4[4], v2[2];
                    HALVE(v8, v16, 16u, 1u);
                    HALVE(v4, v8, 8u, 2u);
                    HALVE(v2, v4, 4u, 4u);
                    uint g = ((lane & 1u) != 0u ? 8u : 0u) + ((lane & 2u) != 0u ? 4u : 0u) + ((lane & 4u) != 0u ? 2u : 0u);
                    if (S == 8u) {
                        sums[so + g / 4u][g % 4u] = v2[0];
                        sums[so + (g + 1u) / 4u][(g + 1u) % 4u] = v2[1];
                    } else {
                        float v1[1];
                        HALVE(v1, v2, 2u, 8u);
                        g += (lane & 8u) != 0u ? 1u : 0u;
                        if (S >= 32u) v1[0] += subgroupShuffleXor(v1[0], 16u);
                        if (S >= 64u) v1[0] += subgroupShuffleXor(v1[0], 32u);
                        if ((lane & 48u) == 0u) sums[so + g / 4u][g % 4u] = v1[0];
                    }
                } else {
                    for (uint i = 0u; i < NB; ++i) {
                        vec4 sum = subgroupAdd(acc[i]);
                        if (lane == 0u) sums[so + i] = sum;
                    }
                }
            }
            barrier();
            if (one) {
                if (mine) {
                    float carry = above ? fdh * fin.z_next + sums[fb][fj - j0] : 0.0;
                    fdh = step_grads(t, fb, fj, fin, carry);
                }
            } else {
                for (uint i = lid; i < pass_rows * U; i += 256u) {
                    uint rl = i / U, u = i - rl * U;
                    uint b = b0 + rl, j = j0 + u;
                    if (b >= pc.B || j >= H) continue;
                    Inputs in_ = load_inputs(t, b, j, above);
                    float carry = 0.0;
                    if (above) carry = dh_tot[((t + 1u) * pc.B + b) * H + j] * in_.z_next + sums[rl][u];
                    step_grads(t, b, j, in_, carry);
                }
            }
            barrier();
        }
    }
}
