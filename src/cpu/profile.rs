//! Per-phase wall-clock timings of the CPU engine, for `bench --breakdown`.
//! Off by default; when off a span costs one relaxed atomic load.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static ENABLED: AtomicBool = AtomicBool::new(false);
static TIMES: Mutex<Vec<(&'static str, f64)>> = Mutex::new(Vec::new());

/// Turns recording on or off and clears what was recorded.
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
    TIMES.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Total milliseconds per phase since the last `enable`/`take`, in first-seen order.
pub fn take() -> Vec<(&'static str, f64)> {
    let mut times = TIMES.lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<(&'static str, f64)> = Vec::new();
    for &(name, ms) in times.iter() {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 += ms,
            None => out.push((name, ms)),
        }
    }
    times.clear();
    out
}

/// Records the time from its creation to its drop under `name`.
pub struct Span {
    name: &'static str,
    start: Option<Instant>,
}

pub fn span(name: &'static str) -> Span {
    Span { name, start: ENABLED.load(Ordering::Relaxed).then(Instant::now) }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(s) = self.start {
            let ms = s.elapsed().as_secs_f64() * 1e3;
            TIMES.lock().unwrap_or_else(|e| e.into_inner()).push((self.name, ms));
        }
    }
}
