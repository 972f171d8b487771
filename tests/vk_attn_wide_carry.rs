//! The wide attention kernels (blocks of 64, `shaders/include/attn_wide.glsl`)
//! with a carried prefix (docs/carry-state.md): the keys and values of the
//! previous chunk staged from the prefix's tensors. `auto` picks them only on
//! large grids, so the lavapipe suite forces them here, on a head width that
//! takes the staging's vec4 loads (dh = 8) and on one that takes its scalar
//! loads (dh = 3), in f32 and the mixed step.

mod common;

use std::sync::Arc;

use dualscope::dataset::Batch;
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;
use dualscope::step::{Carry, LossScale, StepOptions};
use dualscope::step::{GemmChoice, Precision};
use dualscope::vk::engine::{AttnKernels, Engine};
use dualscope::vk::gemm::path_for;

/// K = 3 chunks of T = 70 (two blocks of 64 queries, the second partial)
/// under a window of 40, so chunks 2 and 3 carry a prefix of 39 keys. Each
/// chunk starts from the CPU's carried state; the wide kernels' loss, final
/// state and every gradient agree with the blocks of 16 to f32 rounding, and
/// in f32 with the CPU reference within the ladder's f32 tolerances.
#[test]
fn wide_attention_with_a_carried_prefix_matches_the_tiled_kernels_and_the_cpu() {
    let Some(ctx) = common::vk::context("wide_attention_with_a_carried_prefix") else { return };
    let ctx = Arc::new(ctx);
    let (k, t) = (3, 70);
    for attn_dim in [16, 6] {
        let cfg = Config { attn_dim, heads: 2, window: 40, ..Config::tiny() };
        let params = Params::<f32>::init(&cfg, 11);
        let mut rng = Rng::new(12);
        let row: Vec<u8> = (0..k * t + 1).map(|_| rng.below(256) as u8).collect();
        for precision in [Precision::F32, Precision::F16] {
            let path = path_for(&ctx, precision, GemmChoice::Auto).unwrap();
            let scale = if precision == Precision::F16 { LossScale::dynamic() } else { LossScale::fixed() };
            let opts = StepOptions::default();
            let mut engines: Vec<Engine> = [AttnKernels::Narrow, AttnKernels::Wide]
                .into_iter()
                .map(|a| {
                    let mut e = Engine::new(&ctx, &cfg, &params, &opts, &scale, path).unwrap();
                    e.set_attn_kernels(a);
                    e
                })
                .collect();
            let mut cur = Carry::zeros(&cfg, 1);
            for c in 0..k {
                let chunk = Batch::from_rows(&[&row[c * t..c * t + t + 1]]).unwrap();
                let (cpu, next) = dualscope::cpu::grads_with(&cfg, &params, &chunk, None, Some(&cur)).unwrap();
                let mut out = Vec::new();
                for e in engines.iter_mut() {
                    e.set_carry(Some(cur.clone()));
                    let g = e.grads(&chunk).unwrap();
                    let state = e.final_state().unwrap().expect("carrying");
                    out.push((g, state));
                }
                let what = format!("dh={} {precision:?} chunk {c}", cfg.head_dim());
                let ((old, old_state), (wide, wide_state)) = (&out[0], &out[1]);
                assert_eq!(wide_state.prefix_len, next.prefix_len, "{what}");
                assert!((wide.loss - old.loss).abs() <= 1e-6 * old.loss, "{what}: loss {} vs {}", wide.loss, old.loss);
                assert!(common::rel_l2(&wide_state.prefix, &old_state.prefix) < 1e-6, "{what}: prefix");
                // In the mixed step, what f16 products make of the attention's
                // rounding-level differences may move a gradient by as much as the
                // tiled kernels' own error against the CPU, no more.
                let tensors = wide.grads.named(&cfg).into_iter().zip(old.grads.tensors()).zip(cpu.grads.tensors());
                for (((name, w), o), b) in tensors {
                    let r = common::rel_l2(&w.data, &o.data);
                    let own = if precision == Precision::F32 { 0.0 } else { common::rel_l2(&o.data, &b.data) };
                    assert!(r <= own.max(1e-5), "{what}: {name} wide vs tiled relative L2 {r:.3e} (own {own:.1e})");
                }
                if precision == Precision::F32 {
                    assert!((wide.loss - cpu.loss).abs() <= 1e-5 * cpu.loss, "{what}: loss vs the CPU");
                    for ((name, w), b) in wide.grads.named(&cfg).into_iter().zip(cpu.grads.tensors()) {
                        let r = common::rel_l2(&w.data, &b.data);
                        assert!(r < 1e-4, "{what}: {name} vs the CPU relative L2 {r:.3e}");
                    }
                }
                cur = next;
            }
        }
    }
    common::vk::assert_clean(&ctx, "wide_attention_with_a_carried_prefix");
}
