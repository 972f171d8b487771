#version 450
// Backpropagation through time for a GRU layer over the steps t = pc.t down
// to pc.t + 1 - pc.n (a chunk; the engine walks the chunks from T-1 down):
// workgroup b walks row b. For each unit j it keeps
//   dh_t = d_h[t] + dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]
// (dh_{t+1} in dh_tot, d_gh[t+1] of the whole row in shared memory) and
// writes the gate gradients of step t.
//   p: W_hh [3H, H] at off0; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H];
//   d_h [T,B,H] (from above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H].
// STAGE_F16 / STAGE_BF16: the product d_gh[t+1] · W_hh with both operands
// rounded to f16 (bfloat16) first (a precision map's `gru.l{l}.rec.bwd`).
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
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
layout(std430, binding = 7) buffer Dgh { float d_gh[]; };
// h_{-1} of each row, [B, H], read where pc.flag & 1 (a carried state); else 0.
layout(std430, binding = 8) readonly buffer H0 { float h0[]; };

// d_gh of the row at the step just done, double-buffered: one barrier per step.
shared float sdgh[2][3u * MAXH];

void main() {
    uint b = gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint rh = pc.T * pc.B * H;
    // A chunk after the first starts from d_gh of the step above it.
    if (pc.t + 1u < pc.T) {
        uint above = (pc.t + 1u) * pc.B + b;
        for (uint r = lid; r < H3; r += WG) sdgh[0][r] = d_gh[above * H3 + r];
    }
    memoryBarrierShared();
    barrier();
    for (uint s = 0u; s < pc.n; ++s) {
        uint t = pc.t - s;
        uint row = t * pc.B + b;
        uint cur = s & 1u;
        // The carry from step t+1 reads the whole of sdgh[cur] (step t+1's values).
        float carry[4];
        for (uint q = 0u; q < 4u; ++q) carry[q] = 0.0;
        if (t + 1u < pc.T) {
            uint next = row + pc.B;
            for (uint q = 0u, j = lid; j < H; j += WG, ++q) {
                float acc = 0.0;
                uint r = 0u;
                for (; r + 4u <= H3; r += 4u) {
                    uint w = pc.off0 + r * H + j;
                    acc += RND(sdgh[cur][r]) * RND(p[w]) + RND(sdgh[cur][r + 1u]) * RND(p[w + H])
                         + RND(sdgh[cur][r + 2u]) * RND(p[w + 2u * H]) + RND(sdgh[cur][r + 3u]) * RND(p[w + 3u * H]);
                }
                for (; r < H3; ++r) acc += RND(sdgh[cur][r]) * RND(p[pc.off0 + r * H + j]);
                carry[q] = dh_tot[next * H + j] * gates[rh + next * H + j] + acc;
            }
        }
        for (uint q = 0u, j = lid; j < H; j += WG, ++q) {
            uint i = row * H + j;
            float dh = d_h[i] + carry[q];
            dh_tot[i] = dh;
            float r = gates[i];
            float z = gates[rh + i];
            float n = gates[2u * rh + i];
            float hp = t > 0u ? h[i - pc.B * H] : ((pc.flag & 1u) != 0u ? h0[b * H + j] : 0.0);
            float dn = dh * (1.0 - z);
            float dz = dh * (hp - n);
            float dan = dn * (1.0 - n * n);
            float dar = dan * gh[row * H3 + 2u * H + j] * r * (1.0 - r);
            float daz = dz * z * (1.0 - z);
            d_gi[row * H3 + j] = dar;
            d_gi[row * H3 + H + j] = daz;
            d_gi[row * H3 + 2u * H + j] = dan;
            d_gh[row * H3 + j] = dar;
            d_gh[row * H3 + H + j] = daz;
            d_gh[row * H3 + 2u * H + j] = dan * r;
            sdgh[cur ^ 1u][j] = dar;
            sdgh[cur ^ 1u][H + j] = daz;
            sdgh[cur ^ 1u][2u * H + j] = dan * r;
        }
        memoryBarrierShared();
        barrier();
    }
}
