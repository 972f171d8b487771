//! What a finished sequence reports: its per-dispatch device times, and how
//! it was timed.

/// One dispatch of a finished sequence.
#[derive(Clone, Debug)]
pub struct Dispatch {
    /// What the recording called it.
    pub label: String,
    /// Device nanoseconds; `None` when the device has no timestamps, the
    /// dispatch was past the timed capacity, or the sequence was timed as a
    /// whole ([`Timing::Span`]).
    pub ns: Option<f64>,
    /// The kernel's name ([`crate::vk::KernelSpec::name`]).
    pub kernel: &'static str,
    /// The kernel walks a recurrence's steps ([`crate::vk::KernelSpec::recurrence`]).
    pub recurrence: bool,
}

/// Per-dispatch device times of a finished sequence.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// Every dispatch, in recording order.
    pub dispatches: Vec<Dispatch>,
    /// Nanoseconds from the sequence's first command to its last, for a
    /// sequence timed as a whole.
    pub span_ns: Option<f64>,
}

/// How a sequence is timed on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// A timestamp before and after every dispatch: the per-kernel
    /// breakdown. Each pair waits for its dispatch to finish, so dispatches
    /// that do not depend on each other cannot overlap.
    PerDispatch,
    /// One timestamp at the start and one at the end, as CUDA events around a
    /// graph: nothing is serialized that the barriers do not serialize.
    Span,
}

/// The kernel a dispatch label names, for per-kernel sums:
/// `gemm 8192x1536x256 tb` stays, `gru.l1 fwd recurrence` → `gru fwd recurrence`,
/// `adamw head.bias` → `adamw`.
pub fn kernel_of(label: &str) -> String {
    if label.starts_with("gemm") {
        return label.to_string();
    }
    if let Some(rest) = label.strip_prefix("gru.l") {
        return format!("gru{}", rest.trim_start_matches(|c: char| c.is_ascii_digit()));
    }
    label.split(' ').next().unwrap_or(label).to_string()
}

impl Timings {
    /// Milliseconds per kernel ([`kernel_of`] of each label), largest first.
    pub fn per_kernel_ms(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for d in &self.dispatches {
            let Some(ns) = d.ns else { continue };
            let k = kernel_of(&d.label);
            match out.iter_mut().find(|(n, _)| *n == k) {
                Some(x) => x.1 += ns / 1e6,
                None => out.push((k, ns / 1e6)),
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }

    /// Sum of the timed dispatches, in milliseconds, or for a sequence timed
    /// as a whole its span (`None` if nothing was timed).
    pub fn total_ms(&self) -> Option<f64> {
        let timed: Vec<f64> = self.dispatches.iter().filter_map(|d| d.ns).collect();
        if timed.is_empty() {
            return self.span_ns.map(|ns| ns / 1e6);
        }
        Some(timed.iter().sum::<f64>() / 1e6)
    }
}
