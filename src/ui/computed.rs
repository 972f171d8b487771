//! A computed sequence: the CPU trace of one row and the per-position
//! summaries the panels draw, built once on the worker thread.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::reference::Trace;
use crate::model::Config;

use crate::session::state::ConfigName;

/// What was computed: enough to say so in the UI and to match a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    pub dataset_name: String,
    pub config: ConfigName,
    pub seed: u64,
    pub offset: usize,
    pub len: usize,
    /// Where the parameters came from, in a few words (`Weights::describe`).
    pub model: String,
}

/// A dense row-major matrix of `f32`, the unit the heatmap draws.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn get(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.cols + c]
    }
}

pub struct Computed {
    /// Increases with every computation; caches key on it.
    pub generation: u64,
    pub spec: JobSpec,
    pub cfg: Config,
    /// The row's tokens: `t + 1` bytes; position `i` reads `tokens[i]`, predicts `tokens[i + 1]`.
    pub tokens: Vec<u8>,
    /// Positions.
    pub t: usize,
    pub trace: Trace<f32>,
    pub loss: f64,
    /// Per position: any per-position traced value is NaN or ±Inf.
    pub non_finite: Vec<bool>,
    /// `[t, A]`: `‖g_t‖ · |c_t[f]|`, position × feature of the `W_ctx` contribution.
    pub ctx_grad: Arc<Matrix>,
    pub elapsed: Duration,
    /// The GPU's trace of the same row, or why there is none.
    pub gpu: Result<GpuTrace, String>,
    /// The per-token guard's cap the traces ran with, and the positions it capped (CPU).
    pub token_cap: Option<f64>,
    pub capped: usize,
}

/// The Vulkan engine's values of the per-position tensors, by the CPU trace's names.
#[derive(Clone, Debug, Default)]
pub struct GpuTrace {
    pub values: std::collections::HashMap<String, Vec<f32>>,
    /// Per position: the largest |gpu − cpu| over every per-position tensor
    /// (infinite where one side is non-finite and the other is not).
    pub divergence: Vec<f32>,
    /// Per position: the tensor holding that largest difference.
    pub worst_tensor: Vec<String>,
    /// Per position: any GPU value is NaN or ±Inf.
    pub non_finite: Vec<bool>,
    /// GPU loss of the row.
    pub loss: f64,
    pub elapsed: Duration,
}

impl GpuTrace {
    /// Compares the GPU's values with the CPU trace, position by position.
    pub fn new(
        values: std::collections::HashMap<String, Vec<f32>>,
        cpu: &Trace<f32>,
        t: usize,
        loss: f64,
        elapsed: Duration,
    ) -> GpuTrace {
        let mut divergence = vec![0.0f32; t];
        let mut worst_tensor = vec![String::new(); t];
        let mut non_finite = vec![false; t];
        let mut names: Vec<&String> = values.keys().collect();
        names.sort();
        for name in names {
            let (Some(c), g) = (cpu.get(name), &values[name]) else { continue };
            if t == 0 || c.data.len() != g.len() || g.len() % t != 0 {
                continue;
            }
            let row = g.len() / t;
            for pos in 0..t {
                let span = pos * row..(pos + 1) * row;
                for (&cv, &gv) in c.data[span.clone()].iter().zip(&g[span]) {
                    if !gv.is_finite() {
                        non_finite[pos] = true;
                    }
                    let d = if cv.is_finite() && gv.is_finite() {
                        (gv - cv).abs()
                    } else if cv.to_bits() == gv.to_bits() || (cv.is_nan() && gv.is_nan()) {
                        0.0
                    } else {
                        f32::INFINITY
                    };
                    if d > divergence[pos] {
                        divergence[pos] = d;
                        worst_tensor[pos] = name.clone();
                    }
                }
            }
        }
        GpuTrace { values, divergence, worst_tensor, non_finite, loss, elapsed }
    }
}

impl Computed {
    /// Builds the summaries from a finished trace.
    pub fn new(
        generation: u64,
        spec: JobSpec,
        cfg: Config,
        tokens: Vec<u8>,
        trace: Trace<f32>,
        elapsed: Duration,
    ) -> Self {
        let t = tokens.len() - 1;
        let loss = trace.get("loss.value").map(|v| v.data[0] as f64).unwrap_or(f64::NAN);
        let mut non_finite = vec![false; t];
        for (name, tensor) in trace.iter() {
            // Activations are time-major `[T, B = 1, …]`; parameter gradients are not per position.
            if name.starts_with("grad.") || tensor.shape.len() < 2 || tensor.shape[0] != t || tensor.shape[1] != 1 {
                continue;
            }
            let row = tensor.data.len() / t.max(1);
            for (pos, chunk) in tensor.data.chunks(row.max(1)).enumerate().take(t) {
                if chunk.iter().any(|v| !v.is_finite()) {
                    non_finite[pos] = true;
                }
            }
        }
        let ctx_grad = Arc::new(ctx_grad_matrix(&trace, t, cfg.vocab, cfg.attn_dim));
        let gpu = Err("not computed".to_string());
        Computed {
            generation,
            spec,
            cfg,
            tokens,
            t,
            trace,
            loss,
            non_finite,
            ctx_grad,
            elapsed,
            gpu,
            token_cap: None,
            capped: 0,
        }
    }

    /// Row `pos` of a time-major GPU tensor (empty without the GPU or the tensor).
    pub fn gpu_row(&self, name: &str, pos: usize) -> &[f32] {
        match self.gpu.as_ref().ok().and_then(|g| g.values.get(name)) {
            Some(v) if self.t > 0 && pos < self.t && v.len() % self.t == 0 => {
                let n = v.len() / self.t;
                &v[pos * n..(pos + 1) * n]
            }
            _ => &[],
        }
    }

    /// Non-finite at `pos` on either engine.
    pub fn non_finite_at(&self, pos: usize) -> bool {
        self.non_finite.get(pos).copied().unwrap_or(false)
            || self.gpu.as_ref().is_ok_and(|g| g.non_finite.get(pos).copied().unwrap_or(false))
    }

    /// The position of the largest GPU–CPU difference (`None` without the GPU).
    pub fn worst_divergence(&self) -> Option<usize> {
        let g = self.gpu.as_ref().ok()?;
        (0..g.divergence.len()).rev().max_by(|&a, &b| g.divergence[a].total_cmp(&g.divergence[b]))
    }

    /// Row `pos` of a time-major traced tensor, or an empty slice if it is missing.
    pub fn row(&self, name: &str, pos: usize) -> &[f32] {
        match self.trace.get(name) {
            Some(tensor) if self.t > 0 && pos < self.t => {
                let n = tensor.data.len() / self.t;
                &tensor.data[pos * n..(pos + 1) * n]
            }
            _ => &[],
        }
    }

    /// A per-position scalar (`loss.token`, `ctx.token_norm`).
    pub fn scalar(&self, name: &str, pos: usize) -> f32 {
        self.row(name, pos).first().copied().unwrap_or(f32::NAN)
    }

    /// All positions of a per-position scalar.
    pub fn series(&self, name: &str) -> Vec<f32> {
        self.trace.get(name).map(|t| t.data.clone()).unwrap_or_default()
    }

    /// Attention weights of head `head` as `[t, W]` (slot `w` is key position `pos + 1 + w - W`).
    pub fn attention(&self, head: usize) -> Matrix {
        let (nh, w) = (self.cfg.heads, self.cfg.window);
        let mut data = Vec::with_capacity(self.t * w);
        if let Some(a) = self.trace.get("ctx.attn") {
            for pos in 0..self.t {
                let base = (pos * nh + head.min(nh - 1)) * w;
                data.extend_from_slice(&a.data[base..base + w]);
            }
        }
        Matrix { rows: self.t, cols: w, data }
    }

    /// The next position after `from` (wrapping) where a value is non-finite.
    pub fn next_non_finite(&self, from: usize) -> Option<usize> {
        (1..=self.t).map(|k| (from + k) % self.t.max(1)).find(|&p| self.non_finite_at(p))
    }

    /// The position of the largest per-token loss (a NaN loss counts as the worst).
    pub fn worst_loss(&self) -> Option<usize> {
        let losses = self.series("loss.token");
        let key = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
        // `rev`: among equal losses `max_by` keeps the last, i.e. the first position.
        (0..losses.len()).rev().max_by(|&a, &b| key(losses[a]).total_cmp(&key(losses[b])))
    }

    /// The `k` most likely next bytes at `pos`: (byte, probability), by softmax of `head.logits`.
    pub fn top_k(&self, pos: usize, k: usize) -> Vec<(u8, f32)> {
        let logits = self.row("head.logits", pos);
        let max = logits.iter().copied().filter(|v| v.is_finite()).fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f64> = logits.iter().map(|&l| ((l - max) as f64).exp()).collect();
        let sum: f64 = exps.iter().sum();
        let mut probs: Vec<(u8, f32)> = exps.iter().enumerate().map(|(i, e)| (i as u8, (e / sum) as f32)).collect();
        probs.sort_by(|a, b| b.1.total_cmp(&a.1));
        probs.truncate(k);
        probs
    }
}

/// `‖g_t‖ · |c_t[f]|` with `g_t` the `loss.dlogits` row and `c_t` the `ctx.c` row.
fn ctx_grad_matrix(trace: &Trace<f32>, t: usize, v: usize, a: usize) -> Matrix {
    let (Some(dl), Some(c)) = (trace.get("loss.dlogits"), trace.get("ctx.c")) else {
        return Matrix { rows: t, cols: a, data: vec![f32::NAN; t * a] };
    };
    let mut data = Vec::with_capacity(t * a);
    for pos in 0..t {
        let g = &dl.data[pos * v..(pos + 1) * v];
        let norm = g.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt() as f32;
        data.extend(c.data[pos * a..(pos + 1) * a].iter().map(|&x| norm * x.abs()));
    }
    Matrix { rows: t, cols: a, data }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    /// A trace with only the per-position scalars, some of them non-finite.
    fn computed(losses: &[f32]) -> Computed {
        let t = losses.len();
        let mut trace = Trace::new();
        trace.push("loss.token", Tensor::from_vec(&[t, 1], losses.to_vec()));
        trace.push("ctx.token_norm", Tensor::from_vec(&[t, 1], vec![1.0; t]));
        trace.push("grad.head.bias", Tensor::from_vec(&[t, 1], vec![f32::NAN; t]));
        let spec = JobSpec {
            dataset_name: "x".into(),
            config: ConfigName::Tiny,
            seed: 0,
            offset: 0,
            len: t + 1,
            model: "seed 0".into(),
        };
        Computed::new(1, spec, Config::tiny(), vec![b'a'; t + 1], trace, Duration::ZERO)
    }

    #[test]
    fn gpu_divergence_per_position() {
        // Two positions of a `[t = 2, 1, 3]` tensor: the GPU is off by 0.5 at
        // position 1, and has a NaN the CPU does not at position 0 of another.
        let mut trace = Trace::new();
        trace.push("a", Tensor::from_vec(&[2, 1, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        trace.push("b", Tensor::from_vec(&[2, 1, 1], vec![1.0, f32::NAN]));
        let mut gpu = std::collections::HashMap::new();
        gpu.insert("a".to_string(), vec![1.0, 2.0, 3.0, 4.0, 5.5, 6.0]);
        let g = GpuTrace::new(gpu.clone(), &trace, 2, 1.0, Duration::ZERO);
        assert_eq!(g.divergence, [0.0, 0.5]);
        assert_eq!(g.worst_tensor[1], "a");
        assert_eq!(g.non_finite, [false, false]);
        gpu.insert("b".to_string(), vec![f32::NAN, f32::NAN]);
        let g = GpuTrace::new(gpu, &trace, 2, 1.0, Duration::ZERO);
        assert_eq!(g.divergence[0], f32::INFINITY, "a new NaN is the worst divergence");
        assert_eq!(g.divergence[1], 0.5, "a NaN on both sides is no divergence");
        assert_eq!(g.non_finite, [true, true]);

        let mut c = computed(&[1.0, 2.0]);
        c.gpu = Ok(g);
        assert_eq!(c.worst_divergence(), Some(0));
        assert_eq!(c.next_non_finite(1), Some(0), "GPU non-finite values count");
    }

    #[test]
    fn non_finite_positions_and_worst_loss() {
        let c = computed(&[1.0, f32::NAN, 2.0, f32::INFINITY, 0.5]);
        // Parameter gradients are not per position and do not count.
        assert_eq!(c.non_finite, [false, true, false, true, false]);
        assert_eq!(c.next_non_finite(0), Some(1));
        assert_eq!(c.next_non_finite(1), Some(3));
        assert_eq!(c.next_non_finite(3), Some(1), "wraps around");
        assert_eq!(c.worst_loss(), Some(1), "a NaN loss is the worst");
        let clean = computed(&[1.0, 3.0, 2.0]);
        assert_eq!(clean.next_non_finite(0), None);
        assert_eq!(clean.worst_loss(), Some(1));
    }
}
