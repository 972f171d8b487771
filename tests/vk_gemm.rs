//! The GEMM kernel against the CPU reference on the Vulkan device (lavapipe in CI).

mod common;

use common::{assert_clean, random, reference, rel_l2};
use dualscope::rng::Rng;
use dualscope::vk::gemm::{self, GemmShape, MatRef};
use dualscope::vk::{Buffer, Sequence, Timings};

#[test]
fn gemm_odd_shapes_all_transposes() {
    let (_, ctx) = common::vulkan!();
    let mut rng = Rng::new(11);
    for &(m, n, k) in
        &[(1, 1, 1), (7, 33, 5), (33, 7, 257), (65, 17, 3), (1, 100, 64), (130, 1, 17), (0, 3, 4), (3, 4, 0)]
    {
        for ta in [false, true] {
            for tb in [false, true] {
                let a = random(&mut rng, m * k);
                let b = random(&mut rng, k * n);
                let got = gemm::gemm_host(&ctx, m, n, k, &a, ta, &b, tb).unwrap();
                let want = reference(m, n, k, &a, ta, &b, tb);
                assert_eq!(got.len(), m * n);
                let err = rel_l2(&got, &want);
                assert!(err <= 1e-5, "m={m} n={n} k={k} ta={ta} tb={tb}: rel L2 {err:e}");
            }
        }
    }
    assert_clean(&ctx, "gemm_odd_shapes_all_transposes");
}

const GUARD: usize = 37;
const SENTINEL: f32 = -7.25e30;

/// Two dependent products in one sequence (E = (A·B)·F, E accumulated into a
/// random C), outputs inside buffers padded with sentinels on both sides.
#[test]
fn chained_accumulate_with_sentinels() {
    let (_, ctx) = common::vulkan!();
    let mut rng = Rng::new(5);
    let (m, k1, k2, n) = (70, 33, 65, 9);
    let a = random(&mut rng, m * k1);
    let b = random(&mut rng, k1 * k2);
    let f = random(&mut rng, n * k2); // stored [n, k2]: used transposed
    let c0 = random(&mut rng, m * n);
    let mut c_init = vec![SENTINEL; GUARD + m * n + GUARD];
    c_init[GUARD..GUARD + m * n].copy_from_slice(&c0);
    let mut d_init = vec![SENTINEL; GUARD + m * k2 + GUARD];
    d_init[GUARD..GUARD + m * k2].fill(f32::NAN); // overwritten: accumulate is off

    let up = |name: &str, x: &[f32]| Buffer::upload_f32(&ctx, name, x).unwrap();
    let (a_up, b_up, f_up, c_up, d_up) = (up("a", &a), up("b", &b), up("f", &f), up("c", &c_init), up("d", &d_init));
    let dev = |name: &str, n: usize| Buffer::device_f32(&ctx, name, n).unwrap();
    let (a_d, b_d, f_d, c_d, d_d) =
        (dev("a", a.len()), dev("b", b.len()), dev("f", f.len()), dev("c", c_init.len()), dev("d", d_init.len()));
    let c_back = Buffer::readback_f32(&ctx, "c.back", c_init.len()).unwrap();
    let d_back = Buffer::readback_f32(&ctx, "d.back", d_init.len()).unwrap();
    let timings = {
        let mut seq = Sequence::new(&ctx).unwrap();
        for (u, d) in [(&a_up, &a_d), (&b_up, &b_d), (&f_up, &f_d), (&c_up, &c_d), (&d_up, &d_d)] {
            seq.copy(u, 0, d, 0, d.bytes()).unwrap();
        }
        let s1 = GemmShape { m, n: k2, k: k1, ta: false, tb: false, accumulate: false };
        let s2 = GemmShape { m, n, k: k2, ta: false, tb: true, accumulate: true };
        let at = |buf, offset| MatRef { buf, offset };
        gemm::gemm(&ctx, &mut seq, &s1, at(&a_d, 0), at(&b_d, 0), at(&d_d, GUARD)).unwrap();
        gemm::gemm(&ctx, &mut seq, &s2, at(&d_d, GUARD), at(&f_d, 0), at(&c_d, GUARD)).unwrap();
        seq.copy(&c_d, 0, &c_back, 0, c_d.bytes()).unwrap();
        seq.copy(&d_d, 0, &d_back, 0, d_d.bytes()).unwrap();
        seq.submit().unwrap()
    };
    let c_got = c_back.read_f32().unwrap();
    let d_got = d_back.read_f32().unwrap();
    for (name, got, len) in [("c", &c_got, m * n), ("d", &d_got, m * k2)] {
        for i in (0..GUARD).chain(GUARD + len..2 * GUARD + len) {
            assert_eq!(got[i].to_bits(), SENTINEL.to_bits(), "{name}: guard element {i} was overwritten");
        }
    }
    let d_want = reference(m, k2, k1, &a, false, &b, false);
    assert!(rel_l2(&d_got[GUARD..GUARD + m * k2], &d_want) <= 1e-5);
    let d_f32: Vec<f32> = d_got[GUARD..GUARD + m * k2].to_vec();
    let mut c_want = reference(m, n, k2, &d_f32, false, &f, true);
    c_want.iter_mut().zip(&c0).for_each(|(w, &c)| *w += c as f64);
    let err = rel_l2(&c_got[GUARD..GUARD + m * n], &c_want);
    assert!(err <= 1e-5, "accumulated product: rel L2 {err:e}");
    assert_eq!(timings.dispatches.len(), 2);
    if ctx.report().timestamps {
        assert!(timings.dispatches.iter().all(|d| d.ns.is_some_and(|ns| ns > 0.0)), "{timings:?}");
    }
    assert_clean(&ctx, "chained_accumulate_with_sentinels");
}

#[test]
fn work_past_the_group_count_limit_is_a_clear_error() {
    let (_, ctx) = common::vulkan!();
    let limit = ctx.limits().max_workgroup_count[1] as usize;
    let e = dualscope::vk::group_counts(&gemm::GEMM_F32, ctx.limits(), [1, u64::MAX, 1]).unwrap_err();
    assert!(e.to_string().contains("maxComputeWorkGroupCount"), "{e}");
    // A real product one tile row past the limit (when that fits in memory).
    let m = (limit + 1) * gemm::GEMM_TILE_M;
    if m * 4 <= ctx.limits().max_storage_buffer_range as usize && m <= 1 << 24 {
        let a = Buffer::device_f32(&ctx, "tall.a", m).unwrap();
        let b = Buffer::device_f32(&ctx, "tall.b", 1).unwrap();
        let c = Buffer::device_f32(&ctx, "tall.c", m).unwrap();
        let mut seq = Sequence::new(&ctx).unwrap();
        let s = GemmShape { m, n: 1, k: 1, ta: false, tb: false, accumulate: false };
        let e = gemm::gemm(&ctx, &mut seq, &s, MatRef::whole(&a), MatRef::whole(&b), MatRef::whole(&c)).unwrap_err();
        assert!(matches!(e, dualscope::vk::VkError::Limit(_)), "{e}");
        assert!(e.to_string().contains("gemm_f32") && e.to_string().contains("65"), "{e}");
    }
    // A matrix that does not fit its buffer is refused before recording.
    let small = Buffer::device_f32(&ctx, "small", 10).unwrap();
    let mut seq = Sequence::new(&ctx).unwrap();
    let s = GemmShape { m: 4, n: 4, k: 4, ta: false, tb: false, accumulate: false };
    let w = MatRef::whole(&small);
    let e = gemm::gemm(&ctx, &mut seq, &s, w, w, w).unwrap_err();
    assert!(e.to_string().contains("needs 16 values"), "{e}");
    drop(seq);
    assert_clean(&ctx, "work_past_the_group_count_limit_is_a_clear_error");
}

/// 300 dependent products in one sequence (they reuse one cached descriptor
/// set), then 70 products into 70 different buffers (more than one
/// descriptor-pool chunk of 64 sets). Each adds 1, so a missing barrier or a
/// lost dispatch changes the count; every dispatch is timed (capacity 32768).
#[test]
fn many_dependent_dispatches_in_one_sequence() {
    let (_, ctx) = common::vulkan!();
    let steps = 300;
    // c (1×1) += a·b with a = b = [1]: c counts the dispatches that ran in order.
    let one = Buffer::upload_f32(&ctx, "one", &[1.0]).unwrap();
    let c = Buffer::upload_f32(&ctx, "c", &[0.0]).unwrap();
    let c_dev = Buffer::device_f32(&ctx, "c.dev", 1).unwrap();
    let back = Buffer::readback_f32(&ctx, "c.back", 1).unwrap();
    let timings = {
        let mut seq = Sequence::new(&ctx).unwrap();
        seq.copy(&c, 0, &c_dev, 0, 4).unwrap();
        let s = GemmShape { m: 1, n: 1, k: 1, ta: false, tb: false, accumulate: true };
        for _ in 0..steps {
            gemm::gemm(&ctx, &mut seq, &s, MatRef::whole(&one), MatRef::whole(&one), MatRef::whole(&c_dev)).unwrap();
        }
        seq.copy(&c_dev, 0, &back, 0, 4).unwrap();
        seq.submit().unwrap()
    };
    assert_eq!(back.read_f32().unwrap(), vec![steps as f32]);
    assert_eq!(timings.dispatches.len(), steps);
    if ctx.report().timestamps {
        let timed = timings.dispatches.iter().filter(|d| d.ns.is_some()).count();
        assert_eq!(timed, steps);
        assert!(timings.total_ms().unwrap() > 0.0);
    }
    let outs: Vec<Buffer> = (0..70).map(|i| Buffer::device_f32(&ctx, &format!("c{i}"), 1).unwrap()).collect();
    let backs = Buffer::readback_f32(&ctx, "backs", 70).unwrap();
    {
        let mut seq = Sequence::new(&ctx).unwrap();
        let s = GemmShape { m: 1, n: 1, k: 1, ta: false, tb: false, accumulate: false };
        for (i, o) in outs.iter().enumerate() {
            gemm::gemm(&ctx, &mut seq, &s, MatRef::whole(&one), MatRef::whole(&one), MatRef::whole(o)).unwrap();
            seq.copy(o, 0, &backs, 4 * i as u64, 4).unwrap();
        }
        seq.submit().unwrap();
    }
    assert_eq!(backs.read_f32().unwrap(), vec![1.0; 70]);
    assert_clean(&ctx, "many_dependent_dispatches_in_one_sequence");
}

/// Finished sequences hand their command pool, fence, timestamp pool and
/// descriptor pools to the next ones. Sequences of varied lengths (some past
/// one descriptor-pool chunk, into fresh output buffers each time), one
/// dropped while still recording, one ended and never submitted, and two
/// alive at once, more of them than the context keeps: every one counts its
/// own dispatches (nothing left over from an earlier recording), times exactly
/// its own dispatches, and the validation layer sees no error.
#[test]
fn recycled_sequences_start_clean() {
    let (test, ctx) = common::vulkan!();
    let one = Buffer::upload_f32(&ctx, "one", &[1.0]).unwrap();
    let zero = Buffer::upload_f32(&ctx, "zero", &[0.0]).unwrap();
    let back = Buffer::readback_f32(&ctx, "back", 1).unwrap();
    let s = GemmShape { m: 1, n: 1, k: 1, ta: false, tb: false, accumulate: true };
    // Records `n` dispatches adding 1 each into a fresh buffer per dispatch
    // group of 10 (so more than 64 descriptor sets for long runs), then sums
    // the groups into `back`.
    let count = |n: usize| -> (f32, usize) {
        let outs: Vec<Buffer> =
            (0..n.div_ceil(10)).map(|i| Buffer::device_f32(&ctx, &format!("o{i}"), 1).unwrap()).collect();
        let total = Buffer::device_f32(&ctx, "total", 1).unwrap();
        let timings = {
            let mut seq = Sequence::new(&ctx).unwrap();
            seq.copy(&zero, 0, &total, 0, 4).unwrap();
            for o in &outs {
                seq.copy(&zero, 0, o, 0, 4).unwrap();
            }
            for i in 0..n {
                let o = MatRef::whole(&outs[i / 10]);
                gemm::gemm(&ctx, &mut seq, &s, MatRef::whole(&one), MatRef::whole(&one), o).unwrap();
            }
            for o in &outs {
                gemm::gemm(&ctx, &mut seq, &s, MatRef::whole(o), MatRef::whole(&one), MatRef::whole(&total)).unwrap();
            }
            seq.copy(&total, 0, &back, 0, 4).unwrap();
            seq.submit().unwrap()
        };
        (back.read_f32().unwrap()[0], timings.dispatches.len() - outs.len())
    };
    for (round, n) in [700, 3, 1, 650, 20, 2, 5].into_iter().enumerate() {
        assert_eq!(count(n), (n as f32, n), "round {round}: {n} dispatches");
        if round == 2 {
            // Dropped while recording, and ended but never submitted.
            let mut seq = Sequence::new(&ctx).unwrap();
            gemm::gemm(&ctx, &mut seq, &s, MatRef::whole(&one), MatRef::whole(&one), MatRef::whole(&back)).ok();
            drop(seq);
            let mut seq = Sequence::new(&ctx).unwrap();
            seq.copy(&one, 0, &back, 0, 4).unwrap();
            seq.end().unwrap();
        }
        if round == 4 {
            // Two at once: each takes its own parts.
            let a = Sequence::new(&ctx).unwrap();
            let b = Sequence::new(&ctx).unwrap();
            drop(a);
            drop(b);
        }
    }
    assert_clean(&ctx, test);
}

/// Random shapes, transposes, accumulate flags and buffer offsets for all three
/// matrices, many products recorded into one sequence.
#[test]
fn random_shapes_and_offsets_in_one_sequence() {
    let (_, ctx) = common::vulkan!();
    let mut rng = Rng::new(2026);
    struct Case {
        s: GemmShape,
        offs: [usize; 3],
        a: Vec<f32>,
        b: Vec<f32>,
        c0: Vec<f32>,
        bufs: [Buffer; 3],
        back: Buffer,
    }
    let mut cases = Vec::new();
    for _ in 0..24 {
        let dim = |rng: &mut Rng| 1 + rng.below(140) as usize;
        let (m, n, k) = (dim(&mut rng), dim(&mut rng), dim(&mut rng));
        let s = GemmShape { m, n, k, ta: rng.below(2) == 1, tb: rng.below(2) == 1, accumulate: rng.below(2) == 1 };
        let offs = [rng.below(50) as usize, rng.below(50) as usize, rng.below(50) as usize];
        let (a, b, c0) = (random(&mut rng, m * k), random(&mut rng, k * n), random(&mut rng, m * n));
        let padded = |x: &[f32], off: usize| {
            let mut v = vec![SENTINEL; off + x.len() + GUARD];
            v[off..off + x.len()].copy_from_slice(x);
            v
        };
        let bufs = [
            Buffer::upload_f32(&ctx, "a", &padded(&a, offs[0])).unwrap(),
            Buffer::upload_f32(&ctx, "b", &padded(&b, offs[1])).unwrap(),
            Buffer::upload_f32(&ctx, "c", &padded(&c0, offs[2])).unwrap(),
        ];
        let back = Buffer::readback_f32(&ctx, "c.back", bufs[2].len_f32()).unwrap();
        cases.push(Case { s, offs, a, b, c0, bufs, back });
    }
    {
        let mut seq = Sequence::new(&ctx).unwrap();
        for c in &cases {
            let at = |i: usize| MatRef { buf: &c.bufs[i], offset: c.offs[i] };
            gemm::gemm(&ctx, &mut seq, &c.s, at(0), at(1), at(2)).unwrap();
            seq.copy(&c.bufs[2], 0, &c.back, 0, c.back.bytes()).unwrap();
        }
        seq.submit().unwrap();
    }
    for c in &cases {
        let GemmShape { m, n, k, ta, tb, accumulate } = c.s;
        let got = c.back.read_f32().unwrap();
        let off = c.offs[2];
        let mut want = reference(m, n, k, &c.a, ta, &c.b, tb);
        if accumulate {
            want.iter_mut().zip(&c.c0).for_each(|(w, &x)| *w += x as f64);
        }
        let err = rel_l2(&got[off..off + m * n], &want);
        assert!(err <= 1e-5, "{:?} offsets {:?}: rel L2 {err:e}", c.s, c.offs);
        let guards = got[..off].iter().chain(&got[off + m * n..]);
        assert!(guards.into_iter().all(|x| x.to_bits() == SENTINEL.to_bits()), "{:?}: guard overwritten", c.s);
    }
    assert_clean(&ctx, "random_shapes_and_offsets_in_one_sequence");
}

/// One product into a C padded with sentinels: the inputs, the initial C and
/// the device buffers, so that it can be recorded several times.
struct Product {
    s: GemmShape,
    offs: [usize; 3],
    a: Vec<f32>,
    b: Vec<f32>,
    c0: Vec<f32>,
    bufs: [Buffer; 3],
    c_init: Buffer,
    back: Buffer,
}

impl Product {
    fn new(ctx: &dualscope::vk::Context, rng: &mut Rng, s: GemmShape) -> Product {
        let offs = [rng.below(40) as usize, rng.below(40) as usize, 1 + rng.below(40) as usize];
        let (a, b, c0) = (random(rng, s.m * s.k), random(rng, s.k * s.n), random(rng, s.m * s.n));
        Product::with(ctx, s, offs, a, b, c0)
    }

    /// The product of `a` and `b` (`c0` the initial C) with the matrices at `offs` in their buffers.
    fn with(
        ctx: &dualscope::vk::Context,
        s: GemmShape,
        offs: [usize; 3],
        a: Vec<f32>,
        b: Vec<f32>,
        c0: Vec<f32>,
    ) -> Product {
        let padded = |x: &[f32], off: usize| {
            let mut v = vec![SENTINEL; off + x.len() + GUARD];
            v[off..off + x.len()].copy_from_slice(x);
            v
        };
        let c_pad = padded(&c0, offs[2]);
        let bufs = [
            Buffer::upload_f32(ctx, "a", &padded(&a, offs[0])).unwrap(),
            Buffer::upload_f32(ctx, "b", &padded(&b, offs[1])).unwrap(),
            Buffer::device_f32(ctx, "c", c_pad.len()).unwrap(),
        ];
        let c_init = Buffer::upload_f32(ctx, "c.init", &c_pad).unwrap();
        let back = Buffer::readback_f32(ctx, "c.back", c_pad.len()).unwrap();
        Product { s, offs, a, b, c0, bufs, c_init, back }
    }

    fn at(&self, i: usize) -> MatRef<'_> {
        MatRef { buf: &self.bufs[i], offset: self.offs[i] }
    }

    /// The f64 reference, with the initial C added when accumulating.
    fn want(&self) -> Vec<f64> {
        let GemmShape { m, n, k, ta, tb, accumulate } = self.s;
        let mut want = reference(m, n, k, &self.a, ta, &self.b, tb);
        if accumulate {
            want.iter_mut().zip(&self.c0).for_each(|(w, &x)| *w += x as f64);
        }
        want
    }

    /// C as read back, after checking that the guards kept their bits.
    fn result(&self) -> Vec<f32> {
        let got = self.back.read_f32().unwrap();
        let (off, len) = (self.offs[2], self.s.m * self.s.n);
        let guards = got[..off].iter().chain(&got[off + len..]);
        assert!(guards.into_iter().all(|x| x.to_bits() == SENTINEL.to_bits()), "{:?}: guard overwritten", self.s);
        got[off..off + len].to_vec()
    }
}

/// Records every product in one sequence (C reset from its initial value,
/// `product` run, C read back), submits it and returns the timings.
fn record<'a>(
    ctx: &'a dualscope::vk::Context,
    products: impl IntoIterator<Item = &'a Product>,
    mut product: impl FnMut(&mut Sequence<'a>, &'a Product),
) -> Timings {
    let mut seq = Sequence::new(ctx).unwrap();
    for c in products {
        seq.copy(&c.c_init, 0, &c.bufs[2], 0, c.c_init.bytes()).unwrap();
        product(&mut seq, c);
        seq.copy(&c.bufs[2], 0, &c.back, 0, c.back.bytes()).unwrap();
    }
    seq.submit().unwrap()
}

/// [`record`] with `gemm_split` on `path`, split over `scratch`.
fn record_split<'a>(
    ctx: &'a dualscope::vk::Context,
    path: gemm::GemmPath,
    scratch: &'a Buffer,
    products: impl IntoIterator<Item = &'a Product>,
) -> Timings {
    record(ctx, products, |seq, c| {
        gemm::gemm_split(ctx, seq, path, &c.s, c.at(0), c.at(1), c.at(2), Some(scratch)).unwrap()
    })
}

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
        let path = gemm::path_for(&ctx, gemm::Precision::F32, gemm::GemmChoice::Auto).unwrap();
        assert_eq!(path, auto);
        // `tiled` is the 128×64 kernel (what earlier builds' captures name).
        let path = gemm::path_for(&ctx, gemm::Precision::F32, gemm::GemmChoice::Tiled).unwrap();
        assert_eq!(path, gemm::GemmPath::TiledF32);
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
