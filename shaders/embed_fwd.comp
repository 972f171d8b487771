#version 450
// Embedding gather: out[row, i] = E[tok[row], i] for rows = T·B (time-major).
// E lies at element off0 of the parameter buffer, [V, D]. n = rows·D.
// A token outside the vocabulary gives NaN (the host never sends one).
// STAGE_F16 / STAGE_BF16: the rows rounded to f16 (bfloat16), as a table
// kept in that precision would give them (a precision map's `embed=f16`).
#include "model.glsl"
#include "stage_round.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 1) readonly buffer Par { float p[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

void main() {
    FOR_EACH(i, pc.n) {
        uint row = i / pc.D;
        uint c = i - row * pc.D;
        uint x = tok[row];
        o[i] = x < pc.V ? RND(p[pc.off0 + x * pc.D + c]) : QNAN;
    }
}
