#version 450
// Embedding gradient as a deterministic scatter-add: one invocation per
// (token value x, feature i) sums d_emb over the positions holding x, in
// position order. csr: V+1 starts, then the positions grouped by token value.
// Writes grads[off0 + x·D + i] (all of E's gradient; unused tokens get 0).
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
    float acc = 0.0;
    for (uint k = csr[x]; k < csr[x + 1u]; ++k) {
        acc += d_emb[csr[pc.V + 1u + k] * pc.D + i];
    }
    g[pc.off0 + idx] = acc;
}
