//! A bias added by the product's kernel (`gemm::gemm_bias`)
//! against the product followed by the bias: the same bits, on every kernel
//! this device runs, at shapes that divide no tile; and a whole step with the
//! biases in the products against one with their own passes.

mod common;

use common::{assert_clean, odd, random, random_batch, reference, rel_l2};
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;
use dualscope::step::{LossScale, StepOptions};
use dualscope::vk::engine::{Engine, EngineEnv};
use dualscope::vk::gemm::{self, GemmPath, GemmShape, MatRef};
use dualscope::vk::{Buffer, Sequence};

const SENTINEL: f32 = -7.25e30;

/// Every kernel this device can run a product on.
fn paths(ctx: &dualscope::vk::Context) -> Vec<GemmPath> {
    let mut paths = vec![GemmPath::TiledF32, GemmPath::TiledF32Big, GemmPath::TiledF16In, GemmPath::TiledBf16In];
    paths.push(GemmPath::TiledF16);
    for p in [GemmPath::CoopMatF16Big, GemmPath::CoopMatF16] {
        match gemm::coopmat_unavailable(ctx, p) {
            None => paths.push(p),
            Some(why) => eprintln!("SKIPPED {}: {why}", p.name()),
        }
    }
    paths
}

/// One case: B followed (after `gap` values) by the bias, in one buffer.
struct Case {
    s: GemmShape,
    a: Buffer,
    b: Buffer,
    c0: Vec<f32>,
    bias: Vec<f32>,
    offs: [usize; 3],
    bias_at: usize,
    fused: Buffer,
    plain: Buffer,
}

#[test]
fn the_bias_in_the_product_is_the_product_then_the_bias_bit_for_bit() {
    let (test, ctx) = common::vulkan!();
    let mut rng = Rng::new(54);
    let shapes = [(131, 67, 45), (1, 129, 33), (257, 130, 48), (9, 200, 300), (64, 64, 32), (17, 3, 5)];
    for path in paths(&ctx) {
        let mut cases = Vec::new();
        for (i, &(m, n, k)) in shapes.iter().enumerate() {
            for (ta, tb) in [(false, true), (true, false), (false, false), (true, true)] {
                let accumulate = rng.below(2) == 1;
                let s = GemmShape { m, n, k, ta, tb, accumulate };
                // Aligned offsets for half the cases (the vector stores), odd ones for the rest.
                let offs = if i % 2 == 0 { [4, 8, 12] } else { [1, 3, 5] };
                let gap = [0, 1, 7][i % 3];
                let (a, b, c0, bias) =
                    (random(&mut rng, m * k), random(&mut rng, k * n), random(&mut rng, m * n), random(&mut rng, n));
                let mut bb = vec![SENTINEL; offs[1]];
                bb.extend(&b);
                bb.extend(std::iter::repeat_n(SENTINEL, gap));
                let bias_at = bb.len();
                bb.extend(&bias);
                // The bias ends the buffer on every other case: B's binding reaches its last byte.
                bb.extend(std::iter::repeat_n(SENTINEL, if i % 2 == 0 { 0 } else { 5 }));
                let mut aa = vec![SENTINEL; offs[0]];
                aa.extend(&a);
                let mut cc = vec![SENTINEL; offs[2]];
                cc.extend(&c0);
                cc.extend([SENTINEL; 9]);
                cases.push(Case {
                    s,
                    a: Buffer::upload_f32(&ctx, "a", &aa).unwrap(),
                    b: Buffer::upload_f32(&ctx, "b", &bb).unwrap(),
                    c0,
                    bias,
                    offs,
                    bias_at,
                    fused: Buffer::upload_f32(&ctx, "c.fused", &cc).unwrap(),
                    plain: Buffer::upload_f32(&ctx, "c.plain", &cc).unwrap(),
                });
            }
        }
        let mut seq = Sequence::new(&ctx).unwrap();
        for c in &cases {
            let at = |buf, offset| MatRef { buf, offset };
            let (a, b) = (at(&c.a, c.offs[0]), at(&c.b, c.offs[1]));
            gemm::gemm_bias(&ctx, &mut seq, path, &c.s, a, b, c.bias_at, at(&c.fused, c.offs[2])).unwrap();
            gemm::gemm_split(&ctx, &mut seq, path, &c.s, a, b, at(&c.plain, c.offs[2]), None).unwrap();
        }
        seq.submit().unwrap();
        for c in &cases {
            let GemmShape { m, n, k, ta, tb, accumulate } = c.s;
            let (fused, plain) = (c.fused.read_f32().unwrap(), c.plain.read_f32().unwrap());
            let off = c.offs[2];
            for (i, (f, p)) in fused.iter().zip(&plain).enumerate() {
                let want = if (off..off + m * n).contains(&i) { p + c.bias[(i - off) % n] } else { SENTINEL };
                assert_eq!(f.to_bits(), want.to_bits(), "{} {:?}: value {i}: {f} against {want}", path.name(), c.s);
            }
            // And the sum is the product plus the bias (f32 kernels: rung 1's bound).
            if matches!(path, GemmPath::TiledF32 | GemmPath::TiledF32Big) {
                let a = c.a.read_f32().unwrap()[c.offs[0]..].to_vec();
                let b = c.b.read_f32().unwrap()[c.offs[1]..c.offs[1] + k * n].to_vec();
                let mut want = reference(m, n, k, &a, ta, &b, tb);
                for (j, w) in want.iter_mut().enumerate() {
                    *w += c.bias[j % n] as f64 + if accumulate { c.c0[j] as f64 } else { 0.0 };
                }
                let err = rel_l2(&fused[off..off + m * n], &want);
                assert!(err <= dualscope::ladder::f32_tolerance(k), "{:?}: rel L2 {err:e}", c.s);
            }
        }
    }
    assert_clean(&ctx, test);
}

#[test]
fn a_bias_before_b_is_refused() {
    let (test, ctx) = common::vulkan!();
    let buf = Buffer::upload_f32(&ctx, "b", &[1.0; 64]).unwrap();
    let c = Buffer::upload_f32(&ctx, "c", &[0.0; 16]).unwrap();
    let s = GemmShape { m: 2, n: 4, k: 4, ta: false, tb: false, accumulate: false };
    let mut seq = Sequence::new(&ctx).unwrap();
    let (a, b, c) = (MatRef { buf: &buf, offset: 0 }, MatRef { buf: &buf, offset: 20 }, MatRef::whole(&c));
    let err = gemm::gemm_bias(&ctx, &mut seq, GemmPath::TiledF32, &s, a, b, 4, c).unwrap_err().to_string();
    assert!(err.contains("bias"), "{err}");
    // A bias past the buffer's end is refused as any operand would be.
    let err = gemm::gemm_bias(&ctx, &mut seq, GemmPath::TiledF32, &s, a, b, 62, c).unwrap_err().to_string();
    assert!(err.contains("B needs"), "{err}");
    assert_clean(&ctx, test);
}

/// The step with the GRU's input biases and the head's bias in the products
/// gives the same loss, trace tensors and gradients, bit for bit, as with
/// their passes (`DUALSCOPE_BIAS_PASS=1`), on the f32, f16 and 128×128 kernels.
#[test]
fn a_step_with_the_biases_in_the_products_is_the_step_with_their_passes() {
    let (test, ctx) = common::vulkan!();
    let batch = random_batch(54, &[12, 5, 9]);
    let names = ["gru.l0.gi", "gru.l1.gi", "head.logits", "gru.l1.h"];
    for (cfg, path) in
        [(odd(), GemmPath::TiledF32), (odd(), GemmPath::TiledF16), (Config::tiny(), GemmPath::TiledF32Big)]
    {
        let params = Params::<f32>::init(&cfg, 9);
        let run = |bias_pass: bool| {
            let env = EngineEnv { bias_pass, ..EngineEnv::default() };
            let (opts, scale) = (StepOptions::default(), LossScale::fixed());
            let mut e = Engine::with_env(&ctx, &cfg, &params, &opts, &scale, path, &env).unwrap();
            let g = e.grads(&batch).unwrap();
            let flat: Vec<u32> = g.grads.tensors().iter().flat_map(|t| t.data.iter().map(|x| x.to_bits())).collect();
            let trace: Vec<Vec<u32>> =
                e.read_named(&names).unwrap().iter().map(|v| v.iter().map(|x| x.to_bits()).collect()).collect();
            (g.loss.to_bits(), flat, trace)
        };
        let (fused, pass) = (run(false), run(true));
        assert_eq!(fused.0, pass.0, "{}: loss", path.name());
        for (i, name) in names.iter().enumerate() {
            assert!(fused.2[i] == pass.2[i], "{}: {name} differs", path.name());
        }
        assert!(fused.1 == pass.1, "{}: gradients differ", path.name());
        assert!(pass.2[0].iter().any(|&x| x != 0), "gi was computed");
    }
    assert_clean(&ctx, test);
}
