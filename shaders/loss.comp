#version 450
// Masked softmax cross-entropy and its gradient, one workgroup per row
// (position) of logits [R, V], R = T·B. On a masked position:
//   token_loss = m + log Σ exp(x - m) - x[target]   (m the row maximum)
//   dlogits    = coef · (softmax - onehot(target)),  coef = S / N
// with S the loss scale from the state buffer; elsewhere both are 0. N and
// 1/N (f32, rounded once from the exact quotient) follow the R targets in
// tgt (the host writes them with the batch, so that a recorded step can be
// replayed on another batch); workgroup 0 copies N into the state for the
// loss value (state.comp).
// FAULT_NO_MASK (a planted bug, separate variant): the mask is ignored, so
// padded positions add to the loss and get gradients.
// FAULT_NO_CLEAR (a planted bug, separate variant): a masked position's
// gradient is not written, so it is whatever the buffer held (zeros in a
// fresh buffer: only `--poison` shows it).
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Logits { float x[]; };
layout(std430, binding = 1) readonly buffer Tgt { uint tgt[]; };
layout(std430, binding = 2) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 3) writeonly buffer Tl { float token_loss[]; };
layout(std430, binding = 4) writeonly buffer Dl { float dl[]; };
STATE_BUFFER(5)

shared float red[256];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint rows = pc.T * pc.B;
    float coef = ST_F(ST_SCALE) * uintBitsToFloat(tgt[rows + 1u]);
    if (gl_WorkGroupID.x == 0u && lid == 0u) st[ST_N_TARGETS] = tgt[rows];
    for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
        uint o = row * pc.V;
#ifdef FAULT_NO_MASK
        if (false) {
#else
        if (mask[row] == 0u) {
#endif
#ifndef FAULT_NO_CLEAR
            for (uint c = lid; c < pc.V; c += 256u) dl[o + c] = 0.0;
#endif
            if (lid == 0u) token_loss[row] = 0.0;
            continue;
        }
        float m = uintBitsToFloat(0xff800000u);
        for (uint c = lid; c < pc.V; c += 256u) m = max(m, x[o + c]);
        red[lid] = m;
        barrier();
        for (uint s = 128u; s > 0u; s >>= 1) {
            if (lid < s) red[lid] = max(red[lid], red[lid + s]);
            barrier();
        }
        m = red[0];
        barrier();
        float sum = 0.0;
        for (uint c = lid; c < pc.V; c += 256u) sum += exp(x[o + c] - m);
        red[lid] = sum;
        barrier();
        for (uint s = 128u; s > 0u; s >>= 1) {
            if (lid < s) red[lid] += red[lid + s];
            barrier();
        }
        sum = red[0];
        barrier();
        float inv = 1.0 / sum;
        uint target = tgt[row];
        for (uint c = lid; c < pc.V; c += 256u) {
            float g = exp(x[o + c] - m) * inv * coef;
            dl[o + c] = c == target ? g - coef : g;
        }
        if (lid == 0u) token_loss[row] = m + log(sum) - x[o + target];
    }
}
