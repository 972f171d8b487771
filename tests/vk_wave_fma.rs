//! The wavefronts with their products as f32 FMAs of the f16 operands
//! (`gru_*_wave_fma_nc`), the default for a batch of few rows: where the
//! engine picks them, the mixed ladder with them, and their gradients
//! against the cooperative-matrix wavefronts'. The kernels run where the
//! wavefronts do (a device with cooperative matrices); elsewhere only the
//! choice is checked.

mod common;

use common::{assert_clean, ladder_setup, random_batch, run_every_rung};
use dualscope::cpu;
use dualscope::ladder::{Mode, ModelLadder, Rung};
use dualscope::model::{Config, Params};
use dualscope::step::GemmChoice;
use dualscope::step::Precision;
use dualscope::step::StepOptions;
use dualscope::vk::engine::{Engine, WAVE_SCALAR_ROWS, WgChoice};
use dualscope::vk::gemm::coopmat_f16_unavailable;

fn cfg(hidden: usize, batch: usize, seq_len: usize) -> Config {
    Config { vocab: 256, d_embed: 24, hidden, layers: 2, attn_dim: 16, heads: 2, window: 6, batch, seq_len }
}

/// The mixed ladder (rungs 2–11 and the end-to-end gate, chained) passes with
/// the FMA wavefronts forced, on shapes that do not divide their tiles: one
/// row (B = 1), a few (B = 3), two row blocks (B = 17, ragged), H = 64 (so
/// half of layer 0's subgroups have no K-tile) and H = 192 (12 K-tiles over
/// 8 subgroups). On one batch their gradients are no farther from the
/// float64 reference than the cooperative-matrix wavefronts' (plus half of
/// f16's unit roundoff). By default the engine picks them for at most
/// `WAVE_SCALAR_ROWS` rows, and never where the wavefronts' operands are
/// read `coherent` (H = 144).
#[test]
fn the_fma_wavefronts_pass_the_mixed_ladder() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let coopmat = coopmat_f16_unavailable(&ctx).is_none();
    let cases = [
        (cfg(128, 1, 37), vec![38]),
        (cfg(192, 3, 21), vec![22, 15, 22]),
        (cfg(64, 2, 19), vec![20, 20]),
        (cfg(128, 17, 9), (0..17).map(|i| 10 - (i % 4)).collect::<Vec<_>>()),
    ];
    for (cfg, lens) in cases {
        let label = format!("H={} B={}", cfg.hidden, cfg.batch);
        let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, Mode::Chained, &lens, 9, Precision::F16)).unwrap();
        l.engine_mut().set_wg(WgChoice::Off);
        l.run(Rung::GruFwd).unwrap();
        let default = (l.engine().wave_scalar(true), l.engine().wave_scalar(false));
        let few = coopmat && cfg.batch <= WAVE_SCALAR_ROWS;
        assert_eq!(default, (few, few), "{label}: the default");
        l.engine_mut().set_wave_scalar(Some(true));
        l.run(Rung::GruFwd).unwrap();
        let e = l.engine();
        assert_eq!((e.wave_scalar(true), e.wave_scalar(false)), (coopmat, coopmat), "{label}");
        if !coopmat {
            continue;
        }
        run_every_rung(&mut l, &label);
        // Against the cooperative-matrix wavefronts, on one batch: both take
        // the same f16 operands and sum in f32 in different orders, and on the
        // H200 that alone put these gradients up to 7.3e-4 rel L2 apart, the
        // FMA path the nearer to float64 on 59 of 60 tensors. So each is held
        // to the reference: the FMA path no farther from it than the coopmat
        // path plus half of f16's unit roundoff.
        let params = Params::init(&cfg, 4);
        let batch = random_batch(6, &lens);
        let run = |fma: bool| {
            let opts = StepOptions::default();
            let mut e = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F16, GemmChoice::Auto).unwrap();
            e.set_wg(WgChoice::Off);
            e.set_wave_scalar(Some(fma));
            let g = e.grads(&batch).unwrap();
            (g, e.wave_scalar(true) && e.wave_scalar(false), e.forward_wave() && e.backward_wave())
        };
        let ((new, fma_new, wave_new), (old, fma_old, wave_old)) = (run(true), run(false));
        assert_eq!((fma_new, fma_old, wave_new, wave_old), (true, false, true, true), "{label}");
        let reference = cpu::grads::<f64>(&cfg, &params.cast(), &batch, None).unwrap().grads;
        let margin = Precision::F16.unit_roundoff() / 2.0;
        let tensors = new.grads.named(&cfg).into_iter().zip(old.grads.tensors()).zip(reference.tensors());
        for (((name, x), y), want) in tensors {
            let (e_new, e_old) = (common::rel_l2(&x.data, &want.data), common::rel_l2(&y.data, &want.data));
            let between = common::rel_l2(&x.data, &y.data);
            eprintln!("{label} {name}: fma {e_new:.2e}, coopmat {e_old:.2e} from float64; {between:.2e} apart");
            assert!(
                e_new <= e_old + margin,
                "{label} {name}: the FMA path is {e_new:.2e} from float64, coopmat {e_old:.2e}"
            );
        }
    }
    // Operands read `coherent` (H % 64 != 0): never the FMA variant.
    let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg(144, 1, 9), Mode::Chained, &[10], 9, Precision::F16)).unwrap();
    l.engine_mut().set_wave_scalar(Some(true));
    l.run(Rung::GruFwd).unwrap();
    assert!(!l.engine().wave_scalar(true) && !l.engine().wave_scalar(false), "H=144");
    if !coopmat {
        eprintln!("{test}: no cooperative matrices here; only the kernel choice was checked");
    }
    assert_clean(&ctx, test);
}
