//! The engine type on the CPU reference (the Vulkan side is covered by the
//! CLI's GPU tests, which drive it through `grads`, `step` and `train`).

use super::*;
use crate::dataset::synthetic;

fn setup() -> (Config, TrainState, Batch) {
    let cfg = Config::tiny();
    let state = TrainState::fresh(&cfg, Params::init(&cfg, 3), LossScale::fixed());
    let batch = synthetic::default_dataset().random_windows(5, 2, 9).unwrap();
    (cfg, state, batch)
}

#[test]
fn the_two_phase_step_is_the_step() {
    let (cfg, state, batch) = setup();
    let opts = StepOptions::default();
    let mut whole = Engine::cpu(&cfg, state.clone(), &opts);
    let mut halves = Engine::cpu(&cfg, state, &opts);
    let a = whole.step(&batch).unwrap();
    let p = halves.compute(&batch, None).unwrap();
    assert!((p.norms.global - a.optim.grad_norm).abs() <= 1e-9 * a.optim.grad_norm.max(1.0));
    let b = halves.apply(p).unwrap();
    assert_eq!((a.loss, a.optim.clipped), (b.loss, b.optim.clipped));
    assert_eq!(whole.snapshot().unwrap(), halves.snapshot().unwrap());
    assert_eq!((whole.optim_step().unwrap(), whole.precision_and_path()), (1, ("f32", "cpu")));
}

#[test]
fn snapshot_restore_and_poison() {
    let (cfg, state, batch) = setup();
    let mut e = Engine::cpu(&cfg, state.clone(), &StepOptions::default());
    let before = e.snapshot().unwrap();
    assert_eq!(before, state);
    let p = e.compute(&batch, Some(Poison::Nan)).unwrap();
    assert!(p.norms.global.is_nan());
    let r = e.apply(p).unwrap();
    assert!(r.optim.skipped.is_some(), "the guard skips a NaN gradient");
    assert_eq!(*e.params().unwrap(), state.params, "weights untouched");
    e.step(&batch).unwrap();
    assert_ne!(e.snapshot().unwrap(), before);
    e.restore(&before).unwrap();
    assert_eq!(e.snapshot().unwrap(), before);
    assert!(e.take_note().is_none() && e.as_vulkan().is_none() && e.kind() == EngineKind::Cpu);
}

#[test]
fn the_cpu_refuses_the_mixed_step_and_a_missing_device_is_unavailable() {
    let (cfg, state, _) = setup();
    let vk = VulkanOptions { precision: Precision::F16, ..Default::default() };
    let e = Engine::open(EngineKind::Cpu, &cfg, state, &StepOptions::default(), &vk).err().unwrap();
    assert!(e.is_unavailable() && e.to_string().starts_with("--precision f16:"), "{e}");
    let e = open_context(Some(10_000)).err().unwrap();
    assert!(matches!(e, EngineError::NoVulkan(_)) && e.is_unavailable(), "{e}");
}
