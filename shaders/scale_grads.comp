#version 450
// Gradient scaling decided on the device, over x[off0 .. off0+n):
//   flag 0: unscale, x *= 1 / S (S this step's loss scale, a power of two: exact)
//   flag 1: clip, x *= clip factor where the norm step decided to clip
#include "model.glsl"
layout(local_size_x = 256) in;
STATE_BUFFER(0)
layout(std430, binding = 1) buffer X { float x[]; };

void main() {
    float f;
    if (pc.flag == 0u) {
        f = 1.0 / ST_F(ST_STEP_SCALE);
    } else {
        if (st[ST_CLIPPED] == 0u || st[ST_SKIP] != 0u) return;
        f = ST_F(ST_CLIP_FACTOR);
    }
    FOR_EACH(i, pc.n) {
        x[pc.off0 + i] *= f;
    }
}
