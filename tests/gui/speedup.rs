//! The speedup panel: both engines timed live, with the controller's path and
//! the mixed-precision step, and stopped; its snapshot on known samples.

use std::time::Duration;

use dualscope::ui::App;
use dualscope::ui::command::Command;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use crate::{harness, mask_all, mask_session, tiny, wait_for_trace};

/// Opens the Speedup view, starts the run and waits until each engine (the
/// CPU, and the GPU where there is one) has timed `steps` steps; returns
/// whether there is a GPU.
fn start_speedup(h: &mut Harness<'static, App>, steps: usize) -> bool {
    h.get_by_label("Speedup").click();
    h.run_steps(2);
    h.get_by_label("Start").click();
    let gpu = dualscope::ui::engines::gpu_availability().is_ok();
    let enough = |h: &Harness<'static, App>| {
        let s = &h.state().speed().samples;
        let n = |e| s.iter().filter(|x| x.engine == e).count();
        n(dualscope::engine::EngineKind::Cpu) >= steps && (!gpu || n(dualscope::engine::EngineKind::Vulkan) >= steps)
    };
    for _ in 0..4000 {
        h.step();
        if enough(h) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(enough(h), "samples: {:?}", h.state().speed().samples);
    gpu
}

/// The speedup panel times both engines live, and stops.
#[test]
fn speedup_panel_runs_and_stops() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    let gpu = start_speedup(&mut h, 3);
    assert!(h.state().speed().is_running());
    h.get_by_label("Stop").click();
    h.run_steps(2);
    assert!(!h.state().speed().is_running());
    let s = &h.state().speed().samples;
    assert!(s.iter().all(|x| x.wall_ms > 0.0 && x.loss.is_finite()));
    // Both engines train the same model on the same batches: the same first loss.
    if gpu {
        let first = |e| s.iter().find(|x| x.engine == e).unwrap().loss;
        let (c, g) = (first(dualscope::engine::EngineKind::Cpu), first(dualscope::engine::EngineKind::Vulkan));
        assert!((c - g).abs() < 1e-4 * c.abs(), "CPU loss {c}, GPU loss {g}");
        assert!(h.query_all_by_label_contains("×").count() >= 2, "the speedups are shown");
        // The GPU step's per-kernel breakdown: the recurrences and the products are in it.
        let means = dualscope::ui::speed::kernel_means(&h.state().speed().kernels);
        assert!(means.iter().any(|k| k.0.contains("recurrence")) && means.iter().any(|k| k.0.starts_with("gemm")));
        assert!(means.iter().all(|k| k.1 >= 0.0 && k.1.is_finite()), "{means:?}");
        h.get_by_label_contains("GPU step by kernel");
    } else {
        h.get_by_label_contains("GPU not timed");
    }
}

/// With "with the controller" ticked, the speedup run steps each engine as
/// `train` does by default (compute, the controller's judgement, apply; on the
/// GPU the split step): the label says so, and both engines' losses agree.
#[test]
fn speedup_panel_runs_the_controllers_path() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.get_by_label("Speedup").click();
    h.run_steps(2);
    h.get_by_label("with the controller").click();
    h.run_steps(1);
    assert!(h.state().speed().controller, "the checkbox sets the run's path");
    let gpu = start_speedup(&mut h, 3);
    h.get_by_label("Stop").click();
    h.run_steps(2);
    assert!(h.state().speed().label.contains("with the controller"), "{}", h.state().speed().label);
    let s = &h.state().speed().samples;
    assert!(s.iter().all(|x| x.wall_ms > 0.0 && x.loss.is_finite()));
    if gpu {
        for step in 0..3 {
            let at = |e| s.iter().find(|x| x.engine == e && x.step == step).unwrap().loss;
            let (c, g) = (at(dualscope::engine::EngineKind::Cpu), at(dualscope::engine::EngineKind::Vulkan));
            assert!((c - g).abs() < 1e-4 * c.abs(), "step {step}: CPU loss {c}, GPU loss {g}");
        }
    }
}

/// With the precision control at f16, the speedup run's GPU step is the
/// mixed-precision step (f16 products, f32 elsewhere, loss scale): the panel
/// says so, and its first loss stays within the mixed step's reach of the
/// CPU's f32 loss.
#[test]
fn speedup_panel_times_the_mixed_step() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::SetPrecision(dualscope::step::Precision::F16));
    let gpu = start_speedup(&mut h, 2);
    h.get_by_label("Stop").click();
    h.run_steps(2);
    assert!(h.state().speed().label.contains("mixed precision (f16 products"), "{}", h.state().speed().label);
    h.get_by_label_contains("mixed precision (f16 products");
    if gpu {
        let s = &h.state().speed().samples;
        let first = |e| s.iter().find(|x| x.engine == e).unwrap().loss;
        let (c, g) = (first(dualscope::engine::EngineKind::Cpu), first(dualscope::engine::EngineKind::Vulkan));
        // f16 products move the first loss by about 1e-3 relative at most; another
        // model or batch would move it far more.
        assert!((c - g).abs() < 5e-3 * c.abs(), "CPU loss {c}, mixed GPU loss {g}");
    }
}

/// The speedup view with known samples (a live run's times vary from run to run).
#[test]
fn snapshot_speedup_view() {
    use dualscope::engine::EngineKind as Engine;
    use dualscope::ui::speed::Sample;
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::SetView(dualscope::session::state::View::Speedup));
    let samples = &mut h.state_mut().speed_mut().samples;
    for step in 0..30u64 {
        let wobble = ((step * 7) % 5) as f64;
        let s = |engine, wall_ms, device_ms| Sample { engine, step, wall_ms, device_ms, loss: 5.5 };
        samples.push(s(Engine::Cpu, 40.0 + wobble, None));
        samples.push(s(Engine::Vulkan, 8.0 + wobble / 5.0, Some(5.0 + wobble / 8.0)));
    }
    let kernels: Vec<(String, f64)> = [
        ("gru bwd recurrence", 1.9),
        ("gru fwd recurrence", 1.4),
        ("gemm 1024x384x64 tb", 0.6),
        ("attn_fwd", 0.3),
        ("adamw", 0.1),
    ]
    .iter()
    .map(|(k, ms)| (k.to_string(), *ms))
    .collect();
    h.state_mut().speed_mut().kernels.push_back(kernels);
    h.run_steps(3);
    h.get_by_label_contains("GPU step by kernel");
    // Medians of the last 20: CPU 42 ms, GPU 8.4 ms.
    h.get_by_label("5.00×");
    mask_all(&mut h, &["positions in"]);
    mask_session(&mut h);
    h.snapshot("speedup_view");
}
