// The f32 GEMM kernels' stores (gemm_f32.comp, gemm_f32_big.comp): an
// invocation's 8 rows × 2 groups of 4 columns of C, acc[2·i + h] at row
// row0 + (BM/2)·(i/4) + 4·ty + i%4 and columns col0 + (BN/2)·h + 4·tx + j;
// with `accumulate` the old C is added, then the bias (pc.bias).
//
// The old values and the bias are read first, all of them, and only then is
// anything stored: C and B may be the same memory as far as the compiler
// knows, so a load placed after a store to C is not issued before it, and
// reading them store by store made 16 round trips to memory one after the
// other. The sums are the same, in the same order.
// Needs pc, b, c, c4, BM and BN.

// Where acc[2·i + h] goes: its first column gq and C's index idx of its
// first value; false where it lies wholly outside C.
bool c_place(uint i, uint h, uint row0, uint col0, uint plane, uint tx, uint ty, out uint gq, out uint idx) {
    const uint gr = row0 + (BM / 2u) * (i / 4u) + 4u * ty + i % 4u;
    gq = col0 + (BN / 2u) * h + 4u * tx;
    idx = plane + gr * pc.ldc + gq;
    return gr < pc.m && gq < pc.n;
}

void store_c(vec4 acc[16], uint row0, uint col0, uint z, uint tx, uint ty) {
    const uint plane = pc.c_off + z * pc.c_stride;
    const bool c_vec = plane % 4u == 0u && pc.ldc % 4u == 0u;
    vec4 bias[2];
    [[unroll]] for (uint h = 0; h < 2u; ++h) {
        const uint gq = col0 + (BN / 2u) * h + 4u * tx;
        bias[h] = vec4(0.0);
        if (pc.bias != 0u) {
            [[unroll]] for (uint j = 0; j < 4u; ++j) {
                if (gq + j < pc.n) bias[h][j] = b[pc.bias - 1u + gq + j];
            }
        }
    }
    vec4 old[16];
    [[unroll]] for (uint i = 0; i < 16u; ++i) old[i] = vec4(0.0);
    if (pc.accumulate != 0u) {
        [[unroll]] for (uint i = 0; i < 8u; ++i) {
            [[unroll]] for (uint h = 0; h < 2u; ++h) {
                uint gq, idx;
                if (c_place(i, h, row0, col0, plane, tx, ty, gq, idx)) {
                    if (c_vec && gq + 3u < pc.n) {
                        old[2u * i + h] = c4[idx / 4u];
                    } else {
                        [[unroll]] for (uint j = 0; j < 4u; ++j) {
                            if (gq + j < pc.n) old[2u * i + h][j] = c[idx + j];
                        }
                    }
                }
            }
        }
    }
    [[unroll]] for (uint i = 0; i < 8u; ++i) {
        [[unroll]] for (uint h = 0; h < 2u; ++h) {
            uint gq, idx;
            if (c_place(i, h, row0, col0, plane, tx, ty, gq, idx)) {
                vec4 v = acc[2u * i + h];
                if (pc.accumulate != 0u) v += old[2u * i + h];
                if (pc.bias != 0u) v += bias[h];
                if (c_vec && gq + 3u < pc.n) {
                    c4[idx / 4u] = v;
                } else {
                    [[unroll]] for (uint j = 0; j < 4u; ++j) {
                        if (gq + j < pc.n) c[idx + j] = v[j];
                    }
                }
            }
        }
    }
}
