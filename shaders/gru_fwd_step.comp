#version 450
// One timestep t of a GRU layer's forward recurrence (PyTorch gate order r, z, n).
// One invocation per (row b, unit j): gh = W_hh h_{t-1} + b_hh for its three
// gate rows, then the gates and h_t. h_{-1} = 0.
//   p:     parameters; W_hh [3H, H] at off0, b_hh [3H] at off1
//   gi:    [T, B, 3H]  W_ih u_t + b_ih (computed before, all steps at once)
//   gh:    [T, B, 3H]  written
//   gates: [3][T, B, H] r, z, n, written
//   h:     [T, B, H]   reads step t-1, writes step t
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi { float gi[]; };
layout(std430, binding = 2) writeonly buffer Gh { float gh[]; };
layout(std430, binding = 3) writeonly buffer Gates { float gates[]; };
layout(std430, binding = 4) buffer Hs { float h[]; };

void main() {
    uint idx = gl_GlobalInvocationID.x;
    uint H = pc.H;
    if (idx >= pc.B * H) return;
    uint b = idx / H;
    uint j = idx - b * H;
    uint row = pc.t * pc.B + b;
    uint rh = pc.T * pc.B * H;
    float ar = 0.0, az = 0.0, an = 0.0, hp = 0.0;
    if (pc.t > 0u) {
        uint prev = (row - pc.B) * H;
        uint wr = pc.off0 + j * H;
        uint wz = pc.off0 + (H + j) * H;
        uint wn = pc.off0 + (2u * H + j) * H;
        for (uint k = 0u; k < H; ++k) {
            float x = h[prev + k];
            ar += x * p[wr + k];
            az += x * p[wz + k];
            an += x * p[wn + k];
        }
        hp = h[prev + j];
    }
    float ghr = ar + p[pc.off1 + j];
    float ghz = az + p[pc.off1 + H + j];
    float ghn = an + p[pc.off1 + 2u * H + j];
    uint g = row * 3u * H;
    float r = sigmoid(gi[g + j] + ghr);
    float z = sigmoid(gi[g + H + j] + ghz);
    float n = tanh_safe(gi[g + 2u * H + j] + r * ghn);
    gh[g + j] = ghr;
    gh[g + H + j] = ghz;
    gh[g + 2u * H + j] = ghn;
    gates[row * H + j] = r;
    gates[rh + row * H + j] = z;
    gates[2u * rh + row * H + j] = n;
    h[row * H + j] = (1.0 - z) * n + z * hp;
}
