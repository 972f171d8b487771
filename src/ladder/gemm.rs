//! Rung 1, `gemm`: every matrix product the model's training step uses for a
//! configuration, and shapes that do not divide the kernel's 128×64×16 tiles,
//! on the Vulkan engine against the CPU reference in f64.

use std::time::Instant;

use super::compare::compare;
use super::{CaseResult, LadderError, Precision, Rung, RungResult, RungTensor, Status};
use crate::engine::gpu::{Context, VkError};
use crate::engine::gpu::{GemmPath, GemmShape};
use crate::model::Config;
use crate::rng::Rng;
use crate::step::Fault;
use crate::step::GemmChoice;
use crate::tensor;
use crate::vk::gemm::{self, MatRef};
use crate::vk::{Buffer, Sequence};

/// Guard elements on each side of every GPU output.
const GUARD: usize = 64;
/// The guards' value: a signalling NaN with a payload, compared bit for bit.
/// Inside a non-accumulating output it also marks elements never written,
/// which then show up as non-finite GPU values.
const SENTINEL_BITS: u32 = 0x7fa5_a5a5;
/// A GPU error this many times the f32 CPU engine's, though within
/// tolerance, is a warning: a diagnostic that the kernel loses accuracy.
const WARN_RATIO: f64 = 16.0;
/// ... unless it is below this floor, where both are at rounding level.
const WARN_FLOOR: f64 = 1e-6;

/// The relative L2 tolerance of an f32 product with inner dimension `k`.
///
/// Each output is a dot product of `k` f32 terms accumulated in f32. With unit
/// roundoff `u = 2^-24 ≈ 6e-8` and errors that behave like a random walk, the
/// error of a sum of `k` terms grows like `sqrt(k)·u` relative to the
/// magnitude of the terms; for random inputs that is also the scale of the
/// result, so a correct kernel shows rel L2 ≈ 0.3–1 × sqrt(k)·u (about 4e-6 at
/// k = 4096, and the f32 CPU engine shows the same). The bound is 1e-5 for
/// k ≤ 4096 (≥ 2.5× that worst typical value, while a wrong tile, index or
/// transpose gives errors of order 1) and grows as sqrt(k) beyond.
pub fn f32_tolerance(k: usize) -> f64 {
    1e-5 * (k as f64 / 4096.0).sqrt().max(1.0)
}

/// The relative L2 tolerance of a product whose inputs are rounded to f16 and
/// accumulated in f32, against the f64 product of the unrounded inputs.
///
/// Rounding to f16 gives each input a relative error of at most `2^-11 ≈
/// 4.9e-4` (about 2.8e-4 rms for random mantissas), so each term of a dot
/// product carries about 4e-4 rms; terms of random sign add up like the
/// signal itself, so the result's rel L2 stays near 4e-4 whatever `k` is (the
/// f32 accumulation adds the `f32_tolerance` scale on top, negligible here).
/// The bound is 2e-3: five times that, while a wrong tile, index or transpose
/// gives errors of order 1. The rung's CPU column computes with the same
/// rounded inputs, so that it shows what the rounding alone costs.
pub fn f16_tolerance() -> f64 {
    2e-3
}

/// The same for bfloat16 inputs: 7 mantissa bits, so at most `2^-8 ≈ 3.9e-3`
/// per input (about 2.3e-3 rms), about 3.2e-3 per term; the bound is five
/// times that.
pub fn bf16_tolerance() -> f64 {
    1.6e-2
}

/// Rounds to bfloat16 (to nearest, ties to even), as the kernel does.
pub fn round_bf16(v: f32) -> f32 {
    let u = v.to_bits();
    if u & 0x7f80_0000 == 0x7f80_0000 {
        return v;
    }
    let r = u.wrapping_add(0x7fff + ((u >> 16) & 1));
    f32::from_bits(r & 0xffff_0000)
}

/// One product of the rung: where the model uses it, its shape, and the
/// scale of its unit-normal inputs (1, or [`RANGE_SCALE`]).
#[derive(Clone, Debug)]
pub struct GemmCase {
    pub name: String,
    pub shape: GemmShape,
    pub scale: f32,
}

fn case(name: &str, m: usize, n: usize, k: usize, ta: bool, tb: bool, accumulate: bool) -> GemmCase {
    GemmCase { name: name.to_string(), shape: GemmShape { m, n, k, ta, tb, accumulate }, scale: 1.0 }
}

/// The inputs' scale in the range cases of the f16 and bf16 rungs: inputs of
/// about ±128 (well inside f16's range) whose products, about 2^14 each, sum
/// to a few 10^5 over K = 300, past f16's largest value 65504. Inputs in f16,
/// accumulation in f32 keeps them; an accumulator kept in f16 overflows to
/// Inf. A power of two, so the rounding of the inputs is that of the
/// unscaled case and the tolerance is the same.
pub const RANGE_SCALE: f32 = 128.0;

/// [`gemm_cases`], and for f16 and bf16 precision two range cases (products
/// that need f32 accumulation, see [`RANGE_SCALE`]).
pub fn gemm_cases_for(cfg: &Config, precision: Precision) -> Vec<GemmCase> {
    let mut cases = gemm_cases(cfg);
    if precision.is_mixed() {
        for (ta, tb, accumulate) in [(false, true, false), (true, false, true)] {
            let mut c = case("range (sums past f16's 65504)", 65, 33, 300, ta, tb, accumulate);
            c.scale = RANGE_SCALE;
            cases.push(c);
        }
    }
    cases
}

/// The products of one training step of `cfg` (docs/model.md; activations are
/// `[T·B, width]` row-major, weights `[out, in]` as PyTorch stores them), then
/// odd shapes in all four transpose combinations.
pub fn gemm_cases(cfg: &Config) -> Vec<GemmCase> {
    let (rows, b) = (cfg.seq_len * cfg.batch, cfg.batch);
    let (d, h, a, v, g) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab, 3 * cfg.hidden);
    let mut cases = vec![
        // forward
        case("gru.input_proj.l0 (x·W_ih^T)", rows, g, d, false, true, false),
        case("gru.recurrence (h·W_hh^T)", b, g, h, false, true, false),
        case("ctx.qkv (s·W_q^T)", rows, a, h, false, true, false),
        case("head.tok (s·W_tok^T)", rows, v, h, false, true, false),
        case("head.ctx (+= c·W_ctx^T)", rows, v, a, false, true, true),
        // backward
        case("head.d_s (dlogits·W_tok)", rows, h, v, false, false, false),
        case("head.d_c (dlogits·W_ctx)", rows, a, v, false, false, false),
        case("head.d_W_tok (dlogits^T·s)", v, h, rows, true, false, false),
        case("head.d_W_ctx (dlogits^T·c)", v, a, rows, true, false, false),
        case("ctx.d_W_q (dq^T·s)", a, h, rows, true, false, false),
        case("ctx.d_s (+= dq·W_q)", rows, h, a, false, false, true),
        case("gru.d_W_hh (+= dgh^T·h_prev, one step)", g, h, b, true, false, true),
        case("gru.d_h_prev (dgh·W_hh)", b, h, g, false, false, false),
        case("gru.d_W_ih.l0 (dgi^T·x)", g, d, rows, true, false, false),
        case("gru.d_x.l0 (dgi·W_ih)", rows, d, g, false, false, false),
    ];
    if cfg.layers > 1 {
        cases.insert(1, case("gru.input_proj.l1+ (h·W_ih^T)", rows, g, h, false, true, false));
        cases.push(case("gru.d_W_ih.l1+ (dgi^T·h)", g, h, rows, true, false, false));
    }
    for &(m, n, k) in &[(1, 1, 1), (7, 33, 5), (33, 7, 257), (257, 65, 33)] {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            cases.push(case("odd", m, n, k, ta, tb, false));
        }
    }
    cases.push(case("odd", 1000, 7, 33, false, true, true));
    cases.push(case("odd", 1, 1000, 257, true, false, true));
    cases
}

/// The relative L2 tolerance of a product of inner dimension `k` in `precision`.
pub(super) fn tolerance(precision: Precision, k: usize) -> f64 {
    match precision {
        Precision::F32 => f32_tolerance(k),
        Precision::Bf16 => bf16_tolerance(),
        Precision::F16 => f16_tolerance(),
    }
}

/// A case's parameters as the table shows them, e.g. `m=65 n=33 k=300 tb`
/// (with the inputs' scale when it is not 1).
pub(super) fn case_params(c: &GemmCase) -> String {
    let shape = params(&c.shape);
    if c.scale == 1.0 { shape } else { format!("{shape} inputs×{}", c.scale) }
}

fn params(s: &GemmShape) -> String {
    let flag = |on: bool, name: &str| if on { format!(" {name}") } else { String::new() };
    format!("m={} n={} k={}{}{}{}", s.m, s.n, s.k, flag(s.ta, "ta"), flag(s.tb, "tb"), flag(s.accumulate, "acc"))
}

pub fn run(
    ctx: &Context,
    cfg: &Config,
    precision: Precision,
    seed: u64,
    choice: GemmChoice,
    fault: Option<Fault>,
) -> Result<RungResult, LadderError> {
    run_kept(ctx, cfg, precision, seed, choice, fault, false).map(|(r, _)| r)
}

/// [`run`], and with `keep` every product's values (GPU, f32 CPU, f64), one
/// tensor per case named by the case and its shape.
pub(super) fn run_kept(
    ctx: &Context,
    cfg: &Config,
    precision: Precision,
    seed: u64,
    choice: GemmChoice,
    fault: Option<Fault>,
    keep: bool,
) -> Result<(RungResult, Vec<RungTensor>), LadderError> {
    // The planted GEMM bugs replace the kernel in every precision (the mixed
    // step's engine does the same).
    let path = match fault {
        Some(Fault::GemmNoBounds) => GemmPath::FaultNoBounds,
        Some(Fault::F16AccumNoScale) => GemmPath::FaultF16Accum,
        _ => gemm::path_for(ctx, precision, choice)?,
    };
    let mut rng = Rng::new(seed);
    let (mut results, mut kept) = (Vec::new(), Vec::new());
    for c in gemm_cases_for(cfg, precision) {
        let (r, t) = run_case(ctx, &c, &mut rng, path, precision)?;
        if keep {
            kept.push(RungTensor { name: format!("{}: {}", r.name, r.params), ..t });
        }
        results.push(r);
    }
    let mut r = RungResult::new(Rung::Gemm, precision, results);
    r.gemm_path = Some(path.name().into());
    Ok((r, kept))
}

fn run_case(
    ctx: &Context,
    c: &GemmCase,
    rng: &mut Rng,
    path: GemmPath,
    precision: Precision,
) -> Result<(CaseResult, RungTensor), VkError> {
    let s = c.shape;
    let (m, n, k) = (s.m, s.n, s.k);
    let mut draw = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.normal() as f32 * c.scale).collect() };
    let a = draw(m * k);
    let b = draw(k * n);
    let c0 = if s.accumulate { draw(m * n) } else { vec![0.0; m * n] };

    // The reference: the same f32 inputs, exactly widened, in f64.
    let wide = |x: &[f32]| -> Vec<f64> { x.iter().map(|&v| v as f64).collect() };
    let mut want = wide(&c0);
    tensor::gemm(&mut want, m, n, k, &wide(&a), s.ta, &wide(&b), s.tb, s.accumulate);
    // The CPU column: f32 arithmetic on the inputs the kernel actually sees.
    let seen = |x: &[f32]| -> Vec<f32> {
        match path.input_precision() {
            Precision::F32 => x.to_vec(),
            Precision::Bf16 => x.iter().map(|&v| round_bf16(v)).collect(),
            Precision::F16 => x.iter().map(|&v| ::gemm::f16::from_f32(v).to_f32()).collect(),
        }
    };
    let (a_seen, b_seen) = (seen(&a), seen(&b));
    let mut cpu = c0.clone();
    let t0 = Instant::now();
    tensor::gemm(&mut cpu, m, n, k, &a_seen, s.ta, &b_seen, s.tb, s.accumulate);
    let cpu_ms = t0.elapsed().as_secs_f64() * 1e3;

    let sentinel = f32::from_bits(SENTINEL_BITS);
    let mut c_init = vec![sentinel; GUARD + m * n + GUARD];
    if s.accumulate {
        c_init[GUARD..GUARD + m * n].copy_from_slice(&c0);
    }
    let a_up = Buffer::upload_f32(ctx, "ladder.gemm.a.upload", &a)?;
    let b_up = Buffer::upload_f32(ctx, "ladder.gemm.b.upload", &b)?;
    let c_up = Buffer::upload_f32(ctx, "ladder.gemm.c.upload", &c_init)?;
    let a_dev = Buffer::device_f32(ctx, "ladder.gemm.a", a.len())?;
    let b_dev = Buffer::device_f32(ctx, "ladder.gemm.b", b.len())?;
    let c_dev = Buffer::device_f32(ctx, "ladder.gemm.c", c_init.len())?;
    let c_back = Buffer::readback_f32(ctx, "ladder.gemm.c.readback", c_init.len())?;
    // Split along K as the engine splits it (the weight gradients' long K).
    let scratch = gemm::split_scratch(ctx, "ladder.gemm.splitk", path, &s)?;
    let timings = {
        let mut seq = Sequence::new(ctx)?;
        seq.copy(&a_up, 0, &a_dev, 0, a_dev.bytes())?;
        seq.copy(&b_up, 0, &b_dev, 0, b_dev.bytes())?;
        seq.copy(&c_up, 0, &c_dev, 0, c_dev.bytes())?;
        let cm = MatRef { buf: &c_dev, offset: GUARD };
        let (am, bm) = (MatRef::whole(&a_dev), MatRef::whole(&b_dev));
        gemm::gemm_split(ctx, &mut seq, path, &s, am, bm, cm, scratch.as_ref())?;
        seq.copy(&c_dev, 0, &c_back, 0, c_dev.bytes())?;
        seq.submit()?
    };
    let got = c_back.read_f32()?;
    let guards = got[..GUARD].iter().chain(&got[GUARD + m * n..GUARD + m * n + GUARD]);
    let sentinel_ok = guards.into_iter().all(|x| x.to_bits() == SENTINEL_BITS);
    let out = &got[GUARD..GUARD + m * n];
    let gpu = compare(out, &want);
    let cpu_cmp = compare(&cpu, &want);

    // The contract is the precision's: a planted bug does not bring its own.
    let tolerance = tolerance(precision, k);
    let mut notes = Vec::new();
    if !sentinel_ok {
        notes.push("the kernel wrote outside its output (a guard value changed)".to_string());
    }
    if gpu.new_non_finite > 0 {
        notes.push(format!("{} non-finite GPU values where the CPU is finite", gpu.new_non_finite));
    }
    let within = gpu.rel_l2 <= tolerance; // false for a NaN error too
    if !within {
        notes.push(format!("rel L2 {:.3e} above the tolerance {tolerance:.1e}", gpu.rel_l2));
    }
    let status = if !notes.is_empty() {
        Status::Fail
    } else if gpu.rel_l2 > WARN_RATIO * cpu_cmp.rel_l2 && gpu.rel_l2 > WARN_FLOOR {
        notes.push(format!(
            "rel L2 {:.3e} is more than {WARN_RATIO}× the f32 CPU engine's {:.3e}",
            gpu.rel_l2, cpu_cmp.rel_l2
        ));
        Status::Warn
    } else {
        Status::Pass
    };
    let kept = RungTensor { name: String::new(), shape: vec![m, n], cpu, gpu: out.to_vec(), f64: want };
    let case = CaseResult {
        name: c.name.clone(),
        params: {
            let shape = case_params(c);
            match gemm::split_k_plan(path, &s, usize::MAX) {
                p if p.slices > 1 => format!("{shape} [{}, split-K {}×{}]", path.name(), p.slices, p.chunk),
                _ => format!("{shape} [{}]", path.name()),
            }
        },
        status,
        rel_l2: gpu.rel_l2,
        rel_l2_cpu_f32: cpu_cmp.rel_l2,
        rel_l2_gpu_f64: None,
        max_abs_err: gpu.max_abs_err,
        max_abs_index: gpu.max_abs_index,
        non_finite_cpu: cpu_cmp.non_finite_want,
        non_finite_gpu: gpu.non_finite_got,
        sentinel_ok,
        tolerance,
        gpu_ms: timings.total_ms(),
        cpu_ms,
        notes,
        headroom: None,
        worst_element: None,
    };
    Ok((case, kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_cover_the_model_and_odd_shapes() {
        let cases = gemm_cases(&Config::small());
        let has = |m, n, k, ta, tb| {
            cases.iter().any(|c| (c.shape.m, c.shape.n, c.shape.k, c.shape.ta, c.shape.tb) == (m, n, k, ta, tb))
        };
        assert!(has(1024, 384, 64, false, true), "input projection [T·B, 3H, D]");
        assert!(has(8, 384, 128, false, true), "recurrence [B, 3H, H]");
        assert!(has(1024, 256, 128, false, true), "logits [T·B, V, H]");
        assert!(has(256, 128, 1024, true, false), "d_W_tok with a transpose");
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            assert!(has(33, 7, 257, ta, tb));
        }
        assert!(cases.iter().any(|c| c.shape.accumulate));
    }

    #[test]
    fn tolerance_grows_past_4096() {
        assert_eq!(f32_tolerance(1), 1e-5);
        assert_eq!(f32_tolerance(4096), 1e-5);
        assert!((f32_tolerance(16384) - 2e-5).abs() < 1e-12);
    }
}
