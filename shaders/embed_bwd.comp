#version 450
// Embedding gradient as a deterministic scatter-add: one invocation per
// (token value x, feature i) sums d_emb over the positions holding x, in a
// fixed order (eight interleaved running sums, then a fixed tree).
// csr: V+1 starts, then the positions grouped by token value.
// Writes grads[off0 + x·D + i] (all of E's gradient; unused tokens get 0).
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Csr { uint csr[]; };
layout(std430, binding = 1) readonly buffer DEmb { float d_emb[]; };
layout(std430, binding = 2) writeonly buffer G { float g[]; };

void main() {
    uint idx = gl_GlobalInvocationID.x;
    if (idx >= pc.V * pc.D) return;
    uint x = idx / pc.D;
    uint i = idx - x * pc.D;
    // Eight running sums, position k going to sum k % 8, so that eight loads
    // are in flight at once (a frequent byte has thousands of positions);
    // they are added in a fixed order at the end.
    float acc[8];
    for (uint q = 0u; q < 8u; ++q) acc[q] = 0.0;
    uint lo = csr[x], hi = csr[x + 1u];
    uint k = lo;
    for (; k + 8u <= hi; k += 8u) {
        [[unroll]] for (uint q = 0u; q < 8u; ++q) acc[q] += d_emb[csr[pc.V + 1u + k + q] * pc.D + i];
    }
    for (uint q = 0u; k < hi; ++k, ++q) acc[q] += d_emb[csr[pc.V + 1u + k] * pc.D + i];
    g[pc.off0 + idx] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
