#version 450
// The second pass of a split-K product (src/vk/ops.rs, `gemm_split`):
//   C[r, q] (+)= Σ_{s < slices} P[a_off + s·c_stride + r·n + q]
// where P holds the slices' partial products, [slices, m, n] packed. The
// planes are added in the order s = 0, 1, …, so the result does not depend on
// how the workgroups of either pass were scheduled. With accumulate, the
// existing C is added last, as the unsplit kernel does.
// The push-constant block is gemm_f32.comp's (16 × u32); fields used here:
// m, n, ldc, c_off, accumulate, c_stride, slices, and a_off for the partials' offset.
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer PBuf { float part[]; };
layout(std430, set = 0, binding = 1) buffer CBuf { DTYPE c[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
    uint k_chunk;
    uint c_stride;
    uint slices;
    uint reserved;
} pc;

void main() {
    const uint total = pc.m * pc.n;
    // Grid-stride: any m·n with at most 65535 workgroups.
    for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * 256u) {
        float v = part[pc.a_off + e];
        for (uint s = 1u; s < pc.slices; ++s) v += part[pc.a_off + s * pc.c_stride + e];
        const uint idx = pc.c_off + (e / pc.n) * pc.ldc + e % pc.n;
        if (pc.accumulate != 0u) v += float(c[idx]);
        c[idx] = DTYPE(v);
    }
}
