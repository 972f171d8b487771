//! The precision map (docs/precision.md): each stage flipped to f16 alone
//! moves that stage's rung, and no other, to f16's error level; the map of
//! today's mixed step gives today's step bit for bit; the stages without a
//! kernel in a precision are refused with one line naming them.

mod common;

use common::{assert_clean, ladder_setup, odd, random_batch};
use dualscope::ladder::{self, Mode, Rung, Status};
use dualscope::model::Params;
use dualscope::step::GemmChoice;
use dualscope::step::LossScale;
use dualscope::step::StepOptions;
use dualscope::step::{MapStage, Precision, PrecisionMap, StageKind};
use dualscope::vk::VkError;
use dualscope::vk::engine::Engine;

/// Below f16's error level (its unit roundoff 2^-11 / 16) and far above
/// f32's (a few 1e-7).
const F16_LEVEL: f64 = 1.0 / 32768.0;

/// The rung whose stage records `s`'s products.
fn rung_of(s: MapStage) -> Rung {
    match (s.kind, s.backward) {
        (StageKind::Embed, false) => Rung::EmbedFwd,
        (StageKind::Embed, true) => Rung::EmbedBwd,
        (StageKind::GruInput | StageKind::GruRec, false) => Rung::GruFwd,
        (StageKind::GruInput | StageKind::GruRec, true) => Rung::GruBwd,
        (StageKind::Attn, false) => Rung::AttnFwd,
        (StageKind::Attn, true) => Rung::AttnBwd,
        (StageKind::Head, false) => Rung::HeadFwd,
        (StageKind::Head, true) => Rung::HeadBwd,
    }
}

/// The largest error of a rung's tensors (the attention's stress cases aside).
fn worst(r: &ladder::RungResult) -> (f64, String) {
    r.cases
        .iter()
        .filter(|c| !c.name.contains("stress"))
        .map(|c| (c.rel_l2, c.name.clone()))
        .fold((0.0, String::new()), |a, b| if b.0 > a.0 { b } else { a })
}

/// The model rungs, isolated, on the odd widths, under `map`.
fn run_map(ctx: &std::sync::Arc<dualscope::vk::Context>, map: PrecisionMap) -> ladder::LadderReport {
    let cfg = odd();
    let spec = ladder::LadderSpec {
        end_to_end: false,
        precision_map: Some(map),
        ..ladder::LadderSpec::new(Rung::MODEL.to_vec(), ladder_setup(&cfg, Mode::Isolated, &[10, 6], 5, Precision::F32))
    };
    ladder::run(ctx, spec, |_| {}).unwrap()
}

/// For every stage with an f16 kernel here: an all-f32 map with only that
/// stage in f16, in isolated mode. The stage's rung passes (within the map's
/// bound) with its largest error over 2^-15 (f16's level) and over 100× the
/// all-f32 map's error of that rung (f32's level; the backward rungs' f32
/// tolerance, 1e-4, lies within a few times f16's level at these widths, so
/// the level, not the tolerance, is what it is measured against); every
/// other rung keeps every tensor within its f32 tolerance.
#[test]
fn each_stage_flipped_moves_only_its_rung() {
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let f32_map = PrecisionMap::uniform(Precision::F32, cfg.layers);
    let base = run_map(&ctx, f32_map.clone());
    assert_eq!(base.status, Status::Pass, "the all-f32 map passes");
    for stage in PrecisionMap::stages(cfg.layers) {
        if stage.kind == StageKind::Embed && stage.backward {
            continue; // no f16 kernel: refused, see `stages_without_a_kernel_are_refused`
        }
        let map = f32_map.with(&format!("{stage}=f16")).unwrap();
        let report = run_map(&ctx, map.clone());
        assert_eq!(report.precision_map.as_ref(), Some(&map), "{stage}: the report names the map");
        let target = rung_of(stage);
        for r in &report.rungs {
            if r.id == target {
                let bad: Vec<_> = r.cases.iter().filter(|c| c.status == Status::Fail).collect();
                assert_ne!(r.status, Status::Fail, "{stage}: its rung {} failed: {bad:#?}", r.id);
                let (err, name) = worst(r);
                let over_tol = err / r.id.tolerance(&name).max(F16_LEVEL);
                let f32_err = base.rungs.iter().find(|b| b.id == r.id).map(|b| worst(b).0).unwrap();
                assert!(err > F16_LEVEL, "{stage}: its rung {} stays below f16's level ({name}: {err:.2e})", r.id);
                assert!(err > 100.0 * f32_err.max(1e-9), "{stage}: {} at {err:.2e}, f32's {f32_err:.2e}", r.id);
                eprintln!(
                    "{stage}: {} {name} at {err:.2e} ({over_tol:.1}× its f32 tolerance; f32 map {f32_err:.1e})",
                    r.id
                );
            } else {
                for c in &r.cases {
                    let tol = r.id.tolerance(&c.name);
                    assert!(
                        c.rel_l2 <= tol,
                        "{stage} in f16 moved rung {} too: {} at {:.2e} over its f32 tolerance {tol:.1e}",
                        r.id,
                        c.name,
                        c.rel_l2
                    );
                }
            }
        }
    }
    assert_clean(&ctx, test);
}

/// The map of today's mixed step (what `Engine::precision_map` says the
/// engine runs) given explicitly computes the same gradients, bit for bit,
/// as `--precision f16` alone; the all-f32 map the same as `--precision f32`.
#[test]
fn the_default_map_is_todays_step() {
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let params = Params::init(&cfg, 3);
    let batch = random_batch(3, &[12, 6, 3]);
    let opts = StepOptions::default();
    for p in [Precision::F16, Precision::F32, Precision::Bf16] {
        let mut plain = Engine::with_precision(&ctx, &cfg, &params, &opts, p, GemmChoice::Auto).unwrap();
        let map = plain.precision_map();
        let mut mapped = Engine::with_precision_map(&ctx, &cfg, &params, &opts, &map, GemmChoice::Auto).unwrap();
        let (a, b) = (plain.grads(&batch).unwrap(), mapped.grads(&batch).unwrap());
        assert_eq!(a.loss.to_bits(), b.loss.to_bits(), "{p:?}: the loss");
        assert_eq!(a.grad_norm.to_bits(), b.grad_norm.to_bits(), "{p:?}: the norm");
        for (x, y) in a.grads.tensors().iter().zip(b.grads.tensors()) {
            let same = x.data.iter().zip(&y.data).all(|(u, v)| u.to_bits() == v.to_bits());
            assert!(same, "{p:?}: a gradient differs between --precision and its default map");
        }
        let (sa, _, _) = plain.loss_scale_and_step().unwrap();
        let (sb, _, _) = mapped.loss_scale_and_step().unwrap();
        assert_eq!((sa.scale, sa.dynamic), (sb.scale, sb.dynamic), "{p:?}: the loss scale");
    }
    // A map unlike the default changes the gradients (the test can fail).
    let map = PrecisionMap::uniform(Precision::F32, cfg.layers).with("head.bwd=f16").unwrap();
    let mut f32e = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F32, GemmChoice::Auto).unwrap();
    let mut one = Engine::with_precision_map(&ctx, &cfg, &params, &opts, &map, GemmChoice::Auto).unwrap();
    let (a, b) = (f32e.grads(&batch).unwrap(), one.grads(&batch).unwrap());
    assert_ne!(a.grads.tensors()[0].data, b.grads.tensors()[0].data);
    assert_clean(&ctx, test);
}

/// A stage with no kernel in its precision is refused at construction, with
/// one line naming the stage; so is a map of another model's layers.
#[test]
fn stages_without_a_kernel_are_refused() {
    let (test, ctx) = common::vulkan!();
    let cfg = odd();
    let params = Params::init(&cfg, 3);
    let opts = StepOptions::default();
    let new = |map: &PrecisionMap| Engine::with_precision_map(&ctx, &cfg, &params, &opts, map, GemmChoice::Auto);
    let f32_map = PrecisionMap::uniform(Precision::F32, cfg.layers);
    for bad in ["embed.bwd=f16", "embed.bwd=bf16"] {
        match new(&f32_map.with(bad).unwrap()) {
            Err(VkError::Unsupported(why)) => {
                assert!(why.contains(bad) && why.contains("scatter-add") && !why.contains('\n'), "{why}")
            }
            Err(e) => panic!("{bad}: {e}"),
            Ok(_) => panic!("{bad} was taken"),
        }
    }
    match new(&PrecisionMap::uniform(Precision::F32, 3)) {
        Err(e) => assert!(e.to_string().contains("3 GRU layers, the model 2"), "{e}"),
        Ok(_) => panic!("a map of 3 layers was taken for a model of 2"),
    }
    // Every other stage, in f16 and in bf16, has a kernel on the per-row recurrences.
    let every = f32_map.with("all=f16,embed.bwd=f32,gru.l1.rec=bf16,head=bf16").unwrap();
    let e = new(&every).unwrap();
    assert_eq!(e.precision_map(), every);
    assert_clean(&ctx, test);
}

/// The loss scale: dynamic where a backward stage is f16, none where only
/// forward stages (or bf16 ones) are below f32.
#[test]
fn the_loss_scale_follows_the_backward() {
    let f32_map = PrecisionMap::uniform(Precision::F32, 2);
    assert!(LossScale::for_map(&f32_map.with("attn.bwd=f16").unwrap()).dynamic);
    assert!(!LossScale::for_map(&f32_map.with("fwd=f16").unwrap()).dynamic);
    assert!(!LossScale::for_map(&f32_map.with("bwd=bf16,embed.bwd=f32").unwrap()).dynamic);
    let default = PrecisionMap::default_for(Precision::F16, 2, false);
    assert!(LossScale::for_map(&default).dynamic);
}

/// Without a map the ladder judges each tensor by the engine's default map,
/// exactly as with that map spelled out: the same tolerance for every case
/// of every rung, in both modes (and the same gate).
#[test]
fn no_map_and_the_default_map_spelled_out_give_the_same_tolerances() {
    let (_test, ctx) = common::vulkan!(validation_from_env);
    let cfg = dualscope::model::Config::tiny();
    for mode in [Mode::Isolated, Mode::Chained] {
        let setup = || ladder_setup(&cfg, mode, &[9, 6], 5, Precision::F16);
        let mut plain = ladder::ModelLadder::new(&ctx, setup()).unwrap();
        let spelled = PrecisionMap::parse_full(&plain.engine().precision_map().to_string()).unwrap();
        let mut mapped = ladder::ModelLadder::with_map(&ctx, setup(), GemmChoice::Auto, Some(spelled)).unwrap();
        for &id in &Rung::ALL[1..] {
            let (a, b) = (plain.run(id).unwrap(), mapped.run(id).unwrap());
            assert_eq!(a.cases.len(), b.cases.len(), "{id}");
            for (x, y) in a.cases.iter().zip(&b.cases) {
                assert_eq!((&x.name, x.tolerance), (&y.name, y.tolerance), "{id} {mode:?}");
            }
        }
        let (a, b) = (plain.end_to_end().unwrap(), mapped.end_to_end().unwrap());
        assert_eq!((a.loss_tolerance, a.grad_norm_tolerance), (b.loss_tolerance, b.grad_norm_tolerance));
    }
    common::assert_clean(&ctx, "no_map_and_the_default_map_spelled_out_give_the_same_tolerances");
}

/// On cooperative matrices (the H200) today's step runs the recurrences in
/// f16: the default map's gru_bwd tolerances count `gru.l*.rec.bwd`, above
/// the products-only count the ladder used without a map before.
#[test]
fn the_cooperative_matrix_default_counts_the_recurrences_backward() {
    let cfg = dualscope::model::Config::tiny();
    let cm = PrecisionMap::default_for(Precision::F16, cfg.layers, true);
    let seq = PrecisionMap::default_for(Precision::F16, cfg.layers, false);
    for t in ["gru.l0.d_h", "gru.l1.d_gh", "grad.gru.weight_hh_l0"] {
        let products = Rung::GruBwd.mixed_tolerance(Precision::F16, Mode::Isolated, &cfg, t);
        assert_eq!(Rung::GruBwd.map_tolerance(&seq, Mode::Isolated, &cfg, t), products, "{t}");
        assert!(Rung::GruBwd.map_tolerance(&cm, Mode::Isolated, &cfg, t) > products, "{t}");
    }
}
