#version 450
// A GRU layer's forward recurrence spread over the whole device: workgroup g
// owns U = 4 hidden units (j = 4g .. 4g+3) for every batch row, and keeps the
// 3U rows of W_hh they need in shared memory for the whole dispatch. A step
// reads h_{t-1} of every row (from global memory), multiplies it by the
// workgroup's rows, applies the gates and writes h_t of its units.
//
// The dispatch walks the steps pc.t .. pc.t + pc.n - 1. Between two steps
// every workgroup must have written h_t before any reads it: a grid-wide
// barrier (include/grid.glsl). It is only safe when every workgroup of the
// dispatch runs at once; the engine uses it on GPUs (ceil(H/4) <= 128
// workgroups) and elsewhere dispatches one step at a time (pc.n = 1: the
// dispatch boundary is the barrier).
//
//   p: W_hh [3H, H] at off0, b_hh [3H] at off1 of the parameters
//   gi: [T, B, 3H] (W_ih u_t + b_ih); gh: [T, B, 3H]; gates: [3][T, B, H]; h: [T, B, H]
// The dot products are split over a subgroup's invocations (k = lane + S·i)
// and summed with subgroupAdd; a subgroup handles NB batch rows at once so
// that each weight read from shared memory serves NB rows.
// When B·U fits one pass and one invocation each (B <= 32 on a GPU), each
// invocation keeps one (row, unit) for the whole dispatch: its bias and
// h_{t-1} stay in registers and its gi is loaded before the barrier, so
// only the matrix product waits on the other workgroups.
// VEC4 (built as gru_fwd_grid_vec4, used where H % 4 == 0): h as vec4;
// with OPERANDS_NONCOHERENT as well, gru_fwd_grid_nc (see below).
// pc.flag (include/probe_bits.glsl): PROBE_BARRIERS_ONLY, no arithmetic, only
// pc.n - 1 grid barriers (the residency check, Engine::grid_barrier_ms); the
// lab's timing probes (results meaningless) skip the barrier, the product
// W_hh h_{t-1} or the gates (PROBE_GRID_NO_BARRIER, _NO_PRODUCT, _NO_GATES).
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
// h values per row an invocation loads at once.
#define KC 16u
// Batch rows per pass: up to 32 subgroups of NB rows.
#define PASS_ROWS 128u
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi { float gi[]; };
layout(std430, binding = 2) writeonly buffer Gh { float gh[]; };
layout(std430, binding = 3) writeonly buffer Gates { float gates[]; };
#ifdef VEC4
// H % 4 == 0: h read four values at a time (fewer, wider loads per step).
layout(std430, binding = 4) coherent buffer Hs { vec4 h4[]; };
#define H_AT(i) h4[(i) >> 2][(i) & 3u]
#ifdef OPERANDS_NONCOHERENT
// gru_fwd_grid_nc: the product's loads of h_{t-1} through an alias without
// `coherent`, so that they may be served through the SM's L1. Only where H % 32
// == 0 (Engine::grid_noncoherent): a row is then whole 128-byte lines (buffers
// start on a line), and a step reads only rows of step t-1 (rows past B are not
// loaded), all written before the last grid barrier and never read before it;
// so no line a load brings into L1 was there before its final value.
layout(std430, binding = 4) readonly buffer HsOperand { vec4 h4_op[]; };
#define H_OPERAND h4_op
#else
#define H_OPERAND h4
#endif
// Where W_hh column k sits in ws: grouped by k % 4, so that the invocations
// of a subgroup (k = 4·lane + c) read neighbouring entries.
#define WS_AT(k) (((k) & 3u) * (pc.H >> 2) + ((k) >> 2))
#else
layout(std430, binding = 4) coherent buffer Hs { float h[]; };
#define H_AT(i) h[i]
#define WS_AT(k) (k)
#endif
#define GRID_STATE_BINDING 5
#define GRID_SYNC_BINDING 6
#include "grid.glsl"

// W_hh rows of this workgroup's units, by k: ws[3k + q] holds gate q's rows
// for the 4 units (zero past H).
shared vec4 ws[3u * MAXH];
// A pass's sums W_hh h_{t-1}: [row in pass][gate] of 4 units.
shared vec4 sums[PASS_ROWS * 3u];

// Gates and h_t of (row b, unit j) at step t; m = W_hh h_{t-1} of the unit's
// three rows, gin its gi, bias its b_hh, hp = h_{t-1}.
void gate(uint t, uint b, uint j, vec3 m, vec3 gin, vec3 bias, float hp, out float hn) {
    uint H = pc.H;
    uint row = t * pc.B + b;
    uint g = row * 3u * H;
    vec3 ghv = m + bias;
    float r = sigmoid(gin.x + ghv.x);
    float z = sigmoid(gin.y + ghv.y);
    float n = tanh_safe(gin.z + r * ghv.z);
    uint rh = pc.T * pc.B * H;
    gh[g + j] = ghv.x;
    gh[g + H + j] = ghv.y;
    gh[g + 2u * H + j] = ghv.z;
    gates[row * H + j] = r;
    gates[rh + row * H + j] = z;
    gates[2u * rh + row * H + j] = n;
    hn = (1.0 - z) * n + z * hp;
    H_AT(row * H + j) = hn;
}

vec3 load_gi(uint t, uint b, uint j) {
    uint g = (t * pc.B + b) * 3u * pc.H;
    return vec3(gi[g + j], gi[g + pc.H + j], gi[g + 2u * pc.H + j]);
}

vec3 load_bias(uint j) {
    return vec3(p[pc.off1 + j], p[pc.off1 + pc.H + j], p[pc.off1 + 2u * pc.H + j]);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H;
    uint j0 = gl_WorkGroupID.x * U;
    for (uint i = lid; i < 3u * H; i += 256u) {
        uint k = i / 3u, q = i - 3u * k;
        vec4 w = vec4(0.0);
        for (uint u = 0u; u < U; ++u) {
            if (j0 + u < H) w[u] = p[pc.off0 + (q * H + j0 + u) * H + k];
        }
        ws[3u * WS_AT(k) + q] = w;
    }
    barrier();

    uint S = gl_SubgroupSize;
    uint lane = gl_SubgroupInvocationID;
    uint sg = gl_SubgroupID;
    uint groups = min(gl_NumSubgroups, PASS_ROWS / NB);
    uint pass_rows = groups * NB;
    // One pass, one (row, unit) per invocation: lid = b·U + u.
    bool one = pc.B <= pass_rows && pc.B * U <= 256u;
    uint fb = lid / U, fj = j0 + lid % U;
    bool mine = one && fb < pc.B && fj < H;
    vec3 fbias = mine ? load_bias(fj) : vec3(0.0);
    float fh = mine && pc.t > 0u ? H_AT(((pc.t - 1u) * pc.B + fb) * H + fj) : 0.0;
    uint t_end = min(pc.T, pc.t + pc.n);
    if (pc.flag == PROBE_BARRIERS_ONLY) {
        // The barrier alone, pc.n - 1 times: the floor of the recurrence.
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }
    for (uint t = pc.t; t < t_end; ++t) {
        vec3 fgi = mine ? load_gi(t, fb, fj) : vec3(0.0);
        if (t > pc.t && (pc.flag & PROBE_GRID_NO_BARRIER) == 0u) grid_sync(t - pc.t);
        for (uint b0 = 0u; b0 < pc.B; b0 += pass_rows) {
            if (sg < groups && t > 0u && b0 + sg * NB < pc.B && (pc.flag & PROBE_GRID_NO_PRODUCT) == 0u) {
                vec4 acc[NB][3];
                for (uint r = 0u; r < NB; ++r)
                    for (uint q = 0u; q < 3u; ++q) acc[r][q] = vec4(0.0);
                uint rb = b0 + sg * NB;
                uint hrow = (t - 1u) * pc.B + rb;
                // KC values of each row per invocation are loaded before any is
                // used, so their latencies overlap (one round trip per chunk).
#ifdef VEC4
                for (uint kb = 0u; kb < H; kb += KC * S) {
                    vec4 xs[NB][KC / 4u];
                    [[unroll]] for (uint i = 0u; i < KC / 4u; ++i) {
                        uint k = kb + 4u * (lane + S * i);
                        [[unroll]] for (uint r = 0u; r < NB; ++r)
                            xs[r][i] = k < H && rb + r < pc.B ? H_OPERAND[((hrow + r) * H + k) >> 2] : vec4(0.0);
                    }
                    [[unroll]] for (uint i = 0u; i < KC / 4u; ++i) {
                        uint k = kb + 4u * (lane + S * i);
                        if (k >= H) break;
                        [[unroll]] for (uint c = 0u; c < 4u; ++c) {
                            uint w = 3u * WS_AT(k + c);
                            vec4 w0 = ws[w], w1 = ws[w + 1u], w2 = ws[w + 2u];
                            [[unroll]] for (uint r = 0u; r < NB; ++r) {
                                acc[r][0] += xs[r][i][c] * w0;
                                acc[r][1] += xs[r][i][c] * w1;
                                acc[r][2] += xs[r][i][c] * w2;
                            }
                        }
                    }
                }
#else
                for (uint kb = 0u; kb < H; kb += KC * S) {
                    float xs[NB][KC];
                    [[unroll]] for (uint i = 0u; i < KC; ++i) {
                        uint k = kb + lane + S * i;
                        [[unroll]] for (uint r = 0u; r < NB; ++r)
                            xs[r][i] = k < H && rb + r < pc.B ? h[(hrow + r) * H + k] : 0.0;
                    }
                    [[unroll]] for (uint i = 0u; i < KC; ++i) {
                        uint k = kb + lane + S * i;
                        if (k >= H) break;
                        vec4 w0 = ws[3u * k], w1 = ws[3u * k + 1u], w2 = ws[3u * k + 2u];
                        [[unroll]] for (uint r = 0u; r < NB; ++r) {
                            acc[r][0] += xs[r][i] * w0;
                            acc[r][1] += xs[r][i] * w1;
                            acc[r][2] += xs[r][i] * w2;
                        }
                    }
                }
#endif
                uint so = sg * NB * 3u;
                if (S >= 8u && S <= 64u) {
                    // Butterfly: the 48 sums end spread over the lanes,
                    // value g = (row·3 + gate)·4 + unit.
                    float v48[48];
                    [[unroll]] for (uint r = 0u; r < NB; ++r)
                        [[unroll]] for (uint q = 0u; q < 3u; ++q)
                            [[unroll]] for (uint c = 0u; c < 4u; ++c) v48[(r * 3u + q) * 4u + c] = acc[r][q][c];
                    float v24[24], v12[12], v6[6];
                    HALVE(v24, v48, 48u, 1u);
                    HALVE(v12, v24, 24u, 2u);
                    HALVE(v6, v12, 12u, 4u);
                    uint g = ((lane & 1u) != 0u ? 24u : 0u) + ((lane & 2u) != 0u ? 12u : 0u) + ((lane & 4u) != 0u ? 6u : 0u);
                    if (S == 8u) {
                        [[unroll]] for (uint i = 0u; i < 6u; ++i) sums[so + (g + i) / 4u][(g + i) % 4u] = v6[i];
                    } else {
                        float v3[3];
                        HALVE(v3, v6, 6u, 8u);
                        g += (lane & 8u) != 0u ? 3u : 0u;
                        if (S >= 32u) [[unroll]] for (uint i = 0u; i < 3u; ++i) v3[i] += subgroupShuffleXor(v3[i], 16u);
                        if (S >= 64u) [[unroll]] for (uint i = 0u; i < 3u; ++i) v3[i] += subgroupShuffleXor(v3[i], 32u);
                        if ((lane & 48u) == 0u)
                            [[unroll]] for (uint i = 0u; i < 3u; ++i) sums[so + (g + i) / 4u][(g + i) % 4u] = v3[i];
                    }
                } else {
                    for (uint r = 0u; r < NB; ++r)
                        for (uint q = 0u; q < 3u; ++q) {
                            vec4 s = subgroupAdd(acc[r][q]);
                            if (lane == 0u) sums[so + r * 3u + q] = s;
                        }
                }
            }
            barrier();
            if (one) {
                if (mine && (pc.flag & PROBE_GRID_NO_GATES) == 0u) {
                    uint u = fj - j0;
                    vec3 m = t > 0u ? vec3(sums[fb * 3u][u], sums[fb * 3u + 1u][u], sums[fb * 3u + 2u][u]) : vec3(0.0);
                    gate(t, fb, fj, m, fgi, fbias, fh, fh);
                }
            } else {
                for (uint i = lid; i < pass_rows * U; i += 256u) {
                    uint rl = i / U, u = i - rl * U;
                    uint b = b0 + rl, j = j0 + u;
                    if (b >= pc.B || j >= H) continue;
                    vec3 m = t > 0u ? vec3(sums[rl * 3u][u], sums[rl * 3u + 1u][u], sums[rl * 3u + 2u][u]) : vec3(0.0);
                    float hp = t > 0u ? H_AT(((t - 1u) * pc.B + b) * H + j) : 0.0;
                    float hn;
                    gate(t, b, j, m, load_gi(t, b, j), load_bias(j), hp, hn);
                }
            }
            barrier();
        }
    }
}
