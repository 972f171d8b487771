//! The f16 kernels (tiled, and cooperative-matrix where the device has them):
//! their inputs rounded as a conversion to f16 rounds, and their products
//! against the f64 product of the f16-rounded inputs.

use dualscope::rng::Rng;
use dualscope::vk::gemm::{self, GemmShape, MatRef};
use dualscope::vk::{Buffer, Sequence};

use crate::common::{self, assert_clean, reference, rel_l2};
use crate::{Product, record_split};

/// The f16 value of `x` (round to nearest even; f16's range: Inf past 65504,
/// subnormals below 2^-14), as an f32.
fn f16(x: f32) -> f32 {
    ::gemm::f16::from_f32(x).to_f32()
}

/// The f16 kernels this device can run: the tiled one always, the
/// cooperative-matrix ones where the device has them.
fn f16_paths(ctx: &dualscope::vk::Context) -> Vec<gemm::GemmPath> {
    let mut paths = vec![gemm::GemmPath::TiledF16];
    for p in [gemm::GemmPath::CoopMatF16Big, gemm::GemmPath::CoopMatF16] {
        match gemm::coopmat_unavailable(ctx, p) {
            None => paths.push(p),
            Some(why) => eprintln!("SKIPPED {}: {why}", p.name()),
        }
    }
    paths
}

/// f16's smallest normal value, 2^-14.
const F16_MIN_NORMAL: f32 = 1.0 / 16384.0;

/// The f16 value of `x` rounded toward zero (65504 at most), subnormals kept.
fn f16_rtz(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let a = x.abs();
    let r = if a < F16_MIN_NORMAL {
        (a * 16777216.0).trunc() / 16777216.0
    } else {
        f32::from_bits(a.to_bits() & 0xffff_e000).min(65504.0)
    };
    r.copysign(x)
}

/// The tiled f16 kernel converts each input exactly as a conversion to f16
/// does (round to nearest, ties to even), range included: 65504 stays, 65520
/// and up become Inf, values below 2^-14 land on the subnormal grid of 2^-24.
/// On cooperative matrices the conversion is the driver's `float16_t(v)`,
/// whose rounding Vulkan leaves to the implementation (to nearest or toward
/// zero; f16 subnormals may be flushed): the test accepts those, and prints
/// which one the device used. (A k = 1 product with B = 1: C is the converted
/// A, bit for bit.)
#[test]
fn the_f16_kernels_round_their_inputs_as_f16_does() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let a: Vec<f32> = vec![
        1.0,
        1.0 + 1.0 / 2048.0,
        1.0 + 3.0 / 2048.0,
        -3.25391,
        65504.0,
        65519.0,
        65520.0,
        -70000.0,
        1e9,
        F16_MIN_NORMAL,
        6.0e-5,
        3.0e-8,
        2.9e-8,
        1.0e-9,
        -4.5e-7,
        0.0,
        f32::INFINITY,
        123.456,
    ];
    for path in f16_paths(&ctx) {
        let s = GemmShape { m: a.len(), n: 1, k: 1, ta: false, tb: false, accumulate: false };
        let dev = |name, x: &[f32]| Buffer::upload_f32(&ctx, name, x).unwrap();
        let (ab, bb) = (dev("a", &a), dev("b", &[1.0]));
        let cb = Buffer::device_f32(&ctx, "c", a.len()).unwrap();
        let back = Buffer::readback_f32(&ctx, "c.back", a.len()).unwrap();
        {
            let mut seq = Sequence::new(&ctx).unwrap();
            gemm::gemm_with(&ctx, &mut seq, path, &s, MatRef::whole(&ab), MatRef::whole(&bb), MatRef::whole(&cb))
                .unwrap();
            seq.copy(&cb, 0, &back, 0, cb.bytes()).unwrap();
            seq.submit().unwrap();
        }
        let got = back.read_f32().unwrap();
        let (mut rte, mut rtz, mut flushed) = (0, 0, 0);
        for (&x, &y) in a.iter().zip(&got) {
            let subnormal = f16(x) != 0.0 && f16(x).abs() < F16_MIN_NORMAL;
            if y.to_bits() == f16(x).to_bits() {
                rte += (f16(x) != f16_rtz(x)) as usize;
            } else if path.coopmat() && y.to_bits() == f16_rtz(x).to_bits() {
                rtz += 1;
            } else if path.coopmat() && subnormal && y == 0.0 {
                flushed += 1;
            } else {
                panic!("{}: f16({x:e}) = {:e}, the kernel gave {y:e}", path.name(), f16(x));
            }
        }
        eprintln!("{}: {rte} values rounded to nearest, {rtz} toward zero, {flushed} subnormals flushed", path.name());
        if !path.coopmat() {
            assert!(rte > 0 && rtz == 0 && flushed == 0);
        }
    }
    assert_clean(&ctx, test);
}

/// The f16 kernels on shapes that divide none of their tiles (64×64 tiled,
/// 128×128 and 64×64 cooperative-matrix), every transpose, offsets,
/// accumulate, and long-K products split along K: against the f64 product of
/// the f16-rounded inputs, the only difference left is the f32 accumulation,
/// so rung 1's f32 bound applies (4× on cooperative matrices, whose
/// accumulation order and rounding the hardware chooses). A wrong tile, index
/// or transpose gives errors of order 1; the guards around C stay intact.
#[test]
fn the_f16_kernels_match_the_f16_rounded_product() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let mut rng = Rng::new(1616);
    for path in f16_paths(&ctx) {
        let mut cases = Vec::new();
        for (i, &(m, n, k)) in
            [(1, 1, 1), (33, 7, 257), (129, 130, 33), (200, 65, 48), (37, 70, 1500), (5, 300, 613)].iter().enumerate()
        {
            for (j, (ta, tb)) in [(false, false), (false, true), (true, false), (true, true)].into_iter().enumerate() {
                let s = GemmShape { m, n, k, ta, tb, accumulate: (i + j) % 2 == 1 };
                cases.push(Product::new(&ctx, &mut rng, s));
            }
        }
        let split = cases.iter().filter(|c| gemm::split_k_plan(path, &c.s, usize::MAX).slices > 1).count();
        assert!(path == gemm::GemmPath::CoopMatF16 || split >= 8, "{}: {split} split products", path.name());
        let need = cases.iter().map(|c| gemm::split_k_scratch_len(path, &c.s)).max().unwrap().max(1);
        let scratch = Buffer::device_f32(&ctx, "splitk.scratch", need).unwrap();
        record_split(&ctx, path, &scratch, &cases);
        for c in &cases {
            let GemmShape { m, n, k, ta, tb, accumulate } = c.s;
            let r = |x: &[f32]| x.iter().map(|&v| f16(v)).collect::<Vec<f32>>();
            let mut want = reference(m, n, k, &r(&c.a), ta, &r(&c.b), tb);
            if accumulate {
                want.iter_mut().zip(&c.c0).for_each(|(w, &x)| *w += x as f64);
            }
            let err = rel_l2(&c.result(), &want);
            let tol = dualscope::ladder::f32_tolerance(k) * if path.coopmat() { 4.0 } else { 1.0 };
            assert!(err <= tol, "{} {:?} offsets {:?}: rel L2 {err:e} (tolerance {tol:e})", path.name(), c.s, c.offs);
        }
        eprintln!("{}: {} products, {split} split along K", path.name(), cases.len());
    }
    assert_clean(&ctx, test);
}
