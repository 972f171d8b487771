//! Length bisect: the same data capped at 64, 128, 256, … positions, each run
//! through rungs 2–11 (isolated, by `ladder::run`, up to the first failing
//! rung), then a binary search between the last good and the first bad length
//! for the smallest failing one, with the first rung, tensor, position and
//! token where it fails.

use std::sync::Arc;

use serde::Serialize;

use super::{Event, LadderError, LadderSpec, Mode, Precision, Rung, RungResult, RungTensor, Setup, Status, run};
use crate::dataset::Batch;
use crate::engine::gpu::Context;
use crate::model::{Config, Params};
use crate::step::Fault;
use crate::step::StepOptions;

/// One length tried.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Probe {
    /// Positions (the row holds len + 1 tokens).
    pub len: usize,
    pub failed: bool,
    /// The first rung (in ladder order) that failed.
    pub rung: Option<String>,
    /// Its first failing tensor.
    pub tensor: Option<String>,
    /// The first position whose slice of that tensor is over the tolerance.
    pub position: Option<usize>,
    /// The input token at that position.
    pub token: Option<u8>,
    /// That slice's relative L2 error.
    pub position_rel_l2: Option<f64>,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct BisectReport {
    pub fault: Option<String>,
    pub probes: Vec<Probe>,
    /// The longest length that passed below the smallest failing one.
    pub last_good: Option<usize>,
    pub smallest_failing: Option<usize>,
    /// The probe at the smallest failing length.
    pub failure: Option<Probe>,
}

/// Lengths 64, 128, … up to `max_len` (and `max_len` itself).
pub fn doubling(max_len: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut l = 64;
    while l < max_len {
        out.push(l);
        l *= 2;
    }
    out.push(max_len);
    out
}

fn probe(
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    row: &[u8],
    len: usize,
    fault: Option<Fault>,
) -> Result<Probe, LadderError> {
    let tokens = &row[..len + 1];
    let batch = Batch::from_rows(&[tokens]).map_err(|e| LadderError::Input(e.to_string()))?;
    let setup = Setup {
        cfg: cfg.clone(),
        params: params.clone(),
        batch,
        opts: StepOptions::default(),
        mode: Mode::Isolated,
        precision: Precision::F32,
    };
    let spec =
        LadderSpec { fault, end_to_end: false, stop_at_failure: true, ..LadderSpec::new(Rung::MODEL.to_vec(), setup) };
    let mut failed: Option<(Rung, RungResult, Vec<RungTensor>)> = None;
    run(ctx, spec, |e| {
        if let Event::Finished(rung, Ok(r), tensors) = e
            && r.status == Status::Fail
        {
            failed = Some((rung, r.clone(), tensors));
        }
    })?;
    let mut p =
        Probe { len, failed: false, rung: None, tensor: None, position: None, token: None, position_rel_l2: None };
    if let Some((id, r, tensors)) = failed {
        p.failed = true;
        p.rung = Some(id.id().to_string());
        let case = r.cases.iter().find(|c| c.status == Status::Fail).expect("a failing rung has a failing case");
        p.tensor = Some(case.name.clone());
        if let Some(t) = tensors.iter().find(|t| t.name == case.name)
            && t.shape.len() >= 2
            && t.shape[0] == len
        {
            let per = t.cpu.len() / len;
            for (pos, &tok) in tokens.iter().enumerate().take(len) {
                let (mut d, mut w) = (0.0f64, 0.0f64);
                let mut bad_nonfinite = false;
                for i in pos * per..(pos + 1) * per {
                    let (g, c) = (t.gpu[i] as f64, t.cpu[i] as f64);
                    bad_nonfinite |= !g.is_finite() && c.is_finite();
                    d += (g - c).powi(2);
                    w += c * c;
                }
                let rel = if w > 0.0 { (d / w).sqrt() } else { d.sqrt() };
                if bad_nonfinite || !(rel <= case.tolerance) {
                    p.position = Some(pos);
                    p.token = Some(tok);
                    p.position_rel_l2 = Some(rel);
                    break;
                }
            }
        }
    }
    Ok(p)
}

/// Runs the bisect on one row of tokens (at least `max_len + 1` of them).
/// `progress` sees every probe as it finishes.
#[allow(clippy::too_many_arguments)]
pub fn bisect(
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    row: &[u8],
    max_len: usize,
    fault: Option<Fault>,
    mut progress: impl FnMut(&Probe),
) -> Result<BisectReport, LadderError> {
    if max_len < 1 || row.len() < max_len + 1 {
        return Err(LadderError::Input(format!(
            "bisect needs {} tokens for {max_len} positions; the data has {}",
            max_len + 1,
            row.len()
        )));
    }
    let mut probes = Vec::new();
    let mut run = |len: usize, probes: &mut Vec<Probe>| -> Result<Probe, LadderError> {
        let p = probe(ctx, cfg, params, row, len, fault)?;
        progress(&p);
        probes.push(p.clone());
        Ok(p)
    };
    let mut last_good = None;
    let mut first_bad = None;
    for len in doubling(max_len) {
        let p = run(len, &mut probes)?;
        if p.failed {
            first_bad = Some(p);
            break;
        }
        last_good = Some(len);
    }
    let Some(mut bad) = first_bad else {
        return Ok(BisectReport {
            fault: fault.map(|f| f.name().to_string()),
            probes,
            last_good,
            smallest_failing: None,
            failure: None,
        });
    };
    // Failing lengths are assumed to stay failing above the smallest one.
    let mut good = last_good.unwrap_or(0);
    while bad.len - good > 1 {
        let mid = good + (bad.len - good) / 2;
        let p = run(mid, &mut probes)?;
        if p.failed {
            bad = p;
        } else {
            good = mid;
        }
    }
    Ok(BisectReport {
        fault: fault.map(|f| f.name().to_string()),
        probes,
        last_good: (good > 0).then_some(good),
        smallest_failing: Some(bad.len),
        failure: Some(bad),
    })
}
