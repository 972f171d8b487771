//! Rung 1 of the ladder (`gemm`) on the Vulkan device.

mod common;

use common::{assert_clean, ladder_setup, odd};
use dualscope::ladder::{self, Rung, Status};
use dualscope::model::Config;
use dualscope::step::Precision;

#[test]
fn gemm_rung_passes_on_the_tiny_config() {
    let (_, ctx) = common::vulkan!();
    let r =
        ladder::run_gemm(&ctx, &Config::tiny(), Precision::F32, 1, dualscope::step::GemmChoice::Auto, None).unwrap();
    for c in &r.cases {
        eprintln!(
            "{:?} {} {}: rel_l2 {:.2e} (cpu f32 {:.2e}) {:?}",
            c.status, c.name, c.params, c.rel_l2, c.rel_l2_cpu_f32, c.notes
        );
    }
    assert_eq!(r.id, Rung::Gemm);
    assert_eq!(
        r.status,
        Status::Pass,
        "{:#?}",
        r.cases.iter().filter(|c| c.status != Status::Pass).collect::<Vec<_>>()
    );
    assert!(r.sentinel_ok);
    assert_eq!((r.non_finite_cpu, r.non_finite_gpu), (0, 0));
    assert!(r.rel_l2 > 0.0 && r.rel_l2 <= r.tolerance, "{} vs {}", r.rel_l2, r.tolerance);
    assert!(r.cases.len() >= 30);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["status"], "pass");
    for key in [
        "rel_l2",
        "max_abs_err",
        "max_abs_index",
        "non_finite_cpu",
        "non_finite_gpu",
        "sentinel_ok",
        "tolerance",
        "gpu_ms",
        "cpu_ms",
        "cases",
    ] {
        assert!(json.get(key).is_some(), "RungResult JSON lacks {key}");
    }
    assert_clean(&ctx, "gemm_rung_passes_on_the_tiny_config");
}

#[test]
fn unknown_rungs_are_errors() {
    assert!(ladder::check_rungs(&ladder::ALL_RUNGS.map(String::from)).is_ok());
    let e = ladder::check_rungs(&["nope".to_string()]).unwrap_err().to_string();
    assert!(e.contains("unknown rung") && e.contains("embed_fwd"), "{e}");
}

/// The f16 precision on every device: cooperative matrices where the device
/// has them (`auto`), else the tiled kernel with its inputs rounded to f16.
#[test]
fn gemm_rung_passes_in_f16_on_every_path_the_device_has() {
    use dualscope::step::GemmChoice;
    use dualscope::vk::gemm::coopmat_f16_unavailable;
    let (_, ctx) = common::vulkan!();
    let mut choices = vec![GemmChoice::Tiled];
    match coopmat_f16_unavailable(&ctx) {
        None => choices.extend([GemmChoice::CoopMat, GemmChoice::CoopMat64]),
        Some(why) => {
            eprintln!("SKIPPED the cooperative-matrix path: {why}");
            let e = ladder::run_gemm(&ctx, &Config::tiny(), Precision::F16, 2, GemmChoice::CoopMat, None);
            assert!(e.is_err(), "forcing an unavailable path is an error");
        }
    }
    for choice in choices {
        let r = ladder::run_gemm(&ctx, &Config::tiny(), Precision::F16, 2, choice, None).unwrap();
        let bad: Vec<_> = r.cases.iter().filter(|c| c.status != Status::Pass).collect();
        assert_eq!(r.status, Status::Pass, "{choice:?}: {bad:#?}");
        assert!(r.sentinel_ok);
        // Rounding the inputs to f16 is visible: far above f32 rounding, within the f16 bound.
        assert!(r.rel_l2 > 1e-5 && r.rel_l2 <= ladder::f16_tolerance(), "{choice:?}: {}", r.rel_l2);
        // The kernel does what f32 arithmetic on the rounded inputs does.
        for c in &r.cases {
            assert!(c.rel_l2 <= 2.0 * c.rel_l2_cpu_f32 + 1e-5, "{choice:?} {} {}: {c:?}", c.name, c.params);
        }
    }
    assert_clean(&ctx, "gemm_rung_passes_in_f16_on_every_path_the_device_has");
}

/// bfloat16 inputs on the tiled kernel; no cooperative-matrix kernel for them.
#[test]
fn gemm_rung_passes_in_bf16_on_the_tiled_kernel() {
    use dualscope::step::GemmChoice;
    let (_, ctx) = common::vulkan!();
    let r = ladder::run_gemm(&ctx, &Config::tiny(), Precision::Bf16, 3, GemmChoice::Auto, None).unwrap();
    let bad: Vec<_> = r.cases.iter().filter(|c| c.status != Status::Pass).collect();
    assert_eq!(r.status, Status::Pass, "{bad:#?}");
    // bf16 rounding shows: well above f16's level, within the bf16 bound.
    assert!(r.rel_l2 > 1e-3 && r.rel_l2 <= ladder::bf16_tolerance(), "{}", r.rel_l2);
    for c in &r.cases {
        assert!(c.rel_l2 <= 2.0 * c.rel_l2_cpu_f32 + 1e-5, "{} {}: {c:?}", c.name, c.params);
    }
    assert!(ladder::run_gemm(&ctx, &Config::tiny(), Precision::Bf16, 3, GemmChoice::CoopMat, None).is_err());
    assert_clean(&ctx, "gemm_rung_passes_in_bf16_on_the_tiled_kernel");
}

#[test]
fn bf16_rounding_matches_the_definition() {
    for (x, want) in [(1.0f32, 1.0f32), (1.0 + 1.0 / 256.0, 1.0), (1.0 + 3.0 / 256.0, 1.0 + 4.0 / 256.0), (-2.5, -2.5)]
    {
        assert_eq!(ladder::round_bf16(x), want, "{x}");
    }
    assert!(ladder::round_bf16(f32::NAN).is_nan());
    assert_eq!(ladder::round_bf16(f32::INFINITY), f32::INFINITY);
}

/// A set-up in f32: [`common::ladder_setup`].
fn setup(cfg: &Config, mode: ladder::Mode, lens: &[usize], seed: u64) -> ladder::Setup {
    ladder_setup(cfg, mode, lens, seed, Precision::F32)
}

/// Runs rung `id`, which passes with one case an output (isolated attn_fwd
/// adds its two stress cases, large scores), none with a non-finite GPU value.
fn run_passing(l: &mut ladder::ModelLadder, cfg: &Config, mode: ladder::Mode, id: Rung) -> ladder::RungResult {
    let r = l.run(id).unwrap();
    let bad: Vec<_> = r.cases.iter().filter(|c| c.status != Status::Pass).collect();
    assert_eq!(r.status, Status::Pass, "{cfg:?} {mode:?} {id}: {bad:#?}");
    let stress = if id == Rung::AttnFwd && mode == ladder::Mode::Isolated { 2 } else { 0 };
    assert_eq!(r.cases.len(), id.outputs(cfg).len() + stress);
    for c in &r.cases {
        assert_eq!(c.non_finite_gpu, 0, "{id} {}", c.name);
    }
    r
}

#[test]
fn model_rungs_pass_in_both_modes() {
    let (test, ctx) = common::vulkan!();
    for mode in [ladder::Mode::Isolated, ladder::Mode::Chained] {
        for (cfg, lens) in [(odd(), vec![12, 6, 3]), (Config::tiny(), vec![9, 9])] {
            let mut l = ladder::ModelLadder::new(&ctx, setup(&cfg, mode, &lens, 5)).unwrap();
            for &id in Rung::MODEL {
                let r = run_passing(&mut l, &cfg, mode, id);
                for c in &r.cases {
                    assert!(c.rel_l2_gpu_f64.is_some_and(|x| x.is_finite()), "{id} {}", c.name);
                }
            }
            let e = l.end_to_end().unwrap();
            assert_eq!(e.status, Status::Pass, "{e:?}");
            assert!(e.loss_rel_err <= ladder::LOSS_TOLERANCE && e.grad_norm_rel_diff <= ladder::NORM_TOLERANCE);
            assert_eq!(e.top_contributors.len(), 5);
        }
    }
    assert_clean(&ctx, test);
}

/// A one-layer model small everywhere but in its context stream, for the
/// attention tests.
fn attn_cfg(attn_dim: usize, heads: usize, window: usize, batch: usize, seq_len: usize) -> Config {
    Config { vocab: 256, d_embed: 5, hidden: 9, layers: 1, attn_dim, heads, window, batch, seq_len }
}

/// The tiled attention kernels (blocks of 16 queries, chunks of 64 keys and
/// 64 head dims) on shapes the model configs above do not reach: a window of
/// three key chunks with dh = 67 (two dim chunks, neither a multiple of 4) and
/// T = 180 past the window; T = 36 shorter than a window of 100 with dh = 5;
/// the bench's heads and window (dh = 64, W = 128, T = 256), which also keeps
/// lavapipe's per-invocation loop guard honest at that size. Rows of
/// different lengths, so masks and padding matter.
#[test]
fn attention_rungs_pass_on_wide_windows_and_heads() {
    let (test, ctx) = common::vulkan!();
    let cfg = attn_cfg;
    let cases = [
        (cfg(134, 2, 150, 2, 180), vec![181, 97]),
        (cfg(15, 3, 100, 3, 36), vec![37, 20, 2]),
        (cfg(256, 4, 128, 1, 256), vec![257]),
    ];
    for (cfg, lens) in cases {
        for mode in [ladder::Mode::Isolated, ladder::Mode::Chained] {
            let mut l = ladder::ModelLadder::new(&ctx, setup(&cfg, mode, &lens, 17)).unwrap();
            for id in [Rung::AttnFwd, Rung::AttnBwd] {
                let r = run_passing(&mut l, &cfg, mode, id);
                for c in &r.cases {
                    eprintln!(
                        "W={} dh={} {mode:?} {}: rel L2 {:.2e}",
                        cfg.window,
                        cfg.head_dim(),
                        c.name,
                        c.rel_l2_gpu_f64.unwrap()
                    );
                }
            }
        }
    }
    assert_clean(&ctx, test);
}

/// The wide attention kernels (blocks of 64 queries or keys, 4 × 4 register
/// tiles), forced on shapes that divide neither the block nor the chunks: T =
/// 77 under a window of 100 (dh = 16), T = 130 past a window of 40 (dh = 24),
/// T = 130 with W = 70 and dh = 67 (two dim chunks, not a multiple of 4); rows
/// of different lengths (padded positions). In f32 and the mixed step, isolated
/// (the CPU's inputs) and chained: the attention rungs pass against the CPU
/// reference, and every tensor agrees with the blocks of 16 to f32 rounding.
#[test]
fn wide_attention_kernels_pass_the_rungs_and_match_the_tiled_ones() {
    use dualscope::vk::engine::AttnKernels;
    let (test, ctx) = common::vulkan!();
    let cfg = attn_cfg;
    let cases = [
        (cfg(48, 3, 100, 3, 77), vec![78, 40, 3]),
        (cfg(48, 2, 40, 3, 130), vec![131, 64, 9]),
        (cfg(134, 2, 70, 2, 130), vec![131, 71]),
    ];
    for (cfg, lens) in cases {
        for precision in [Precision::F32, Precision::F16] {
            for mode in [ladder::Mode::Isolated, ladder::Mode::Chained] {
                let s = ladder_setup(&cfg, mode, &lens, 23, precision);
                let mut narrow = ladder::ModelLadder::new(&ctx, s.clone()).unwrap();
                narrow.engine_mut().set_attn_kernels(AttnKernels::Narrow);
                let mut wide = ladder::ModelLadder::new(&ctx, s).unwrap();
                wide.engine_mut().set_attn_kernels(AttnKernels::Wide);
                for id in [Rung::AttnFwd, Rung::AttnBwd] {
                    let ro = narrow.run(id).unwrap();
                    let r = run_passing(&mut wide, &cfg, mode, id);
                    assert_eq!(r.status, ro.status);
                    for (tw, to) in wide.rung_tensors(id).iter().zip(narrow.rung_tensors(id)) {
                        assert_eq!(tw.name, to.name);
                        let d = common::rel_l2(&tw.gpu, &to.gpu);
                        eprintln!(
                            "W={} dh={} {precision:?} {mode:?} {}: wide vs tiled rel L2 {d:.2e}",
                            cfg.window,
                            cfg.head_dim(),
                            tw.name
                        );
                        // The attention's own outputs agree to f32 rounding; in the mixed
                        // step what f16 products make of them moves by less than the
                        // tiled kernels' own error against f64.
                        let own = common::rel_l2(&to.gpu, &to.f64);
                        let attention = tw.name.starts_with("ctx.") && tw.name != "ctx.d_s";
                        let bound = if attention || precision == Precision::F32 { 1e-5 } else { own.max(1e-5) };
                        assert!(d <= bound, "{precision:?} {mode:?} {id} {}: wide vs tiled {d:.2e}", tw.name);
                    }
                }
            }
        }
    }
    assert_clean(&ctx, test);
}

/// `DUALSCOPE_ATTN`'s values, and where `auto` takes the wide kernels: the
/// `bench` shape (512 workgroups of 64 queries) and B=1 T=4096, not `small`
/// (W = 32) nor B=1 T=512 (32 workgroups).
#[test]
fn auto_takes_the_wide_attention_kernels_on_large_grids_of_wide_windows() {
    use dualscope::vk::engine::AttnKernels;
    assert_eq!(AttnKernels::parse("narrow"), Ok(AttnKernels::Narrow));
    assert_eq!(AttnKernels::parse("wide"), Ok(AttnKernels::Wide));
    assert_eq!(AttnKernels::parse("auto"), Ok(AttnKernels::Auto));
    assert!(AttnKernels::parse("fast").unwrap_err().contains("\"fast\""));
    let auto = AttnKernels::Auto;
    assert!(auto.wide_for(256, 32, 4, 128) && auto.wide_for(4096, 1, 4, 128));
    assert!(!auto.wide_for(128, 8, 4, 32) && !auto.wide_for(512, 1, 4, 128));
    assert!(AttnKernels::Wide.wide_for(11, 3, 3, 4) && !AttnKernels::Narrow.wide_for(256, 32, 4, 128));
}

/// A wrong recurrent weight on the GPU: the rungs before the GRU pass, the GRU
/// forward fails first, and the end-to-end step does not pass. (Here the loss
/// moves by less than its gate, so it warns on the gradient norm, naming a
/// GRU tensor: the seed's "losses agree, norms do not".)
#[test]
fn a_corrupted_weight_fails_at_its_rung() {
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let s = setup(&cfg, ladder::Mode::Chained, &[12, 6, 3], 9);
    // Through the runner, as the GUI's example sessions plant theirs.
    let corruption = ladder::Corruption {
        tensor: "param.gru.weight_hh_l1".into(),
        corrupt: std::sync::Arc::new(|w: &mut [f32]| w[5] += 0.5),
    };
    let spec = ladder::LadderSpec {
        corruption: Some(corruption),
        on_error: ladder::OnError::Record,
        ..ladder::LadderSpec::new(vec![Rung::EmbedFwd, Rung::GruFwd], s)
    };
    let mut report = ladder::run(&ctx, spec, |_| {}).unwrap();
    assert_eq!(report.rungs[0].status, Status::Pass);
    let r = &report.rungs[1];
    assert_eq!(r.status, Status::Fail);
    let first_bad = r.cases.iter().find(|c| c.status == Status::Fail).unwrap();
    assert!(first_bad.name.starts_with("gru.l1."), "{}", first_bad.name);
    assert!(r.cases.iter().filter(|c| c.name.starts_with("gru.l0.")).all(|c| c.status == Status::Pass));
    let e = report.end_to_end.take().unwrap();
    assert_ne!(e.status, Status::Pass, "{e:?}");
    assert!(e.top_contributors[0].tensor.starts_with("gru."), "{e:?}");
    assert!(e.notes.iter().any(|n| n.contains("gru.")), "{e:?}");
    assert_clean(&ctx, test);
}

/// The runner's two ways with a rung that cannot run: `Stop` returns the
/// error; `Record` reports it for every rung it concerns (the model rungs and
/// the gate share the model ladder's), in order, and the run fails.
#[test]
fn the_runner_stops_or_records_what_cannot_run() {
    let (test, ctx) = common::vulkan!();
    let cfg = Config::tiny();
    let mut s = setup(&cfg, ladder::Mode::Isolated, &[9, 9], 3);
    // bfloat16 has no cooperative-matrix kernel on any device.
    s.precision = Precision::Bf16;
    let spec = ladder::LadderSpec {
        gemm_choice: dualscope::step::GemmChoice::CoopMat,
        ..ladder::LadderSpec::new(vec![Rung::Gemm, Rung::EmbedFwd], s)
    };
    assert!(ladder::run(&ctx, spec.clone(), |_| {}).is_err());
    let mut seen = Vec::new();
    let record = ladder::LadderSpec { on_error: ladder::OnError::Record, ..spec };
    let report = ladder::run(&ctx, record, |e| {
        seen.push(match e {
            ladder::Event::Started(r) => format!("start {r}"),
            ladder::Event::Finished(r, res, _) => format!("{r} {}", if res.is_ok() { "ok" } else { "error" }),
            ladder::Event::EndToEnd(res) => format!("end_to_end {}", if res.is_ok() { "ok" } else { "error" }),
        })
    })
    .unwrap();
    assert_eq!(seen, ["start gemm", "gemm error", "start embed_fwd", "embed_fwd error", "end_to_end error"]);
    let rungs: Vec<Rung> = report.errors.iter().map(|e| e.rung).collect();
    assert_eq!(rungs, [Rung::Gemm, Rung::EmbedFwd]);
    assert!(report.errors[1].error.starts_with("the model ladder: "), "{:?}", report.errors);
    assert_eq!(report.end_to_end_error.as_deref(), Some(report.errors[1].error.as_str()));
    assert!(report.rungs.is_empty() && report.end_to_end.is_none());
    assert_eq!(report.status, Status::Fail);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(serde_json::from_value::<ladder::LadderReport>(json).unwrap(), report);
    assert_clean(&ctx, test);
}

/// A row longer than lavapipe's loop guard allows one dispatch of the
/// recurrences to walk (65535 loop passes in total per invocation; at H = 5
/// a backward step costs 15, a forward one 10, so one dispatch ends early
/// past T = 4370 and T = 6554): every model rung and the end-to-end step
/// still pass, that is, every loop whose length grows with T is cut into
/// dispatches short enough. Tiny config, one row, so that it stays quick on
/// lavapipe.
#[test]
fn a_row_past_the_loop_guard_passes_every_rung() {
    let (test, ctx) = common::vulkan!();
    let cfg = Config::tiny();
    let mode = ladder::Mode::Isolated;
    let mut l = ladder::ModelLadder::new(&ctx, setup(&cfg, mode, &[7001], 23)).unwrap();
    for &id in Rung::MODEL {
        run_passing(&mut l, &cfg, mode, id);
    }
    let e = l.end_to_end().unwrap();
    assert_eq!(e.status, Status::Pass, "{e:?}");
    assert_clean(&ctx, test);
}
