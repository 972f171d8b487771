//! The fault catalogue: every planted bug is caught by the ladder, first at
//! the rung the catalogue names, while the same ladder without it passes.

mod common;

use std::sync::Arc;

use common::assert_clean;
use dualscope::ladder::{self, Mode, ModelLadder, Rung, Status};
use dualscope::model::{Config, Params};
use dualscope::step::Fault;
use dualscope::step::GemmChoice;
use dualscope::step::Precision;

/// Widths past one SIMD group (H = 40, so a missing barrier can race), none a
/// multiple of a tile; T = 12 > W = 4; every other row shortened (padding).
fn cfg() -> Config {
    Config { vocab: 256, d_embed: 8, hidden: 40, layers: 2, attn_dim: 6, heads: 3, window: 4, batch: 3, seq_len: 12 }
}

/// The first rung that does not pass, over the whole ladder in `precision`
/// in isolated mode (the engine's buffers poisoned with NaN before each run
/// where `poison`).
fn first_failure_in(
    ctx: &Arc<dualscope::vk::Context>,
    fault: Option<Fault>,
    precision: Precision,
    poison: bool,
) -> Option<(String, Vec<String>)> {
    let cfg = cfg();
    let ds = dualscope::dataset::synthetic::default_dataset();
    let setup = ladder::Setup {
        cfg: cfg.clone(),
        params: Params::init(&cfg, 4),
        batch: ladder::default_batch(&ds, &cfg, 4).unwrap(),
        opts: Default::default(),
        mode: Mode::Isolated,
        precision,
    };
    let spec = ladder::LadderSpec {
        gemm_seed: 4,
        gemm_choice: GemmChoice::Auto,
        fault,
        poison,
        end_to_end: false,
        stop_at_failure: true,
        ..ladder::LadderSpec::new(Rung::ALL.to_vec(), setup)
    };
    let report = ladder::run(ctx, spec, |_| {}).unwrap();
    let r = report.rungs.iter().find(|r| r.status == Status::Fail)?;
    // The gemm rung's cases are products, not tensors: none are named.
    let bad = match r.id.id() {
        "gemm" => vec![],
        _ => r.cases.iter().filter(|c| c.status == Status::Fail).map(|c| c.name.clone()).collect(),
    };
    Some((r.id.to_string(), bad))
}

#[test]
fn every_fault_is_caught_at_its_rung() {
    let (test, ctx) = common::vulkan!();
    each_fault_is_caught_at_its_rung(&ctx, Precision::F32, "");
    assert_clean(&ctx, test);
}

/// The same catalogue against the mixed-precision ladder (f16 products, its
/// wider tolerances): every planted bug is still caught first at its rung —
/// `f16_accum_no_scale` by the gemm rung's range cases, whose sums pass f16's
/// 65504 (an f16 accumulator overflows to Inf).
#[test]
fn every_fault_is_caught_at_its_rung_in_the_mixed_step() {
    let (test, ctx) = common::vulkan!();
    each_fault_is_caught_at_its_rung(&ctx, Precision::F16, "mixed ");
    assert_clean(&ctx, test);
}

/// The clean engine at `precision` passes every rung, and each planted fault
/// is first caught at its expected rung (poisoned where the fault needs it);
/// `label` names the engine in messages.
fn each_fault_is_caught_at_its_rung(ctx: &Arc<dualscope::vk::Context>, precision: Precision, label: &str) {
    assert_eq!(first_failure_in(ctx, None, precision, false), None, "the clean {label}engine passes");
    for f in Fault::ALL {
        let caught = first_failure_in(ctx, Some(f), precision, f.needs_poison());
        let (rung, cases) = caught.unwrap_or_else(|| panic!("{f}: no rung failed"));
        assert_eq!(rung, f.expected_rung(), "{f}: first caught at {rung} ({cases:?})");
        eprintln!("{label}{f}: caught at {rung} by {cases:?}");
    }
}

#[test]
fn the_window_fault_shows_only_past_the_window() {
    let (test, ctx) = common::vulkan!();
    let cfg = cfg();
    let attn = |t: usize| {
        let rows = vec![(0..=t as u8).map(|x| x.wrapping_mul(37)).collect::<Vec<u8>>()];
        let setup = ladder::Setup {
            cfg: cfg.clone(),
            params: Params::init(&cfg, 2),
            batch: dualscope::dataset::Batch::from_rows(&rows).unwrap(),
            opts: Default::default(),
            mode: Mode::Isolated,
            precision: Precision::F32,
        };
        let mut l = ModelLadder::new(&ctx, setup).unwrap();
        l.set_fault(Some(Fault::WindowOffByOne));
        l.run(Rung::AttnFwd).unwrap().status
    };
    // J_t loses its oldest key only once the window is full: t ≥ W-1, so T ≥ W positions.
    assert_eq!(attn(cfg.window - 1), Status::Pass);
    assert_eq!(attn(cfg.window), Status::Fail);
    assert_clean(&ctx, test);
}

/// Poisoning the engine's buffers with NaN before each run changes nothing
/// for a correct engine: every rung and the end-to-end step pass, in both
/// modes, on the tiny config and on the odd widths (no value a step reads is
/// one it did not write).
#[test]
fn the_poisoned_ladder_passes() {
    let (test, ctx) = common::vulkan!();
    let tiny = Config::tiny();
    for (cfg, seed) in [(tiny, 6), (cfg(), 7)] {
        for mode in [Mode::Isolated, Mode::Chained] {
            let ds = dualscope::dataset::synthetic::default_dataset();
            let setup = ladder::Setup {
                cfg: cfg.clone(),
                params: Params::init(&cfg, seed),
                batch: ladder::default_batch(&ds, &cfg, seed).unwrap(),
                opts: Default::default(),
                mode,
                precision: Precision::F32,
            };
            assert!(setup.batch.num_targets() < setup.batch.rows * setup.batch.t, "the batch has padding");
            let spec = ladder::LadderSpec { poison: true, ..ladder::LadderSpec::new(Rung::ALL.to_vec(), setup) };
            let report = ladder::run(&ctx, spec, |_| {}).unwrap();
            for r in &report.rungs {
                assert_eq!(r.status, Status::Pass, "{mode:?} H={} {}: {r:#?}", cfg.hidden, r.id);
            }
            let e = report.end_to_end.as_ref().expect("the end-to-end gate ran");
            assert_eq!(e.status, Status::Pass, "{mode:?} H={}: {e:?}", cfg.hidden);
        }
    }
    assert_clean(&ctx, test);
}

/// The loss that skips clearing the logits' gradient at padded positions
/// reads (leaves) whatever the buffer held: zeros in a fresh buffer, so the
/// ladder passes without poison, and with the buffers poisoned the loss
/// rung fails, on the padded positions' gradient.
#[test]
fn a_read_of_unwritten_values_is_caught_only_with_poison() {
    let (test, ctx) = common::vulkan!();
    assert!(Fault::LossNoClear.needs_poison());
    assert_eq!(first_failure_in(&ctx, Some(Fault::LossNoClear), Precision::F32, false), None, "passes unpoisoned");
    let (rung, cases) = first_failure_in(&ctx, Some(Fault::LossNoClear), Precision::F32, true).expect("caught");
    assert_eq!(rung, "loss");
    assert_eq!(cases, vec!["loss.dlogits".to_string()]);
    assert_clean(&ctx, test);
}
