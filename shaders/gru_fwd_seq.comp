#version 450
// A GRU layer's forward recurrence over the steps pc.t .. pc.t + pc.n - 1 (a
// chunk; PyTorch gate order r, z, n). Rows of a batch are independent, so
// workgroup b walks row b through the chunk's timesteps, keeping h_{t-1} in shared memory (double-buffered:
// one barrier per step). Invocation lid owns units j = lid, lid + 1024, ...
//   wt:    W_hh transposed, [H, 3H] (so that neighbouring units read
//          neighbouring addresses); p: b_hh [3H] at off1 of the parameters
//   gi:    [T, B, 3H] W_ih u_t + b_ih; gh: [T, B, 3H]; gates: [3][T, B, H]; h: [T, B, H]
// FAULT_NO_BARRIER: the barrier between steps is missing (a planted bug).
// FAULT_RESET_BEFORE: n = tanh(gi_n + W_hn (r ⊙ h_{t-1}) + b_hn), the reset
// gate applied before the matmul (TensorFlow's convention; a planted bug).
#include "model.glsl"
#include "stage_round.glsl"
#define MAXH 1024u
// Invocations per workgroup: 1024 (every unit its own invocation up to H = 1024),
// or 256 for narrow layers (build.rs's `_wg256` variants), where idle
// invocations would only wait at the barriers.
#ifndef WG_SIZE
#define WG_SIZE 1024
#endif
#define WG uint(WG_SIZE)
layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi { float gi[]; };
layout(std430, binding = 2) writeonly buffer Gh { float gh[]; };
layout(std430, binding = 3) writeonly buffer Gates { float gates[]; };
layout(std430, binding = 4) buffer Hs { float h[]; };
layout(std430, binding = 5) readonly buffer Wt { float wt[]; };
// h_{-1} of each row, [B, H], read where pc.flag & 1 (a carried state,
// docs/carry-state.md); else h_{-1} = 0.
layout(std430, binding = 6) readonly buffer H0 { float h0[]; };

shared float hs[2][MAXH];
#ifdef FAULT_RESET_BEFORE
shared float rh[MAXH];
#endif

void main() {
    uint b = gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint rh_len = pc.T * pc.B * H;
    // A chunk after the first starts from h of the step before it.
    for (uint j = lid; j < H; j += WG) {
        hs[0][j] = pc.t > 0u ? h[((pc.t - 1u) * pc.B + b) * H + j] : ((pc.flag & 1u) != 0u ? h0[b * H + j] : 0.0);
    }
    memoryBarrierShared();
    barrier();
    uint t_end = min(pc.T, pc.t + pc.n);
    for (uint t = pc.t; t < t_end; ++t) {
        uint cur = (t - pc.t) & 1u;
        uint row = t * pc.B + b;
        uint g = row * H3;
#ifdef FAULT_RESET_BEFORE
        // r first, for every unit, then the n gate's matmul over r ⊙ h.
        for (uint j = lid; j < H; j += WG) {
            float ar = 0.0;
            for (uint k = 0u; k < H; ++k) ar += hs[cur][k] * wt[k * H3 + j];
            rh[j] = sigmoid(gi[g + j] + ar + p[pc.off1 + j]) * hs[cur][j];
        }
        memoryBarrierShared();
        barrier();
#endif
        for (uint j = lid; j < H; j += WG) {
            float ar = 0.0, az = 0.0, an = 0.0;
            // Two steps of k per iteration: lavapipe stops any one loop after
            // 65535 iterations in total per invocation (the engine sizes the
            // chunks for that).
            uint k = 0u;
            for (; k + 2u <= H; k += 2u) {
                float x0 = RND(hs[cur][k]), x1 = RND(hs[cur][k + 1u]);
                uint w = k * H3 + j;
                ar += x0 * RND(wt[w]) + x1 * RND(wt[w + H3]);
                az += x0 * RND(wt[w + H]) + x1 * RND(wt[w + H3 + H]);
#ifdef FAULT_RESET_BEFORE
                an += rh[k] * wt[w + 2u * H] + rh[k + 1u] * wt[w + H3 + 2u * H];
#else
                an += x0 * RND(wt[w + 2u * H]) + x1 * RND(wt[w + H3 + 2u * H]);
#endif
            }
            for (; k < H; ++k) {
                float x = RND(hs[cur][k]);
                uint w = k * H3 + j;
                ar += x * RND(wt[w]);
                az += x * RND(wt[w + H]);
#ifdef FAULT_RESET_BEFORE
                an += rh[k] * wt[w + 2u * H];
#else
                an += x * RND(wt[w + 2u * H]);
#endif
            }
            float ghr = ar + p[pc.off1 + j];
            float ghz = az + p[pc.off1 + H + j];
            float ghn = an + p[pc.off1 + 2u * H + j];
            float r = sigmoid(gi[g + j] + ghr);
            float z = sigmoid(gi[g + H + j] + ghz);
#ifdef FAULT_RESET_BEFORE
            float n = tanh_safe(gi[g + 2u * H + j] + ghn);
#else
            float n = tanh_safe(gi[g + 2u * H + j] + r * ghn);
#endif
            float hn = (1.0 - z) * n + z * hs[cur][j];
            gh[g + j] = ghr;
            gh[g + H + j] = ghz;
            gh[g + 2u * H + j] = ghn;
            gates[row * H + j] = r;
            gates[rh_len + row * H + j] = z;
            gates[2u * rh_len + row * H + j] = n;
            h[row * H + j] = hn;
            hs[cur ^ 1u][j] = hn;
        }
#ifndef FAULT_NO_BARRIER
        memoryBarrierShared();
        barrier();
#endif
    }
}
