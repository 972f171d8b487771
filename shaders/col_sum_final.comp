#version 450
// Column sums, pass 2 (after col_sum.comp with more than one chunk):
// out[off1 + j] = Σ_{c < flag} part[off0 + c·D + j], the chunks added in chunk
// order; columns j < off2 are written at off1 + D + j as well.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };

void main() {
    const uint j = gl_GlobalInvocationID.x;
    if (j >= pc.D) return;
    float s = part[pc.off0 + j];
    for (uint c = 1u; c < pc.flag; ++c) s += part[pc.off0 + c * pc.D + j];
    o[pc.off1 + j] = s;
    if (j < pc.off2) o[pc.off1 + pc.D + j] = s;
}
