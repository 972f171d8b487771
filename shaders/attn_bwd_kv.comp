#version 450
// Attention backward, per key element (j, b, e): the queries that see key j are
// t in [j, min(j+W-1, T-1)], at slot j+W-1-t;
//   dk[j, e] = Σ_t ds[t, slot] q[t, e],  dv[j, e] = Σ_t attn[t, slot] dc[t, e],
// summed in query order. No atomics: the result does not depend on scheduling.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Attn { float attn[]; };
layout(std430, binding = 2) readonly buffer Ds { float ds[]; };
layout(std430, binding = 3) readonly buffer Dc { float dc[]; };
layout(std430, binding = 4) writeonly buffer Dk { float dk[]; };
layout(std430, binding = 5) writeonly buffer Dv { float dv[]; };

void main() {
    uint idx = gl_GlobalInvocationID.x;
    if (idx >= pc.T * pc.B * pc.A) return;
    uint e = idx % pc.A;
    uint jb = idx / pc.A;
    uint j = jb / pc.B;
    uint b = jb - j * pc.B;
    uint dh = pc.A / pc.NH;
    uint hd = e / dh;
    uint last = min(j + pc.W - 1u, pc.T - 1u);
    float gk = 0.0, gv = 0.0;
    for (uint t = j; t <= last; ++t) {
        uint tb = t * pc.B + b;
        uint slot = (tb * pc.NH + hd) * pc.W + (j + pc.W - 1u - t);
        gk += ds[slot] * q[tb * pc.A + e];
        gv += attn[slot] * dc[tb * pc.A + e];
    }
    dk[idx] = gk;
    dv[idx] = gv;
}
