//! Shared by the `vk_*` tests: a context on whatever Vulkan device exists, with
//! validation on, or `None` (and a printed notice) when there is no Vulkan at all.

#![allow(dead_code)]

use dualscope::vk::{Context, ContextOptions, VkError};

/// A context with validation on, or `None` when no Vulkan loader or device exists.
pub fn context(test: &str) -> Option<Context> {
    match Context::new(&ContextOptions { device: None, validation: Some(true) }) {
        Ok(ctx) => Some(ctx),
        Err(e @ (VkError::NoLoader(_) | VkError::NoDevice(_))) => {
            eprintln!("SKIPPED {test}: no Vulkan here ({e})");
            None
        }
        Err(e) => panic!("{test}: Vulkan context failed: {e}"),
    }
}

/// A context with validation as `DUALSCOPE_VK_VALIDATION` says (on unless it
/// is `0`): for the cooperative-matrix tests, which a validation layer older
/// than `VK_KHR_cooperative_matrix` switches off (on such a host, run them with
/// `DUALSCOPE_VK_VALIDATION=0`). `None` when there is no Vulkan at all.
pub fn context_from_env(test: &str) -> Option<Context> {
    let validation = !matches!(std::env::var("DUALSCOPE_VK_VALIDATION").as_deref(), Ok("0" | "false" | "off"));
    match Context::new(&ContextOptions { device: None, validation: Some(validation) }) {
        Ok(ctx) => Some(ctx),
        Err(e @ (VkError::NoLoader(_) | VkError::NoDevice(_))) => {
            eprintln!("SKIPPED {test}: no Vulkan here ({e})");
            None
        }
        Err(e) => panic!("{test}: Vulkan context failed: {e}"),
    }
}

/// Asserts that the validation layer reported no error during the test.
pub fn assert_clean(ctx: &Context, test: &str) {
    assert_eq!(ctx.validation_errors(), 0, "{test}: the validation layer reported errors (see stderr)");
}

pub fn random(rng: &mut dualscope::rng::Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.normal() as f32).collect()
}

/// `op(a)·op(b)` in f64 through the CPU reference.
#[allow(clippy::too_many_arguments)]
pub fn reference(m: usize, n: usize, k: usize, a: &[f32], ta: bool, b: &[f32], tb: bool) -> Vec<f64> {
    let a64: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let b64: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    let mut c = vec![0.0; m * n];
    dualscope::tensor::gemm(&mut c, m, n, k, &a64, ta, &b64, tb, false);
    c
}

/// ‖x − want‖ / ‖want‖ in f64 (absolute when `want` is zero).
pub fn rel_l2(x: &[f32], want: &[f64]) -> f64 {
    let (mut d, mut w) = (0.0, 0.0);
    for (&x, &y) in x.iter().zip(want) {
        d += (x as f64 - y).powi(2);
        w += y * y;
    }
    if w > 0.0 { (d / w).sqrt() } else { d.sqrt() }
}
