#version 450
// out[off1 + j] = Σ_r x[off0 + r·D + j] over r < n rows, summed in row order
// (one invocation per column, so the order is fixed): bias gradients.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };

void main() {
    uint j = gl_GlobalInvocationID.x;
    if (j >= pc.D) return;
    float acc = 0.0;
    for (uint r = 0u; r < pc.n; ++r) {
        acc += x[pc.off0 + r * pc.D + j];
    }
    o[pc.off1 + j] = acc;
}
