//! The f32 kernels' bits: the documented blocked summation (with the
//! device's kind of `fma()`), vec4 and scalar loads alike, the 128×128 kernel
//! against the reference and the 128×64 one, and the choice between them.

use dualscope::rng::Rng;
use dualscope::vk::Buffer;
use dualscope::vk::gemm::{self, GemmShape};

use crate::common::{self, assert_clean, random, rel_l2};
use crate::{Product, record, record_split};

/// How the device computes `fma()`: rounding once (`Some(true)`), or as a
/// multiply and an add each rounded (`Some(false)`, which Vulkan allows), told
/// apart by a 1×1×2 product whose second step cancels the first: fused,
/// `fma(e, -e, round(e·e))` leaves `-2^-24`, the part of `e·e` that the first
/// step rounded away; unfused, 0. `None`: neither.
fn fma_is_fused(ctx: &dualscope::vk::Context) -> Option<bool> {
    let e = 1.0 + 2f32.powi(-12);
    let got = gemm::gemm_host(ctx, 1, 1, 2, &[e, e], false, &[e, -e], false).unwrap();
    match got[0].to_bits() {
        x if x == (-(2f32.powi(-24))).to_bits() => Some(true),
        0 => Some(false),
        _ => None,
    }
}

/// The tiled kernel's summation, operation for operation (gemm_f32.comp): for
/// each K range of the split, blocks of `GEMM_TILE_K` values from the range's
/// start, each summed by an FMA chain from zero (zero-padded to the block's
/// end) and added to the range's total; the ranges' totals added in order,
/// then the old C with `accumulate`. `fused`: the chain's steps round once.
fn blocked_f32(s: &GemmShape, plan: gemm::SplitK, fused: bool, a: &[f32], b: &[f32], c0: &[f32]) -> Vec<f32> {
    let GemmShape { m, n, k, ta, tb, accumulate } = *s;
    let at = |r: usize, p: usize| if ta { a[p * m + r] } else { a[r * k + p] };
    let bt = |p: usize, q: usize| if tb { b[q * k + p] } else { b[p * n + q] };
    let bk = gemm::GEMM_TILE_K;
    let mut out = vec![0f32; m * n];
    for r in 0..m {
        for q in 0..n {
            let mut total = 0f32;
            for z in 0..plan.slices {
                let (begin, end) = ((z * plan.chunk).min(k), ((z + 1) * plan.chunk).min(k));
                let mut acc = 0f32;
                for block in (begin..end).step_by(bk) {
                    let mut part = 0f32;
                    for p in block..block + bk {
                        let (x, y) = if p < end { (at(r, p), bt(p, q)) } else { (0.0, 0.0) };
                        part = if fused { x.mul_add(y, part) } else { x * y + part };
                    }
                    acc += part;
                }
                total = if z == 0 { acc } else { total + acc };
            }
            out[r * n + q] = if accumulate { total + c0[r * n + q] } else { total };
        }
    }
    out
}

/// The kernel's result is the documented blocked summation bit for bit
/// (`blocked_f32`, with the device's kind of `fma()`), split or not, for every
/// transpose, offset, accumulate and shape: the tiling, the staging and the
/// scheduling change no bit, and any two devices whose `fma()` rounds alike
/// give the same bits.
#[test]
fn the_result_is_the_blocked_summation_bit_for_bit() {
    let (test, ctx) = common::vulkan!();
    let path = gemm::GemmPath::TiledF32;
    let fused = fma_is_fused(&ctx);
    eprintln!("{}: fma() fused: {fused:?}", ctx.report().name);
    let mut rng = Rng::new(31337);
    let mut cases = Vec::new();
    let shapes = [(1, 1, 1), (5, 3, 17), (131, 70, 40), (64, 260, 8), (257, 129, 100), (9, 200, 1500), (200, 9, 777)];
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        for (j, (ta, tb)) in [(false, false), (false, true), (true, false), (true, true)].into_iter().enumerate() {
            let s = GemmShape { m, n, k, ta, tb, accumulate: (i + j) % 2 == 0 };
            cases.push(Product::new(&ctx, &mut rng, s));
        }
    }
    let need = cases.iter().map(|c| gemm::split_k_scratch_len(path, &c.s)).max().unwrap();
    assert!(need > 0, "no case is split");
    let scratch = Buffer::device_f32(&ctx, "exact.scratch", need).unwrap();
    record_split(&ctx, path, &scratch, &cases);
    for c in &cases {
        let got = c.result();
        let err = rel_l2(&got, &c.want());
        assert!(err <= dualscope::ladder::f32_tolerance(c.s.k), "{:?} offsets {:?}: rel L2 {err:e}", c.s, c.offs);
        if let Some(fused) = fused {
            let plan = gemm::split_k_plan(path, &c.s, need);
            let exact = blocked_f32(&c.s, plan, fused, &c.a, &c.b, &c.c0);
            let diff = got.iter().zip(&exact).position(|(x, y)| x.to_bits() != y.to_bits());
            assert!(diff.is_none(), "{:?} {plan:?}: element {diff:?} differs from the blocked summation", c.s);
        }
    }
    assert_clean(&ctx, test);
}

/// The kernel loads and stores four values at a time as one vec4 where the
/// matrix's offset and leading dimension are multiples of 4, else as four
/// bounds-checked scalars; aligned tiles wholly inside both matrices take its
/// fast path, with no bounds check at all (128×64 and 260×196 below). The same products (sides multiples of 4 but not of
/// the tile, K of either kind, split or not, every transpose, accumulate) with
/// every matrix at an offset that is a multiple of 4, then at one that is not:
/// the same bits either way, within rung 1's bound, the guards intact.
#[test]
fn vector_and_scalar_loads_give_the_same_bits() {
    let (test, ctx) = common::vulkan!();
    let path = gemm::GemmPath::TiledF32;
    let mut rng = Rng::new(808);
    let shapes = [(4, 4, 4), (132, 68, 20), (260, 196, 52), (128, 64, 16), (68, 132, 21), (36, 44, 1200)];
    let mut pairs = Vec::new();
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        for (j, (ta, tb)) in [(false, false), (false, true), (true, false), (true, true)].into_iter().enumerate() {
            let s = GemmShape { m, n, k, ta, tb, accumulate: (i + j) % 2 == 1 };
            let (a, b, c0) = (random(&mut rng, m * k), random(&mut rng, k * n), random(&mut rng, m * n));
            let aligned = Product::with(&ctx, s, [4, 8, 12], a.clone(), b.clone(), c0.clone());
            let unaligned = Product::with(&ctx, s, [1, 3, 5], a, b, c0);
            pairs.push((aligned, unaligned));
        }
    }
    assert!(pairs.iter().any(|(p, _)| gemm::split_k_plan(path, &p.s, usize::MAX).slices > 1), "no case is split");
    let need = pairs.iter().map(|(p, _)| gemm::split_k_scratch_len(path, &p.s)).max().unwrap();
    let scratch = Buffer::device_f32(&ctx, "vec.scratch", need).unwrap();
    record_split(&ctx, path, &scratch, pairs.iter().flat_map(|(p, q)| [p, q]));
    for (p, q) in &pairs {
        let (x, y) = (p.result(), q.result());
        let err = rel_l2(&x, &p.want());
        assert!(err <= dualscope::ladder::f32_tolerance(p.s.k), "{:?}: rel L2 {err:e}", p.s);
        let diff = x.iter().zip(&y).position(|(u, v)| u.to_bits() != v.to_bits());
        assert!(diff.is_none(), "{:?}: element {diff:?} differs between the vec4 and the scalar loads", p.s);
    }
    assert_clean(&ctx, test);
}

/// The 128×128 f32 kernel (`gemm_f32_big.comp`) on fresh random inputs:
/// shapes that divide none of its sides (one row, one column, several tiles),
/// shapes that fill whole tiles (its fast path), split and unsplit, every
/// transpose, accumulate on and off, matrices at aligned and unaligned
/// offsets. Each result is within rung 1's f32 bound of the f64 reference,
/// leaves the guards intact, and is the documented blocked summation bit for
/// bit (so, unsplit, the 128×64 kernel's bits too).
#[test]
fn the_big_f32_kernel_matches_the_reference_and_the_blocked_sum() {
    let (test, ctx) = common::vulkan!();
    let path = gemm::GemmPath::TiledF32Big;
    assert_eq!(path.tile(), (128, 128, gemm::GEMM_TILE_K));
    let fused = fma_is_fused(&ctx);
    let mut rng = Rng::new(1919);
    let mut cases = Vec::new();
    let shapes = [
        (131, 67, 45),
        (1, 129, 257),
        (257, 1, 33),
        (256, 256, 48),
        (128, 128, 16),
        (260, 132, 36),
        (9, 200, 1500),
        (140, 36, 1201),
    ];
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        for (j, (ta, tb)) in [(false, false), (false, true), (true, false), (true, true)].into_iter().enumerate() {
            for accumulate in [false, true] {
                let s = GemmShape { m, n, k, ta, tb, accumulate };
                let (a, b, c0) = (random(&mut rng, m * k), random(&mut rng, k * n), random(&mut rng, m * n));
                // Aligned offsets for half the cases (the vec4 and fast paths), odd ones for the rest.
                let offs = if (i + j) % 2 == 0 { [4, 8, 12] } else { [1, 3, 5] };
                cases.push(Product::with(&ctx, s, offs, a, b, c0));
            }
        }
    }
    let split = cases.iter().filter(|c| gemm::split_k_plan(path, &c.s, usize::MAX).slices > 1).count();
    assert!(split >= 16, "only {split} cases are split");
    let need = cases.iter().map(|c| gemm::split_k_scratch_len(path, &c.s)).max().unwrap();
    let scratch = Buffer::device_f32(&ctx, "big.scratch", need).unwrap();
    let timings = record_split(&ctx, path, &scratch, &cases);
    assert_eq!(timings.dispatches.len(), cases.len() + split);
    let mut unsplit = Vec::new();
    for c in &cases {
        let got = c.result();
        let err = rel_l2(&got, &c.want());
        let tol = dualscope::ladder::f32_tolerance(c.s.k);
        assert!(err <= tol, "{:?} offsets {:?}: rel L2 {err:e} (tolerance {tol:e})", c.s, c.offs);
        let plan = gemm::split_k_plan(path, &c.s, need);
        if let Some(fused) = fused {
            let exact = blocked_f32(&c.s, plan, fused, &c.a, &c.b, &c.c0);
            let diff = got.iter().zip(&exact).position(|(x, y)| x.to_bits() != y.to_bits());
            assert!(diff.is_none(), "{:?} {plan:?}: element {diff:?} differs from the blocked summation", c.s);
        }
        if plan.slices == 1 {
            unsplit.push((c, got));
        }
    }
    // Unsplit, the 128×64 kernel computes the same operations: the same bits.
    record(&ctx, unsplit.iter().map(|(c, _)| *c), |seq, c| {
        gemm::gemm_with(&ctx, seq, gemm::GemmPath::TiledF32, &c.s, c.at(0), c.at(1), c.at(2)).unwrap()
    });
    for (c, big) in &unsplit {
        let old = c.result();
        let diff = old.iter().zip(big).position(|(x, y)| x.to_bits() != y.to_bits());
        assert!(diff.is_none(), "{:?}: element {diff:?} differs between the 128x64 and 128x128 kernels", c.s);
    }
    assert_clean(&ctx, test);
}

/// The f32 products' kernel: the 128×128 one by default where it fits the
/// device's shared memory (lavapipe's 32 KiB does), the 128×64 one with
/// `tiled` (`DUALSCOPE_GEMM_F32` or `--gemm-path`); `DUALSCOPE_GEMM_F32`'s
/// values parse or fail with one clear line.
#[test]
fn the_f32_kernel_choice() {
    let (test, ctx) = common::vulkan!();
    use gemm::F32Kernel;
    assert_eq!(F32Kernel::parse("tiled").unwrap(), F32Kernel::Tiled);
    assert_eq!(F32Kernel::parse(" big ").unwrap(), F32Kernel::Big);
    let err = F32Kernel::parse("huge").unwrap_err().to_string();
    assert!(err.contains("DUALSCOPE_GEMM_F32") && err.contains("huge"), "{err}");
    assert_eq!(F32Kernel::Tiled.path(&ctx).unwrap(), gemm::GemmPath::TiledF32);
    let fits = gemm::GemmPath::TiledF32Big.shared_bytes() <= ctx.report().max_shared_memory;
    let auto = if fits { gemm::GemmPath::TiledF32Big } else { gemm::GemmPath::TiledF32 };
    assert_eq!(F32Kernel::Auto.path(&ctx).unwrap(), auto);
    assert_eq!(F32Kernel::Big.path(&ctx).is_ok(), fits);
    if std::env::var_os("DUALSCOPE_GEMM_F32").is_none() {
        let path = gemm::path_for(&ctx, dualscope::step::Precision::F32, dualscope::step::GemmChoice::Auto).unwrap();
        assert_eq!(path, auto);
        // `tiled` is the 128×64 kernel (what earlier builds' captures name).
        let path = gemm::path_for(&ctx, dualscope::step::Precision::F32, dualscope::step::GemmChoice::Tiled).unwrap();
        assert_eq!(path, gemm::GemmPath::TiledF32);
    }
    assert_clean(&ctx, test);
}
