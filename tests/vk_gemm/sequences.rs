//! Products on the device and the sequences that record them: odd shapes and
//! every transpose, dependent products with sentinels around their outputs,
//! the group-count limit, hundreds of dispatches in one sequence, recycled
//! sequences, random shapes and offsets.

use dualscope::rng::Rng;
use dualscope::vk::gemm::{self, GemmShape, MatRef};
use dualscope::vk::{Buffer, Sequence};

use crate::common::{self, assert_clean, random, reference, rel_l2};
use crate::{GUARD, SENTINEL};

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
