#version 450
// x[off0 + i] += bias[off1 + i mod D] for i < n: a bias added to every row of
// a [n/D, D] matrix; the bias lies in the parameter buffer.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) buffer X { float x[]; };

void main() {
    FOR_EACH(i, pc.n) {
        x[pc.off0 + i] += p[pc.off1 + i % pc.D];
    }
}
