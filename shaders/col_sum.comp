#version 450
// Column sums (bias gradients), pass 1: out[off1 + c·D + j] = Σ x[off0 + r·S + j]
// over the rows r of chunk c, [c·R, min(n, (c+1)·R)) with R = pc.t rows per
// chunk and S = pc.H values between rows (S >= D); the dispatch is
// ceil(D/32) × chunks workgroups. With one chunk this is the whole column sum,
// written straight to its place, the sums of columns j < pc.off2 also at
// off1 + D + j; with more, col_sum_final.comp adds the chunks' sums in chunk
// order.
//
// A workgroup takes 32 columns (x) and splits the chunk's rows over 8 lanes
// (y): lane l sums rows l, l+8, l+16, … of the chunk in increasing order
// (four loads in flight at a time), then invocation (x, 0) adds the lanes'
// sums in lane order. Every addition happens in a fixed order, so the result
// does not depend on scheduling. A warp reads 32 consecutive floats of a row.
// A lane walks at most R/8 rows, which keeps lavapipe's 65535-iteration loop
// guard far away (the host caps R, src/vk/engine/reduce.rs).
#include "model.glsl"
layout(local_size_x = 32, local_size_y = 8, local_size_z = 1) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };

shared float lanes[8][32];

void main() {
    const uint col = gl_LocalInvocationID.x;
    const uint lane = gl_LocalInvocationID.y;
    const uint j = gl_WorkGroupID.x * 32u + col;
    const uint chunk = gl_WorkGroupID.y;
    const uint r_end = min(pc.n, (chunk + 1u) * pc.t);
    float acc = 0.0;
    if (j < pc.D) {
        const uint base = pc.off0 + j;
        uint r = chunk * pc.t + lane;
        for (; r + 24u < r_end; r += 32u) {
            const float v0 = x[base + r * pc.H];
            const float v1 = x[base + (r + 8u) * pc.H];
            const float v2 = x[base + (r + 16u) * pc.H];
            const float v3 = x[base + (r + 24u) * pc.H];
            acc += v0;
            acc += v1;
            acc += v2;
            acc += v3;
        }
        for (; r < r_end; r += 8u) acc += x[base + r * pc.H];
    }
    lanes[lane][col] = acc;
    barrier();
    if (lane == 0u && j < pc.D) {
        float s = lanes[0][col];
        for (uint l = 1u; l < 8u; ++l) s += lanes[l][col];
        o[pc.off1 + chunk * pc.D + j] = s;
        if (j < pc.off2) o[pc.off1 + pc.D + j] = s;
    }
}
