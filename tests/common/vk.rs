//! The Vulkan side of a test: a context on whatever device exists, with
//! validation on, or a printed `SKIPPED name: no Vulkan here (…)` and no
//! context where there is no Vulkan at all; the engines a test can run on;
//! the GEMM reference.

use std::sync::Arc;

use dualscope::vk::{Context, ContextOptions, VkError};

/// Opens a context with `validation`; `None`, after the `SKIPPED` notice,
/// where no Vulkan loader or device exists. Any other failure panics.
fn open(test: &str, validation: bool) -> Option<Context> {
    match Context::new(&ContextOptions { device: None, validation: Some(validation) }) {
        Ok(ctx) => Some(ctx),
        Err(e @ (VkError::NoLoader(_) | VkError::NoDevice(_))) => {
            eprintln!("SKIPPED {test}: no Vulkan here ({e})");
            None
        }
        Err(e) => panic!("{test}: Vulkan context failed: {e}"),
    }
}

/// A context with validation on, or `None` when no Vulkan loader or device exists.
pub fn context(test: &str) -> Option<Context> {
    open(test, true)
}

/// A context with validation as `DUALSCOPE_VK_VALIDATION` says (on unless it
/// is `0`): for the cooperative-matrix tests, which a validation layer older
/// than `VK_KHR_cooperative_matrix` switches off (on such a host, run them with
/// `DUALSCOPE_VK_VALIDATION=0`). `None` when there is no Vulkan at all.
pub fn context_from_env(test: &str) -> Option<Context> {
    open(test, !matches!(std::env::var("DUALSCOPE_VK_VALIDATION").as_deref(), Ok("0" | "false" | "off")))
}

/// The set-up of a test that needs the Vulkan engine:
/// `let (test, ctx) = common::vulkan!();` gives the test's name and a shared
/// context with validation on, or returns from the test (after the
/// `SKIPPED` notice) where there is no Vulkan. `vulkan!(validation_from_env)`
/// opens it as [`context_from_env`] does.
macro_rules! vulkan {
    () => {{
        let test = $crate::common::test_name!();
        match $crate::common::vk::context(test) {
            Some(ctx) => (test, std::sync::Arc::new(ctx)),
            None => return,
        }
    }};
    (validation_from_env) => {{
        let test = $crate::common::test_name!();
        match $crate::common::vk::context_from_env(test) {
            Some(ctx) => (test, std::sync::Arc::new(ctx)),
            None => return,
        }
    }};
}
pub(crate) use vulkan;

/// Returns from the test (after the `SKIPPED` notice) where there is no
/// Vulkan; for tests that drive the Vulkan engine through the binary and need
/// no context of their own (the probe's context is closed at once).
macro_rules! skip_without_vulkan {
    () => {
        if $crate::common::vk::context($crate::common::test_name!()).is_none() {
            return;
        }
    };
}
pub(crate) use skip_without_vulkan;

/// An engine a test can run on.
pub enum TestEngine {
    /// The CPU reference, always there.
    Cpu,
    /// The Vulkan engine, on a context with validation on.
    Vulkan(Arc<Context>),
}

impl TestEngine {
    /// The `--engine` argument that selects it.
    pub fn flag(&self) -> &'static str {
        match self {
            TestEngine::Cpu => "cpu",
            TestEngine::Vulkan(_) => "gpu",
        }
    }
}

/// Every engine available here: the CPU reference always, then the Vulkan
/// engine where a device exists (else the `SKIPPED` notice names the test).
pub fn engines(test: &str) -> Vec<TestEngine> {
    let mut all = vec![TestEngine::Cpu];
    all.extend(context(test).map(|ctx| TestEngine::Vulkan(Arc::new(ctx))));
    all
}

/// Asserts that the validation layer reported no error during the test.
pub fn assert_clean(ctx: &Context, test: &str) {
    assert_eq!(ctx.validation_errors(), 0, "{test}: the validation layer reported errors (see stderr)");
}

/// Asserts that two runs of the step gave the same loss and gradients, bit
/// for bit (a timing probe between them spoiled nothing the step reads).
pub fn assert_same_grads(before: &dualscope::vk::engine::GpuGrads, after: &dualscope::vk::engine::GpuGrads) {
    assert_eq!(before.loss.to_bits(), after.loss.to_bits());
    for (x, y) in before.grads.tensors().iter().zip(after.grads.tensors()) {
        assert!(x.data.iter().zip(&y.data).all(|(a, b)| a.to_bits() == b.to_bits()), "a gradient changed");
    }
}

/// `n` normal samples from `rng`, as f32.
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
