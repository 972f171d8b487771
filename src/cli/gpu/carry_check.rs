//! `dualscope ladder --carry-check K`: one row of K·T positions passed whole
//! against K chunks of T with the state carried (`ladder::carry`), printed as
//! a table or JSON.

use super::ladder::LadderArgs;
use super::{Inputs, load_inputs, write_report};
use crate::cli::common::{CliError, emit};
use crate::ladder::carry;

pub(super) fn run(a: &LadderArgs, k: usize) -> Result<i32, CliError> {
    if k == 0 {
        return Err(CliError::Usage("--carry-check must be at least 1 (chunks)".into()));
    }
    let Inputs { cfg, params, ds } = load_inputs(&a.model, &a.data, &a.out)?;
    // T: --len, else a length no tile divides that leaves the window room.
    let t = match a.len {
        Some(0) => return Err(CliError::Usage("--len must be at least 1".into())),
        Some(t) => t,
        None => 2 * cfg.window + 3,
    };
    let total = k.checked_mul(t).and_then(|n| n.checked_add(1)).unwrap_or(usize::MAX);
    crate::engine::inputs::check_batch(&cfg, 1, total - 1, 8, &format!("--carry-check {k} × --len {t}"))?;
    let offset = a.offset.unwrap_or(0);
    let row = ds.window(offset, total).map_err(|e| CliError::Usage(format!("--carry-check {k} --len {t}: {e}")))?;
    // The GPU side runs where a device opens; otherwise it is reported as not run.
    let ctx = crate::engine::open_context(a.gpu.device).map(std::sync::Arc::new).map_err(|e| e.to_string());
    let report = carry::check(&cfg, &params, &row, k, t, ctx.as_ref().map_err(|e| e.clone()))
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let value = serde_json::to_value(&report).expect("report serializes");
    write_report(&a.out, &value)?;
    emit(a.json, value, || {
        println!(
            "carry check: {} chunks of T = {} (W = {}) against one pass of {} positions in f64, CPU f32",
            k,
            t,
            cfg.window,
            k * t
        );
        println!("{:>6} {:>14} {:>14} {:>18}", "chunk", "logits rel", "loss rel", "from zero, W-1 head");
        for c in &report.per_chunk {
            let z = c.from_zero_head.as_ref().map_or("-".to_string(), |z| format!("{:.3e}", z.rel_l2));
            println!("{:>6} {:>14.3e} {:>14.3e} {:>18}", c.chunk, c.logits.rel_l2, c.token_loss.rel_l2, z);
        }
        let worst = report.last_chunk_grads.iter().max_by(|x, y| x.cmp.rel_l2.total_cmp(&y.cmp.rel_l2));
        if let Some(g) = worst {
            println!(
                "last chunk's gradients, f32 vs f64 from the same state: worst {} at {:.3e}",
                g.tensor, g.cmp.rel_l2
            );
        }
        println!(
            "loss: whole {:.6}, chunked {:.6}; tolerances logits {:.0e}, loss {:.0e}, gradients {:.0e}",
            report.whole_loss,
            report.chunked_loss,
            report.logits_tolerance,
            report.loss_tolerance,
            report.grad_tolerance
        );
        if let Some(g) = &report.gpu {
            for c in &g.per_chunk {
                println!("gpu chunk {}: logits {:.3e}, loss {:.3e}", c.chunk, c.logits.rel_l2, c.loss_rel);
            }
            let worst = g.last_chunk_grads.iter().max_by(|x, y| x.cmp.rel_l2.total_cmp(&y.cmp.rel_l2));
            if let Some(w) = worst {
                println!("gpu last chunk's gradients vs the CPU in f64: worst {} at {:.3e}", w.tensor, w.cmp.rel_l2);
            }
        }
        for n in &report.not_run {
            println!("not run: {n}");
        }
        println!("{}", if report.passed { "passed" } else { "FAILED" });
    });
    Ok(match (report.passed, report.not_run.is_empty() || a.allow_not_run) {
        (true, true) => 0,
        _ => 1,
    })
}
