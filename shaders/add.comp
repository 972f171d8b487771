#version 450
// z[i] = x[i] + y[i] for i < n.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Z { float z[]; };

void main() {
    FOR_EACH(i, pc.n) {
        z[i] = x[i] + y[i];
    }
}
