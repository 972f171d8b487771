#version 450
// out[c·R + r] = x[off0 + r·D + c] for a [R, D] block (R = n / D).
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };

void main() {
    uint rows = pc.n / pc.D;
    FOR_EACH(i, pc.n) {
        uint r = i / pc.D;
        uint c = i - r * pc.D;
        o[c * rows + r] = x[pc.off0 + i];
    }
}
