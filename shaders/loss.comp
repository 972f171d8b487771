#version 450
// Masked softmax cross-entropy and its gradient over the rows (positions)
// of logits [R, V], R = T·B, eight rows per workgroup: team i (invocations
// 32i .. 32i+31) takes row 8w + i, each invocation the columns lane + 32j in
// order, then a fixed tree of five levels over the team in shared memory, so
// the result does not depend on scheduling (one workgroup per row would spend
// ~20 workgroup barriers on each). On a masked position:
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

#define TEAM 32u
#define TEAMS 8u
shared float red[256];

// The team's values in red[] (one per invocation) reduced by a fixed tree
// to red[32·team]: max or sum. Every invocation of the workgroup calls it.
float team_reduce(uint lid, float v, bool is_max) {
    uint lane = lid % TEAM;
    red[lid] = v;
    barrier();
    for (uint s = TEAM / 2u; s > 0u; s >>= 1) {
        if (lane < s) red[lid] = is_max ? max(red[lid], red[lid + s]) : red[lid] + red[lid + s];
        barrier();
    }
    float r = red[lid - lane];
    barrier();
    return r;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint lane = lid % TEAM;
    uint rows = pc.T * pc.B;
    float coef = ST_F(ST_SCALE) * uintBitsToFloat(tgt[rows + 1u]);
    if (gl_WorkGroupID.x == 0u && lid == 0u) st[ST_N_TARGETS] = tgt[rows];
    // Every invocation walks the same bases, so the barriers stay uniform.
    for (uint base = gl_WorkGroupID.x * TEAMS; base < rows; base += gl_NumWorkGroups.x * TEAMS) {
        uint row = base + lid / TEAM;
        bool live = row < rows;
#ifdef FAULT_NO_MASK
        bool on = live;
#else
        bool on = live && mask[row] != 0u;
#endif
        uint o = row * pc.V;
        float m = uintBitsToFloat(0xff800000u);
        if (on) for (uint c = lane; c < pc.V; c += TEAM) m = max(m, x[o + c]);
        m = team_reduce(lid, m, true);
        float sum = 0.0;
        if (on) for (uint c = lane; c < pc.V; c += TEAM) sum += exp(x[o + c] - m);
        sum = team_reduce(lid, sum, false);
        if (!live) continue;
        if (!on) {
#ifndef FAULT_NO_CLEAR
            for (uint c = lane; c < pc.V; c += TEAM) dl[o + c] = 0.0;
#endif
            if (lane == 0u) token_loss[row] = 0.0;
            continue;
        }
        float inv = 1.0 / sum;
        uint target = tgt[row];
        for (uint c = lane; c < pc.V; c += TEAM) {
            float g = exp(x[o + c] - m) * inv * coef;
            dl[o + c] = c == target ? g - coef : g;
        }
        if (lane == 0u) token_loss[row] = m + log(sum) - x[o + target];
    }
}
