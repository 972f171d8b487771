#version 450
// Embedding gradient as a deterministic scatter-add in two passes over the
// position lists of the batch (csr, built by the host):
//   csr[0 .. V]            first position-list index of each token value (V+1);
//   csr[V+1 .. V+1+R)      the positions, grouped by token value;
//   csr[V+1+R .. 2V+2+R)   first chunk of each token value (V+1): token x's
//                          list is cut into chunks of EMB_CHUNK positions.
// flag 0, one invocation per (chunk c, feature i): the sum of d_emb over the
//   chunk's positions, in list order, into part[c·D + i];
// flag 1, one invocation per (token value x, feature i): the sum of x's chunk
//   sums in chunk order into grads[off0 + x·D + i] (0 for an unused value).
// Every sum has a fixed order. Cutting the lists keeps a frequent byte (a
// space: thousands of positions) from leaving a few invocations to walk all
// of them while the rest of the device idles.
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"
// 128 positions: a chunk's loop takes at most 32 + 4 passes, and a token
// value's chunks at most rows / 128 + 1 ≤ 32769 (the logits, rows × 256
// floats, fit one storage binding: rows ≤ 2^22), inside lavapipe's guard of
// 65535 loop passes per invocation (docs/shader-loops.md).
#define EMB_CHUNK 128u
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Csr { uint csr[]; };
layout(std430, binding = 1) readonly buffer DEmb { float d_emb[]; };
layout(std430, binding = 2) buffer Part { float part[]; };
layout(std430, binding = 3) writeonly buffer G { float g[]; };

void main() {
    uint rows = pc.T * pc.B;
    uint chunk0 = pc.V + 1u + rows; // where the chunk starts begin
    FOR_EACH(idx, pc.n) {
        uint outer = idx / pc.D;
        uint i = idx - outer * pc.D;
        if (pc.flag == 0u) {
            uint c = outer;
            if (c >= csr[chunk0 + pc.V]) continue;
            // The token value whose chunks hold c: the last x with start <= c.
            uint lo_x = 0u, hi_x = pc.V;
            while (hi_x - lo_x > 1u) {
                uint mid = (lo_x + hi_x) / 2u;
                if (csr[chunk0 + mid] <= c) lo_x = mid; else hi_x = mid;
            }
            uint x = lo_x;
            uint p0 = csr[x] + (c - csr[chunk0 + x]) * EMB_CHUNK;
            uint p1 = min(csr[x + 1u], p0 + EMB_CHUNK);
            float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
            uint k = p0;
            for (; k + 4u <= p1; k += 4u) {
                [[unroll]] for (uint q = 0u; q < 4u; ++q) acc[q] += d_emb[csr[pc.V + 1u + k + q] * pc.D + i];
            }
            for (uint q = 0u; k < p1; ++k, ++q) acc[q] += d_emb[csr[pc.V + 1u + k] * pc.D + i];
            part[c * pc.D + i] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        } else {
            uint x = outer;
            float s = 0.0;
            // The bounds are read before the loop: GPU-assisted validation
            // instruments a buffer read in a loop's condition into a CFG that
            // Mesa 22.3's SPIR-V parser rejects.
            uint c0 = csr[chunk0 + x], c1 = csr[chunk0 + x + 1u];
            for (uint c = c0; c < c1; ++c) s += part[c * pc.D + i];
            g[pc.off0 + idx] = s;
        }
    }
}
