#version 450
// One timestep t of backpropagation through time for a GRU layer, walked from
// t = T-1 down. One invocation per (row b, unit j):
//   dh_t = d_h[t] + dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]
// then the gate gradients of step t. dh_tot keeps dh_t for the step below.
//   p: W_hh [3H, H] at off0; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H];
//   d_h [T,B,H] (from above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H].
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
layout(std430, binding = 7) buffer Dgh { float d_gh[]; };

void main() {
    uint idx = gl_GlobalInvocationID.x;
    uint H = pc.H;
    if (idx >= pc.B * H) return;
    uint b = idx / H;
    uint j = idx - b * H;
    uint row = pc.t * pc.B + b;
    uint rh = pc.T * pc.B * H;
    uint g3 = 3u * H;
    float carry = 0.0;
    if (pc.t + 1u < pc.T) {
        uint next = row + pc.B;
        float acc = 0.0;
        for (uint r = 0u; r < g3; ++r) {
            acc += d_gh[next * g3 + r] * p[pc.off0 + r * H + j];
        }
        carry = dh_tot[next * H + j] * gates[rh + next * H + j] + acc;
    }
    uint i = row * H + j;
    float dh = d_h[i] + carry;
    dh_tot[i] = dh;
    float r = gates[i];
    float z = gates[rh + i];
    float n = gates[2u * rh + i];
    float hp = pc.t > 0u ? h[i - pc.B * H] : 0.0;
    float dn = dh * (1.0 - z);
    float dz = dh * (hp - n);
    float dan = dn * (1.0 - n * n);
    float dar = dan * gh[row * g3 + 2u * H + j] * r * (1.0 - r);
    float daz = dz * z * (1.0 - z);
    d_gi[row * g3 + j] = dar;
    d_gi[row * g3 + H + j] = daz;
    d_gi[row * g3 + 2u * H + j] = dan;
    d_gh[row * g3 + j] = dar;
    d_gh[row * g3 + H + j] = daz;
    d_gh[row * g3 + 2u * H + j] = dan * r;
}
