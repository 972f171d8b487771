#version 450
// Partial sums of squares: workgroup g sums x[off0 + g·4096 + …] (4096 values,
// or fewer at the end; n in all) into partials[g]. Each invocation sums its 16
// values in order, then a fixed tree: the result does not depend on scheduling.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Partials { float partials[]; };

shared float red[256];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint base = gl_WorkGroupID.x * 4096u;
    float acc = 0.0;
    for (uint k = 0u; k < 16u; ++k) {
        uint i = base + k * 256u + lid;
        if (i < pc.n) {
            float v = x[pc.off0 + i];
            acc += v * v;
        }
    }
    red[lid] = acc;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    if (lid == 0u) partials[gl_WorkGroupID.x] = red[0];
}
