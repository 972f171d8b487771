#version 450
// A GRU layer's forward recurrence spread over the whole device: workgroup g
// owns U = 4 hidden units (j = 4g .. 4g+3) for every batch row, and keeps the
// 3U rows of W_hh they need in shared memory for the whole dispatch. A step
// reads h_{t-1} of every row (from global memory), multiplies it by the
// workgroup's rows, applies the gates and writes h_t of its units.
//
// The dispatch walks the steps pc.t .. pc.t + pc.n - 1. Between two steps
// every workgroup must have written h_t before any reads it: a grid-wide
// barrier (a counter in the step-state buffer that each workgroup raises and
// then waits on). It is only safe when every workgroup of the dispatch runs at
// once; the engine uses it on GPUs (ceil(H/4) <= 128 workgroups) and dispatches
// one step at a time elsewhere (pc.n = 1: the dispatch boundary is the barrier).
// A wait that never ends (workgroups not co-resident) gives up after a bound,
// sets ST_GRID_FAIL and lets every later wait through, so the step reports an
// error instead of hanging the device.
//
//   p: W_hh [3H, H] at off0, b_hh [3H] at off1 of the parameters
//   gi: [T, B, 3H] (W_ih u_t + b_ih); gh: [T, B, 3H]; gates: [3][T, B, H]; h: [T, B, H]
// The dot products are split over a subgroup's invocations (k = lane + S·i)
// and summed with subgroupAdd; a subgroup handles NB batch rows at once so
// that each weight read from shared memory serves NB rows.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"

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
layout(std430, binding = 4) coherent buffer Hs { float h[]; };
#define GRID_STATE_BINDING 5
#include "grid.glsl"

// W_hh rows of this workgroup's units, by k: ws[3k + q] holds gate q's rows
// for the 4 units (zero past H).
shared vec4 ws[3u * MAXH];
// A pass's sums W_hh h_{t-1}: [row in pass][gate] of 4 units.
shared vec4 sums[PASS_ROWS * 3u];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint j0 = gl_WorkGroupID.x * U;
    for (uint i = lid; i < 3u * H; i += 256u) {
        uint k = i / 3u, q = i - 3u * k;
        vec4 w = vec4(0.0);
        for (uint u = 0u; u < U; ++u) {
            if (j0 + u < H) w[u] = p[pc.off0 + (q * H + j0 + u) * H + k];
        }
        ws[i] = w;
    }
    barrier();

    uint S = gl_SubgroupSize;
    uint lane = gl_SubgroupInvocationID;
    uint sg = gl_SubgroupID;
    uint groups = min(gl_NumSubgroups, PASS_ROWS / NB);
    uint pass_rows = groups * NB;
    uint t_end = min(pc.T, pc.t + pc.n);
    for (uint t = pc.t; t < t_end; ++t) {
        if (t > pc.t) grid_sync(t - pc.t);
        for (uint b0 = 0u; b0 < pc.B; b0 += pass_rows) {
            if (sg < groups && t > 0u) {
                vec4 acc[NB][3];
                for (uint r = 0u; r < NB; ++r)
                    for (uint q = 0u; q < 3u; ++q) acc[r][q] = vec4(0.0);
                uint rb = b0 + sg * NB;
                uint hrow = (t - 1u) * pc.B + rb;
                // KC values of each row per invocation are loaded before any is
                // used, so their latencies overlap (one round trip per chunk).
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
                for (uint r = 0u; r < NB; ++r)
                    for (uint q = 0u; q < 3u; ++q) {
                        vec4 s = subgroupAdd(acc[r][q]);
                        if (lane == 0u) sums[(sg * NB + r) * 3u + q] = s;
                    }
            }
            barrier();
            for (uint i = lid; i < pass_rows * U; i += 256u) {
                uint rl = i / U, u = i - rl * U;
                uint b = b0 + rl, j = j0 + u;
                if (b >= pc.B || j >= H) continue;
                uint row = t * pc.B + b;
                uint g = row * H3;
                vec3 m = t > 0u ? vec3(sums[rl * 3u][u], sums[rl * 3u + 1u][u], sums[rl * 3u + 2u][u]) : vec3(0.0);
                float ghr = m.x + p[pc.off1 + j];
                float ghz = m.y + p[pc.off1 + H + j];
                float ghn = m.z + p[pc.off1 + 2u * H + j];
                float r = sigmoid(gi[g + j] + ghr);
                float z = sigmoid(gi[g + H + j] + ghz);
                float n = tanh_safe(gi[g + 2u * H + j] + r * ghn);
                float hp = t > 0u ? h[row * H + j - pc.B * H] : 0.0;
                uint rh = pc.T * pc.B * H;
                gh[g + j] = ghr;
                gh[g + H + j] = ghz;
                gh[g + 2u * H + j] = ghn;
                gates[row * H + j] = r;
                gates[rh + row * H + j] = z;
                gates[2u * rh + row * H + j] = n;
                h[row * H + j] = (1.0 - z) * n + z * hp;
            }
            barrier();
        }
    }
}
