//! The tiled f32 kernel on shapes of several tiles, and split-K: against the
//! reference, deterministic, within the scratch it is given, and disjoint
//! products in one buffer recorded with no barrier between them.

use dualscope::rng::Rng;
use dualscope::vk::gemm::{self, GemmShape, MatRef};
use dualscope::vk::{Buffer, Sequence};

use crate::common::{self, assert_clean, random, reference, rel_l2};
use crate::{Product, SENTINEL, record, record_split};

/// The tiled kernel on shapes of several 128×64 tiles that divide none of the
/// tile's sides (and a few that do), every transpose, offsets, accumulate.
/// K stays below the split-K threshold: one dispatch per product.
#[test]
fn big_tile_shapes_that_do_not_divide_the_tile() {
    let (test, ctx) = common::vulkan!();
    let mut rng = Rng::new(77);
    let mut cases = Vec::new();
    for &(m, n, k) in &[(300, 200, 100), (129, 65, 17), (257, 130, 48), (128, 64, 16), (127, 63, 15), (256, 192, 33)] {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            let accumulate = rng.below(2) == 1;
            let s = GemmShape { m, n, k, ta, tb, accumulate };
            assert_eq!(gemm::split_k_plan(gemm::GemmPath::TiledF32, &s, usize::MAX).slices, 1);
            cases.push(Product::new(&ctx, &mut rng, s));
        }
    }
    let timings = record(&ctx, &cases, |seq, c| gemm::gemm(&ctx, seq, &c.s, c.at(0), c.at(1), c.at(2)).unwrap());
    assert_eq!(timings.dispatches.len(), cases.len());
    for c in &cases {
        let err = rel_l2(&c.result(), &c.want());
        eprintln!("{:?}: rel L2 {err:.2e}", c.s);
        // The f32 bound of rung 1 (ladder::f32_tolerance): 1e-5 for K ≤ 4096.
        assert!(err <= dualscope::ladder::f32_tolerance(c.s.k), "{:?} offsets {:?}: rel L2 {err:e}", c.s, c.offs);
    }
    assert_clean(&ctx, test);
}

/// Split-K on products with few output tiles and long K (none a multiple of
/// the tile or of the K-slice; the last slice shorter), every transpose,
/// offsets, accumulate: within rung 1's f32 bound, which grows with K as the
/// rounding error of a K-term sum does (`ladder::f32_tolerance`); the guards
/// around C intact; and bit for bit the same result on a second run.
#[test]
fn split_k_matches_the_reference_and_is_deterministic() {
    let (test, ctx) = common::vulkan!();
    let path = gemm::GemmPath::TiledF32;
    let mut rng = Rng::new(4242);
    let mut cases = Vec::new();
    for (i, &(m, n, k)) in
        [(37, 70, 1500), (130, 65, 777), (1, 1, 2000), (200, 3, 4100), (5, 300, 513)].iter().enumerate()
    {
        for (j, (ta, tb)) in [(false, false), (false, true), (true, false), (true, true)].into_iter().enumerate() {
            let s = GemmShape { m, n, k, ta, tb, accumulate: (i + j) % 2 == 1 };
            let plan = gemm::split_k_plan(path, &s, usize::MAX);
            assert!(plan.slices >= 2, "{s:?} is not split: {plan:?}");
            assert!(plan.chunk.is_multiple_of(gemm::GEMM_TILE_K) && (plan.slices - 1) * plan.chunk < k);
            cases.push(Product::new(&ctx, &mut rng, s));
        }
    }
    // Scratch with room to spare: the plan, not the buffer, sets the split.
    let need = cases.iter().map(|c| gemm::split_k_scratch_len(path, &c.s)).max().unwrap();
    let scratch = Buffer::device_f32(&ctx, "splitk.scratch", need + 1000).unwrap();
    let run = || {
        let timings = record_split(&ctx, path, &scratch, &cases);
        // Two dispatches per product: the slices' partial products, then the reduction.
        assert_eq!(timings.dispatches.len(), 2 * cases.len());
        for (c, pair) in cases.iter().zip(timings.dispatches.chunks(2)) {
            let plan = gemm::split_k_plan(path, &c.s, usize::MAX);
            assert!(pair[0].label.starts_with(&format!("gemm {}x{}x{}", c.s.m, c.s.n, c.s.k)), "{pair:?}");
            assert!(pair[1].label.ends_with(&format!("splitk-reduce {}", plan.slices)), "{pair:?}");
        }
        cases.iter().map(|c| c.result()).collect::<Vec<_>>()
    };
    let first = run();
    for (c, got) in cases.iter().zip(&first) {
        let err = rel_l2(got, &c.want());
        let tol = dualscope::ladder::f32_tolerance(c.s.k);
        eprintln!("{:?}: rel L2 {err:.2e} (tolerance {tol:.1e})", c.s);
        assert!(err <= tol, "{:?} offsets {:?}: rel L2 {err:e} (tolerance {tol:e})", c.s, c.offs);
    }
    let second = run();
    for ((c, x), y) in cases.iter().zip(&first).zip(&second) {
        let same = x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same, "{:?}: two runs of the split product differ", c.s);
    }
    assert_clean(&ctx, test);
}

/// A scratch smaller than the plan wants caps the slices (the product is
/// still right); with no room for two slices the product is not split.
#[test]
fn split_k_fits_the_scratch_it_is_given() {
    let (test, ctx) = common::vulkan!();
    let path = gemm::GemmPath::TiledF32;
    let mut rng = Rng::new(9);
    let s = GemmShape { m: 20, n: 30, k: 3000, ta: true, tb: false, accumulate: true };
    assert!(gemm::split_k_plan(path, &s, usize::MAX).slices > 3);
    for (room, slices) in [(3 * 600 + 599, 3), (2 * 600, 2), (600, 1)] {
        assert_eq!(gemm::split_k_plan(path, &s, room).slices, slices);
        let c = Product::new(&ctx, &mut rng, s);
        let scratch = Buffer::device_f32(&ctx, "splitk.scratch", room).unwrap();
        let timings = record_split(&ctx, path, &scratch, [&c]);
        assert_eq!(timings.dispatches.len(), if slices > 1 { 2 } else { 1 });
        let err = rel_l2(&c.result(), &c.want());
        assert!(err <= dualscope::ladder::f32_tolerance(s.k), "{slices} slices: rel L2 {err:e}");
    }
    assert_clean(&ctx, test);
}

/// Products that write disjoint parts of one buffer, as the weight gradients
/// write theirs in the gradients' buffer, each split over its own region of
/// one scratch buffer (offsets not on a 16-byte line): recorded back to back
/// with no barrier between them, each as right as alone, the values around
/// them untouched, and synchronization validation (on in tests) silent.
/// A product that reads one of them afterwards waits for it (a barrier).
#[test]
fn disjoint_products_in_one_buffer_need_no_barrier() {
    let (test, ctx) = common::vulkan!();
    let path = gemm::GemmPath::TiledF32;
    let mut rng = Rng::new(4242);
    let shapes = [(37, 70, 1500, true), (64, 33, 1300, false), (29, 100, 900, true)];
    // Each C at an odd offset, with a gap of sentinels before the next.
    let mut offs = Vec::new();
    let mut at = 3;
    for &(m, n, _, _) in &shapes {
        offs.push(at);
        at += m * n + 5;
    }
    let mut c_all = vec![SENTINEL; at];
    let products: Vec<_> = shapes
        .iter()
        .zip(&offs)
        .map(|(&(m, n, k, ta), &off)| {
            let s = GemmShape { m, n, k, ta, tb: false, accumulate: false };
            let plan = gemm::split_k_plan(path, &s, usize::MAX);
            assert!(plan.slices > 1, "{s:?} is split");
            let (a, b) = (random(&mut rng, m * k), random(&mut rng, k * n));
            (s, off, plan.slices * m * n, a, b)
        })
        .collect();
    let region = products.iter().map(|p| p.2).max().unwrap() + 21;
    let inputs: Vec<(Buffer, Buffer)> = products
        .iter()
        .map(|(_, _, _, a, b)| (Buffer::upload_f32(&ctx, "a", a).unwrap(), Buffer::upload_f32(&ctx, "b", b).unwrap()))
        .collect();
    let c_init = Buffer::upload_f32(&ctx, "c.init", &c_all).unwrap();
    let c = Buffer::device_f32(&ctx, "c", at).unwrap();
    let back = Buffer::readback_f32(&ctx, "c.back", at).unwrap();
    let scratch = Buffer::device_f32(&ctx, "scratch", 5 + region * products.len()).unwrap();
    let mut seq = Sequence::new(&ctx).unwrap();
    seq.copy(&c_init, 0, &c, 0, c.bytes()).unwrap();
    let mut later = Vec::new();
    for (i, ((s, off, _, _, _), (a, b))) in products.iter().zip(&inputs).enumerate() {
        let sm = MatRef { buf: &scratch, offset: 5 + i * region };
        let cm = MatRef { buf: &c, offset: *off };
        let (a, b) = (MatRef::whole(a), MatRef::whole(b));
        later.extend(gemm::gemm_split_later(&ctx, &mut seq, path, s, a, b, cm, Some(sm)).unwrap());
    }
    // The partial products: no barrier before or between them.
    assert_eq!((seq.barrier_count(), later.len()), (0, 3));
    // Their sums: one barrier before the first (its partials, and the copy
    // into C), none between them.
    for sum in later {
        sum(&mut seq).unwrap();
    }
    assert_eq!(seq.barrier_count(), 1, "barriers before the sums");
    // A product reading the first one's C waits for it.
    let (s0, off0) = (products[0].0, products[0].1);
    let out = Buffer::device_f32(&ctx, "out", s0.m * s0.m).unwrap();
    let before = seq.barrier_count();
    let rd = GemmShape { m: s0.m, n: s0.m, k: s0.n, ta: false, tb: true, accumulate: false };
    let cm = MatRef { buf: &c, offset: off0 };
    gemm::gemm_split(&ctx, &mut seq, path, &rd, cm, cm, MatRef::whole(&out), None).unwrap();
    assert_eq!(seq.barrier_count() - before, 1, "a read of a product's output waits for it");
    seq.copy(&c, 0, &back, 0, c.bytes()).unwrap();
    seq.submit().unwrap();
    let got = back.read_f32().unwrap();
    for (s, off, _, a, b) in &products {
        let want = reference(s.m, s.n, s.k, a, s.ta, b, s.tb);
        let err = rel_l2(&got[*off..off + s.m * s.n], &want);
        assert!(err <= dualscope::ladder::f32_tolerance(s.k), "{s:?}: rel L2 {err:e}");
        c_all[*off..off + s.m * s.n].fill(0.0);
    }
    let untouched = c_all.iter().zip(&got).filter(|(w, _)| w.to_bits() == SENTINEL.to_bits());
    assert!(untouched.clone().count() > 0 && untouched.into_iter().all(|(_, g)| g.to_bits() == SENTINEL.to_bits()));
    assert_clean(&ctx, test);
}
