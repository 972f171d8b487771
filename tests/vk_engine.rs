//! The whole training step on the Vulkan engine against the CPU reference:
//! every trace tensor, the gradients, and optimizer steps.

mod common;

use common::{assert_clean, odd, random_batch as batch, rel_l2 as rel};
use dualscope::cpu;
use dualscope::dataset::Batch;
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;
use dualscope::step::{LossScale, OptimState, StepOptions};
use dualscope::vk::engine::{Engine, FlatBuf, Replay};
use dualscope::vk::gemm::GemmPath;

/// Rows of mostly spaces, with a few letters: one byte value at most positions.
fn skewed(seed: u64, lens: &[usize]) -> Batch {
    let mut rng = Rng::new(seed);
    let rows: Vec<Vec<u8>> = lens
        .iter()
        .map(|&n| {
            (0..n).map(|_| if rng.next_u64() % 5 < 4 { b' ' } else { b'a' + (rng.next_u64() % 6) as u8 }).collect()
        })
        .collect();
    Batch::from_rows(&rows).unwrap()
}

#[test]
fn every_trace_tensor_matches_the_cpu() {
    let (test, ctx) = common::vulkan!();
    let cases = [
        (odd(), batch(3, &[12, 5, 2]), None, "rows of 12, 5, 2"),
        (Config::tiny(), batch(3, &[8, 8]), Some(0.05), "rows of 8, 8"),
        (odd(), batch(3, &[3]), None, "one row of 3"),
        // The embedding gradient's position lists cut into chunks of 32:
        // a byte at about 200 positions, others at a handful or none.
        (odd(), skewed(5, &[160, 97]), None, "mostly spaces"),
    ];
    for (cfg, b, cap, what) in cases {
        let params = Params::<f32>::init(&cfg, 7);
        let opts = StepOptions { token_cap: cap, ..Default::default() };
        let mut e = Engine::new(&ctx, &cfg, &params, &opts, &LossScale::fixed(), GemmPath::TiledF32).unwrap();
        assert_matches_cpu(&mut e, &cfg, &params, &b, cap, &format!("{what}, cap {cap:?}"));
    }
    assert_clean(&ctx, test);
}

#[test]
fn training_steps_follow_the_cpu() {
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let p0 = Params::<f32>::init(&cfg, 11);
    // A small clip so that some steps clip and some do not.
    let opts = StepOptions { clip: 0.5, ..Default::default() };
    let mut e = Engine::new(&ctx, &cfg, &p0, &opts, &LossScale::fixed(), GemmPath::TiledF32).unwrap();
    let (mut p, mut st, mut sc) = (p0.clone(), OptimState::<f32>::new(&cfg), LossScale::fixed());
    for step in 0..4 {
        let b = batch(100 + step, &[10, 7, 4]);
        let cpu_r = cpu::train_step(&cfg, &mut p, &mut st, &mut sc, &b, &opts).unwrap();
        let (gpu_r, _) = e.train_step(&b, Replay::No).unwrap();
        assert!((gpu_r.loss - cpu_r.loss).abs() <= 1e-5 * cpu_r.loss, "step {step}: {gpu_r:?} vs {cpu_r:?}");
        assert_eq!(gpu_r.optim.clipped, cpu_r.optim.clipped);
        assert_eq!(gpu_r.optim.skipped, None);
        let gp = e.read_params(FlatBuf::Params).unwrap();
        for ((name, t), g) in p.named(&cfg).into_iter().zip(gp.tensors()) {
            let r = rel(&g.data, &t.data);
            assert!(r <= 1e-5, "step {step} param {name}: {r:.3e}");
        }
    }
    let s = e.optim_state().unwrap();
    assert_eq!(s.step, 4);
    assert!(rel(&e.layout().flatten(&s.v), &e.layout().flatten(&st.v)) < 1e-4);
    assert_clean(&ctx, test);
}

/// The guard on the device: a non-finite gradient skips the step (no parameter,
/// moment or counter changes), backs the dynamic scale off; good steps grow it
/// after the growth interval, as GradScaler does and as the CPU engine does.
#[test]
fn the_device_guard_skips_and_the_dynamic_scale_follows_gradscaler() {
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let p0 = Params::<f32>::init(&cfg, 21);
    let opts = StepOptions::default();
    let scale = LossScale { growth_interval: 2, ..LossScale::dynamic() };
    let mut e = Engine::new(&ctx, &cfg, &p0, &opts, &scale, GemmPath::TiledF32).unwrap();
    let (mut p, mut st, mut sc) = (p0.clone(), OptimState::<f32>::new(&cfg), scale.clone());
    let b = batch(5, &[9, 6]);
    // Two good steps: the scale (2^16) carries through unscale exactly and grows after the second.
    for step in 0..2 {
        let cpu_r = cpu::train_step(&cfg, &mut p, &mut st, &mut sc, &b, &opts).unwrap();
        let (gpu_r, _) = e.train_step(&b, Replay::No).unwrap();
        assert_eq!(gpu_r.optim.skipped, None);
        assert_eq!((gpu_r.optim.scale, gpu_r.optim.next_scale), (cpu_r.optim.scale, cpu_r.optim.next_scale));
        assert!((gpu_r.optim.grad_norm - cpu_r.optim.grad_norm).abs() <= 1e-5 * cpu_r.optim.grad_norm, "{step}");
    }
    assert_eq!(sc.scale, 131072.0);
    // A NaN weight: the loss and every gradient become NaN; the step is skipped.
    let mut bad = p.clone();
    bad.head_bias.data[3] = f32::NAN;
    e.set_params(&bad).unwrap();
    let before =
        (e.read_flat(FlatBuf::Params).unwrap(), e.read_flat(FlatBuf::M).unwrap(), e.read_flat(FlatBuf::V).unwrap());
    let cpu_r = cpu::train_step(&cfg, &mut bad.clone(), &mut st.clone(), &mut sc.clone(), &b, &opts).unwrap();
    let (gpu_r, _) = e.train_step(&b, Replay::No).unwrap();
    assert_eq!(cpu_r.optim.skipped, Some(dualscope::step::SkipReason::NonFiniteNorm));
    assert_eq!(gpu_r.optim.skipped, Some(dualscope::step::SkipReason::NonFiniteNorm));
    assert!(gpu_r.loss.is_nan());
    assert_eq!(gpu_r.optim.next_scale, 65536.0, "backed off from 2^17");
    let after =
        (e.read_flat(FlatBuf::Params).unwrap(), e.read_flat(FlatBuf::M).unwrap(), e.read_flat(FlatBuf::V).unwrap());
    let same = |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same(&before.0, &after.0) && same(&before.1, &after.1) && same(&before.2, &after.2));
    let (s, step, skipped) = e.loss_scale_and_step().unwrap();
    assert_eq!((s.scale, s.growth_tracker, step, skipped), (65536.0, 0, 2, 1));
    assert_clean(&ctx, test);
}

/// A recurrence longer than one chunk of timesteps: both directions resume
/// from the state the previous chunk left (and on lavapipe, no loop runs past
/// its 65535-iteration guard, which once cut a long backward pass short).
#[test]
fn long_recurrences_run_in_chunks_and_match_the_cpu() {
    let (test, ctx) = common::vulkan!();
    // H = 300: the 1024-invocation kernels (H > 256), in two forward and three backward chunks.
    let cfg = Config {
        vocab: 256,
        d_embed: 8,
        hidden: 300,
        layers: 2,
        attn_dim: 6,
        heads: 2,
        window: 5,
        batch: 1,
        seq_len: 700,
    };
    let params = Params::<f32>::init(&cfg, 31);
    let b = batch(8, &[701]);
    let (_, _, trace) = cpu::traced(&cfg, &params, &b, 1.0, None).unwrap();
    let mut e =
        Engine::new(&ctx, &cfg, &params, &StepOptions::default(), &LossScale::fixed(), GemmPath::TiledF32).unwrap();
    e.grads(&b).unwrap();
    for name in ["gru.l0.h", "gru.l1.h", "gru.l0.d_gh", "gru.l1.d_gi", "grad.gru.weight_hh_l0", "grad.gru.weight_hh_l1"]
    {
        let got = e.read_named(&[name]).unwrap().remove(0);
        let r = rel(&got, &trace.get(name).unwrap().data);
        assert!(r <= 2e-5, "{name}: rel L2 {r:.3e}");
    }
    assert_clean(&ctx, test);
}

/// Every trace tensor (more than 40) and gradient of `e` after `grads(b)`
/// against the CPU, with the per-token guard's cap `cap` on both sides: the
/// loss, the gradient norm and the capped count too.
fn assert_matches_cpu(e: &mut Engine, cfg: &Config, params: &Params<f32>, b: &Batch, cap: Option<f64>, what: &str) {
    let (_, _, trace) = cpu::traced(cfg, params, b, 1.0, cap).unwrap();
    let g = e.grads(b).unwrap();
    let cpu_g = cpu::grads(cfg, params, b, cap).unwrap();
    assert!((g.loss - cpu_g.loss).abs() <= 1e-5 * cpu_g.loss, "{what}: loss {} vs {}", g.loss, cpu_g.loss);
    assert!((g.grad_norm - cpu_g.grad_norm).abs() <= 1e-4 * cpu_g.grad_norm, "{what}: grad norm");
    assert_eq!(g.capped, cpu_g.capped, "{what}: capped positions");
    let mut checked = 0;
    for (name, want) in trace.iter() {
        if name == "loss.value" {
            continue;
        }
        let got = e.read_named(&[name]).unwrap().remove(0);
        let r = rel(&got, &want.data);
        eprintln!("{name}: {r:.2e}");
        assert!(r <= 2e-5, "{what}: {name}: rel L2 {r:.3e}");
        checked += 1;
    }
    assert!(checked > 40, "{what}: {checked} tensors");
    for ((name, t), gt) in cpu_g.grads.named(cfg).into_iter().zip(g.grads.tensors()) {
        let r = rel(&gt.data, &t.data);
        assert!(r <= 2e-5, "{what}: grad {name}: {r:.3e}");
    }
}

/// The grid recurrence kernels (units spread over workgroups), one dispatch
/// per step: odd widths (a workgroup with units past H), a batch too large for
/// one pass (B·4 > 256 invocations), and H = 300, whose dot products take
/// several chunks of loads; and H = 96, whose rows are whole cache lines, on
/// the kernels that read their operands without `coherent` (`gru_*_grid_nc`).
#[test]
fn grid_recurrence_kernels_match_the_cpu() {
    use dualscope::vk::engine::Recurrence;
    let (test, ctx) = common::vulkan!();
    let wide = Config { hidden: 300, d_embed: 8, batch: 2, seq_len: 30, ..odd() };
    let lined = Config { hidden: 96, d_embed: 8, batch: 3, seq_len: 20, ..odd() };
    let many: Vec<usize> = (0..70).map(|i| 2 + i % 5).collect();
    for (cfg, lens) in [(odd(), vec![12, 5, 2]), (odd(), many), (wide, vec![31, 17]), (lined, vec![19, 7, 20])] {
        let params = Params::<f32>::init(&cfg, 11);
        let b = batch(4, &lens);
        let mut e =
            Engine::new(&ctx, &cfg, &params, &StepOptions::default(), &LossScale::fixed(), GemmPath::TiledF32).unwrap();
        e.set_recurrence(Recurrence::Steps).unwrap();
        // Only H % 32 == 0 takes the loads without `coherent`.
        assert_eq!(e.grid_noncoherent(false), cfg.hidden % 32 == 0, "H={}", cfg.hidden);
        assert_matches_cpu(&mut e, &cfg, &params, &b, None, &format!("H={} B={}", cfg.hidden, lens.len()));
    }
    assert_clean(&ctx, test);
}

/// The one-dispatch grid recurrence needs every workgroup resident at once. On
/// a device that does not schedule them so (lavapipe runs a dispatch's
/// workgroups a few at a time), its bounded barrier gives up and the step is an
/// error, not a hang and not a wrong answer; where it does run, it matches.
#[test]
fn grid_barrier_either_matches_or_reports_the_device() {
    use dualscope::vk::engine::Recurrence;
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let params = Params::<f32>::init(&cfg, 12);
    let b = batch(5, &[12, 7, 3]);
    let mut e =
        Engine::new(&ctx, &cfg, &params, &StepOptions::default(), &LossScale::fixed(), GemmPath::TiledF32).unwrap();
    e.set_recurrence(Recurrence::Grid).unwrap();
    match e.grads(&b) {
        Ok(_) => assert_matches_cpu(&mut e, &cfg, &params, &b, None, "grid"),
        Err(err) => assert!(err.to_string().contains("DUALSCOPE_RECURRENCE=seq"), "{err}"),
    }
    assert_clean(&ctx, test);
}

/// The default choice of the grid recurrence (here asked for with
/// `prefer_grid`, as lavapipe's default is the per-row kernel) never fails a
/// step for want of resident workgroups: at the first batch both grid
/// kernels' barriers are tried, and where one gives up (128 workgroups at
/// H = 512 on lavapipe's few threads) the engine runs the same kernels one
/// dispatch per timestep and says why; either way it matches the CPU. Forced
/// (`set_recurrence`), a barrier that gives up makes the step an error and the
/// guard keeps the weights untouched.
#[test]
fn a_preferred_grid_falls_back_where_its_barrier_cannot_hold() {
    use dualscope::vk::engine::{FlatBuf, Recurrence};
    let (test, ctx) = common::vulkan!();
    let cfg = Config {
        vocab: 256,
        d_embed: 8,
        hidden: 512,
        layers: 2,
        attn_dim: 8,
        heads: 2,
        window: 3,
        batch: 2,
        seq_len: 5,
    };
    let params = Params::<f32>::init(&cfg, 31);
    let b = batch(9, &[6, 4]);
    let new = || Engine::new(&ctx, &cfg, &params, &StepOptions::default(), &LossScale::fixed(), GemmPath::TiledF32);
    let mut e = new().unwrap();
    e.prefer_grid().unwrap();
    e.grads(&b).unwrap();
    match e.recurrence() {
        Recurrence::Steps => {
            let why = e.recurrence_fallback().expect("a fallback says why");
            assert!(why.contains("resident") && why.contains("one dispatch per timestep"), "{why}");
            eprintln!("fell back: {why}");
        }
        Recurrence::Grid => {
            assert!(e.recurrence_fallback().is_none());
            eprintln!("the grid's barrier held on this device");
        }
        Recurrence::Seq => panic!("prefer_grid never picks the per-row kernel"),
    }
    assert_matches_cpu(&mut e, &cfg, &params, &b, None, "preferred grid");

    let mut forced = new().unwrap();
    forced.set_recurrence(Recurrence::Grid).unwrap();
    let before = forced.read_params(FlatBuf::Params).unwrap();
    match forced.train_step(&b, Replay::No) {
        Ok(_) => eprintln!("the forced grid's barrier held on this device"),
        Err(err) => {
            eprintln!("forced grid: {err}");
            assert!(err.to_string().contains("DUALSCOPE_RECURRENCE=seq"), "{err}");
            let after = forced.read_params(FlatBuf::Params).unwrap();
            for ((name, x), (_, y)) in before.named(&cfg).into_iter().zip(after.named(&cfg)) {
                let same = x.data.iter().zip(&y.data).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{name} changed by a failed step");
            }
        }
    }
    assert_clean(&ctx, test);
}

/// The tiled attention kernels sum in a fixed order (no atomics, fixed
/// reduction trees): the same inputs give the same bits, run after run, also
/// with several key and dim chunks per workgroup (W = 70, dh = 66, T = 90).
#[test]
fn attention_is_bitwise_repeatable() {
    let (test, ctx) = common::vulkan!();
    let cfg = Config {
        vocab: 256,
        d_embed: 6,
        hidden: 11,
        layers: 1,
        attn_dim: 132,
        heads: 2,
        window: 70,
        batch: 2,
        seq_len: 90,
    };
    let params = Params::<f32>::init(&cfg, 41);
    let b = batch(12, &[91, 50]);
    let mut e =
        Engine::new(&ctx, &cfg, &params, &StepOptions::default(), &LossScale::fixed(), GemmPath::TiledF32).unwrap();
    let names = ["ctx.attn", "ctx.c", "ctx.d_q", "ctx.d_k", "ctx.d_v"];
    e.grads(&b).unwrap();
    let first = e.read_named(&names).unwrap();
    for _ in 0..2 {
        e.grads(&b).unwrap();
        let again = e.read_named(&names).unwrap();
        for ((name, x), y) in names.iter().zip(&first).zip(&again) {
            assert!(x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits()), "{name} changed between runs");
        }
    }
    let (_, _, trace) = cpu::traced(&cfg, &params, &b, 1.0, None).unwrap();
    for (name, got) in names.iter().zip(&first) {
        let r = rel(got, &trace.get(name).unwrap().data);
        assert!(r <= 2e-5, "{name}: rel L2 {r:.3e}");
    }
    assert_clean(&ctx, test);
}

/// The bias gradients' column sums (`col_sum.comp`, then `col_sum_final.comp`
/// past one chunk of rows) against a float64 sum: from one row to more rows
/// than lavapipe lets one loop walk (65535), with offsets on both sides, on
/// packed rows and on column blocks (rows `stride` apart) whose first `dup`
/// sums are written twice, as the GRU's bias gradients take them.
/// Small integers first: every partial sum is then exact in f32, so the result
/// must equal the exact sum bit for bit whatever the order (a row or column
/// missed or counted twice shows). Then normal values: the relative L2 error
/// over the columns stays within 2·u·sqrt(rows) (u = 2^-24), twice the typical
/// error of a plain sequential f32 sum of `rows` terms (u·sqrt(rows/2)); the
/// chunked sum's is far smaller. The duplicates equal the sums, nothing else
/// in the output changes, and a second run gives the same bits.
#[test]
fn col_sums_match_a_float64_sum() {
    use dualscope::vk::engine::{ColSum, col_sum_chunks, col_sum_scratch_len, record_col_sum, record_col_sum_later};
    use dualscope::vk::gemm::{MatRef, flush};
    use dualscope::vk::{Buffer, Sequence};
    let (test, ctx) = common::vulkan!();
    let mut rng = Rng::new(17);
    let (x_off, out_off, guard) = (13, 7, 5);
    let sentinel = -3.5e30f32;
    let u = f64::powi(2.0, -24);
    let dense =
        [(1, 1), (5, 37), (256, 33), (257, 33), (5000, 70), (8192, 300), (70000, 3)].map(|(r, d)| ColSum::dense(r, d));
    let blocks = [(5, 7, 9, 3), (257, 33, 40, 33), (5000, 70, 210, 50), (70000, 3, 5, 2)]
        .map(|(rows, d, stride, dup)| ColSum { rows, d, stride, dup });
    for shape in dense.into_iter().chain(blocks) {
        let ColSum { rows, d, stride, dup } = shape;
        assert!(rows < 1000 || col_sum_chunks(rows).1 > 1, "{rows} rows: one chunk");
        for integers in [true, false] {
            let x: Vec<f32> = (0..rows * stride)
                .map(|_| if integers { (rng.below(17) as i64 - 8) as f32 } else { rng.normal() as f32 })
                .collect();
            let want: Vec<f64> = (0..d).map(|j| (0..rows).map(|r| x[r * stride + j] as f64).sum()).collect();
            let mut x_pad = vec![f32::NAN; x_off];
            x_pad.extend(&x);
            let mut out_init = vec![sentinel; out_off + d + dup + guard];
            out_init[out_off..out_off + d + dup].fill(f32::NAN);
            let xb = Buffer::upload_f32(&ctx, "x", &x_pad).unwrap();
            let out = Buffer::upload_f32(&ctx, "out", &out_init).unwrap();
            let out_dev = Buffer::device_f32(&ctx, "out.dev", out_init.len()).unwrap();
            let back = Buffer::readback_f32(&ctx, "out.back", out_init.len()).unwrap();
            // The chunk sums from an offset: the scratch is bound from there on.
            let scratch = Buffer::device_f32(&ctx, "scratch", 37 + col_sum_scratch_len(rows, d).max(1)).unwrap();
            let run = || {
                let mut seq = Sequence::new(&ctx).unwrap();
                seq.copy(&out, 0, &out_dev, 0, out.bytes()).unwrap();
                let (xm, om) = (MatRef { buf: &xb, offset: x_off }, MatRef { buf: &out_dev, offset: out_off });
                let sm = MatRef { buf: &scratch, offset: 37 };
                if stride == d && dup == 0 {
                    record_col_sum(&ctx, &mut seq, xm, rows, d, om, sm, "col_sum test").unwrap();
                } else {
                    let rest = record_col_sum_later(&ctx, &mut seq, xm, shape, om, sm, "col_sum test").unwrap();
                    flush(&mut seq, rest).unwrap();
                }
                seq.copy(&out_dev, 0, &back, 0, out.bytes()).unwrap();
                let t = seq.submit().unwrap();
                assert_eq!(t.dispatches.len(), if col_sum_chunks(rows).1 > 1 { 2 } else { 1 });
                let got = back.read_f32().unwrap();
                let guards = got[..out_off].iter().chain(&got[out_off + d + dup..]);
                assert!(guards.into_iter().all(|v| v.to_bits() == sentinel.to_bits()), "{shape:?}: guard changed");
                for j in 0..dup {
                    assert_eq!(got[out_off + d + j].to_bits(), got[out_off + j].to_bits(), "{shape:?}: duplicate {j}");
                }
                got[out_off..out_off + d].to_vec()
            };
            let got = run();
            if integers {
                for j in 0..d {
                    assert_eq!(got[j] as f64, want[j], "{shape:?}, column {j}");
                }
            } else {
                let (mut e, mut w) = (0.0, 0.0);
                for j in 0..d {
                    e += (got[j] as f64 - want[j]).powi(2);
                    w += want[j] * want[j];
                }
                let err = (e / w).sqrt();
                let tol = 2.0 * u * (rows as f64).sqrt();
                assert!(err <= tol, "{shape:?}: rel L2 {err:.3e} > {tol:.3e}");
            }
            let again = run();
            assert!(got.iter().zip(&again).all(|(p, q)| p.to_bits() == q.to_bits()), "{shape:?}: runs differ");
        }
    }
    assert_clean(&ctx, test);
}

/// `train_step(.., Replay::Yes)` (what `train` runs: the step recorded once, replayed on
/// batch after batch) gives bit for bit what recording every step gives:
/// batches of one shape with different target counts (rows of different
/// lengths), then a new shape (recorded anew), a token cap switched on
/// (recorded anew) and a planted fault (recorded anew, and caught as with
/// `step`).
#[test]
fn replayed_steps_match_recorded_steps() {
    use dualscope::step::Fault;
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let params = Params::<f32>::init(&cfg, 5);
    let opts = StepOptions::default();
    let engine = || Engine::new(&ctx, &cfg, &params, &opts, &LossScale::fixed(), GemmPath::TiledF32).unwrap();
    let (mut recorded, mut replayed) = (engine(), engine());
    let batches =
        [batch(1, &[12, 12, 12]), batch(2, &[12, 4, 9]), batch(3, &[3, 12, 2]), batch(4, &[7, 7]), batch(5, &[7, 3])];
    for (i, b) in batches.iter().enumerate() {
        if i == 4 {
            let capped = StepOptions { token_cap: Some(0.01), ..opts };
            recorded.set_options(&capped).unwrap();
            replayed.set_options(&capped).unwrap();
        }
        let (want, _) = recorded.train_step(b, Replay::No).unwrap();
        let (got, _) = replayed.train_step(b, Replay::Yes).unwrap();
        assert_eq!(got.n_targets, b.num_targets(), "batch {i}");
        assert_eq!(got.loss.to_bits(), want.loss.to_bits(), "batch {i}: loss {} vs {}", got.loss, want.loss);
        assert_eq!(got.capped_tokens, want.capped_tokens, "batch {i}");
        let (p_got, p_want) =
            (replayed.read_flat(FlatBuf::Params).unwrap(), recorded.read_flat(FlatBuf::Params).unwrap());
        assert!(p_got.iter().zip(&p_want).all(|(a, b)| a.to_bits() == b.to_bits()), "batch {i}: parameters differ");
    }
    // A planted fault is recorded into the step too (the same shape as the
    // last batch, whose second row is padded).
    let b = &batches[4];
    recorded.set_fault(Some(Fault::MaskDropped));
    replayed.set_fault(Some(Fault::MaskDropped));
    let (want, _) = recorded.train_step(b, Replay::No).unwrap();
    let (got, _) = replayed.train_step(b, Replay::Yes).unwrap();
    assert_eq!(got.loss.to_bits(), want.loss.to_bits(), "with the fault: {} vs {}", got.loss, want.loss);
    assert_clean(&ctx, test);
}
