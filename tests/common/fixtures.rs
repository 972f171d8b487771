//! Model inputs and error measures shared by the engine, ladder and mixed
//! precision tests.

use dualscope::dataset::Batch;
use dualscope::ladder::{self, Mode, ModelLadder, Rung, Status};
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;
use dualscope::step::Precision;
use dualscope::step::StepOptions;

/// `docs.jsonl` in `dir`: one JSON object `{"text": text(i)}` a line for
/// `i` in `0..n`; returns its path.
pub fn docs_jsonl(dir: &std::path::Path, n: usize, text: impl Fn(usize) -> String) -> std::path::PathBuf {
    let docs: Vec<String> = (0..n).map(|i| serde_json::json!({ "text": text(i) }).to_string()).collect();
    let data = dir.join("docs.jsonl");
    std::fs::write(&data, docs.join("\n")).unwrap();
    data
}

/// Widths that divide no tile: H = 13, A = 6 over 3 heads, W = 4.
pub fn odd() -> Config {
    Config { vocab: 256, d_embed: 7, hidden: 13, layers: 2, attn_dim: 6, heads: 3, window: 4, batch: 3, seq_len: 11 }
}

/// Rows of the given lengths, random bytes from `seed`, so that masks and
/// padding matter.
pub fn random_batch(seed: u64, lens: &[usize]) -> Batch {
    let mut rng = Rng::new(seed);
    let rows: Vec<Vec<u8>> = lens.iter().map(|&n| (0..n).map(|_| (rng.next_u64() % 256) as u8).collect()).collect();
    Batch::from_rows(&rows).unwrap()
}

/// A ladder set-up: parameters initialised from `seed`, a [`random_batch`]
/// from the same seed, the default step options.
pub fn ladder_setup(cfg: &Config, mode: Mode, lens: &[usize], seed: u64, precision: Precision) -> ladder::Setup {
    ladder::Setup {
        cfg: cfg.clone(),
        params: Params::init(cfg, seed),
        batch: random_batch(seed, lens),
        opts: StepOptions::default(),
        mode,
        precision,
    }
}

/// `(‖x − want‖², ‖want‖²)` in f64, summed in order.
fn squared_sums<W: Copy + Into<f64>>(x: &[f32], want: &[W]) -> (f64, f64) {
    let (mut d, mut w) = (0.0f64, 0.0f64);
    for (&x, &y) in x.iter().zip(want) {
        let y: f64 = y.into();
        d += (x as f64 - y).powi(2);
        w += y * y;
    }
    (d, w)
}

/// `(‖x − want‖, ‖want‖)` in f64.
pub fn l2_parts<W: Copy + Into<f64>>(x: &[f32], want: &[W]) -> (f64, f64) {
    let (d, w) = squared_sums(x, want);
    (d.sqrt(), w.sqrt())
}

/// ‖x − want‖ / ‖want‖ in f64 (absolute when `want` is zero).
pub fn rel_l2<W: Copy + Into<f64>>(x: &[f32], want: &[W]) -> f64 {
    let (d, w) = squared_sums(x, want);
    if w > 0.0 { (d / w).sqrt() } else { d.sqrt() }
}

/// A rung passes: no case failed or was not run, and every case is inside its
/// tolerance. A warning (an f16 headroom note, or the f64 distance) is a pass
/// with a note, as the ladder reports it.
pub fn assert_passes(r: &dualscope::ladder::RungResult, what: &str) {
    let bad: Vec<_> =
        r.cases.iter().filter(|c| c.status > Status::Warn || c.rel_l2.is_nan() || c.rel_l2 > c.tolerance).collect();
    assert!(r.status <= Status::Warn && bad.is_empty(), "{what}: {:?} {bad:#?}", r.status);
}

/// Every rung after the batch's and the end-to-end gate pass on `l`, the GRU
/// cases' errors printed.
pub fn run_every_rung(l: &mut ModelLadder, label: &str) {
    for &id in &Rung::ALL[1..] {
        let r = l.run(id).unwrap();
        assert_passes(&r, &format!("{label} {id}"));
        for c in r.cases.iter().filter(|c| c.name.starts_with("gru.")) {
            eprintln!("{label} {id} {}: rel L2 {:.2e} of {:.1e}", c.name, c.rel_l2, c.tolerance);
        }
    }
    let e2e = l.end_to_end().unwrap();
    assert_eq!(e2e.status, Status::Pass, "{label}: {e2e:?}");
}
