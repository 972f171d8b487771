//! The progress bar of long commands (`ladder`, `bisect`, `audit`, `train`,
//! `drift`, `scan`, `growth`, `replay`, `precision-bisect`, `bench`): one line
//! on stderr, redrawn with `\r` at most ten times a second and cleared at the
//! end. It is drawn only when stderr is a terminal and neither `--json` nor
//! `--quiet` was given, so logs and pipes never see it.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Goes back to the line's start and erases it (ANSI "erase in line").
pub const CLEAR: &str = "\r\x1b[2K";

/// Cells between the brackets of a bar with a known total.
const BAR_CELLS: usize = 24;

/// The shortest time between two redraws.
const REDRAW: Duration = Duration::from_millis(100);

/// Whether a command draws its bar: stderr is a terminal, and neither
/// `--quiet` nor `--json` was given.
pub fn shown(quiet: bool, json: bool) -> bool {
    !quiet && !json && std::io::stderr().is_terminal()
}

/// A progress bar (see the module's text). Its methods take `&self` so that
/// an observer can hold it in a shared field.
pub struct Bar {
    on: bool,
    start: Instant,
    state: Mutex<State>,
}

struct State {
    what: String,
    total: Option<u64>,
    done: u64,
    note: String,
    /// The time left as the library estimates it (else from the counts).
    eta: Option<Duration>,
    last_draw: Option<Instant>,
    /// A bar line is on screen (and must be cleared before other output).
    drawn: bool,
}

impl Bar {
    /// A bar for `what` over `total` items (`None`: a count without a bar),
    /// drawn only when `on` (see [`shown`]), from its first update on (so
    /// that [`Bar::hidden_if`] can still hide it before anything is drawn).
    pub fn new(what: &str, total: Option<u64>, on: bool) -> Bar {
        let state =
            State { what: what.into(), total, done: 0, note: String::new(), eta: None, last_draw: None, drawn: false };
        Bar { on, start: Instant::now(), state: Mutex::new(state) }
    }

    /// This bar, hidden from now on when `hide` (for `--json` and `--quiet`).
    pub fn hidden_if(mut self, hide: bool) -> Bar {
        if hide {
            self.finish_and_clear();
            self.on = false;
        }
        self
    }

    fn with(&self, f: impl FnOnce(&mut State), force: bool) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
        self.draw(force);
    }

    /// One more item done.
    pub fn inc(&self, n: u64) {
        self.with(|s| s.done += n, false);
    }

    /// `done` items done, and the text after the counts.
    pub fn set(&self, done: u64, note: &str) {
        self.with(
            |s| {
                s.done = done;
                s.note = note.into();
            },
            false,
        );
    }

    /// `done` of `total` items, the library's estimate of the time left,
    /// and the text after the counts.
    pub fn set_all(&self, done: u64, total: u64, eta: Option<Duration>, note: &str) {
        self.with(
            |s| {
                s.done = done;
                s.total = Some(total);
                s.eta = eta;
                s.note = note.into();
            },
            false,
        );
    }

    /// The text after the counts (what is running now).
    pub fn set_message(&self, note: &str) {
        self.with(|s| s.note = note.into(), true);
    }

    /// Prints `line` on stdout with the bar moved out of its way.
    pub fn println(&self, line: impl AsRef<str>) {
        self.clear_line();
        println!("{}", line.as_ref());
        self.draw(true);
    }

    /// Prints `line` on stderr with the bar moved out of its way.
    pub fn eprintln(&self, line: impl AsRef<str>) {
        self.clear_line();
        eprintln!("{}", line.as_ref());
        self.draw(true);
    }

    /// Erases the bar for good (it is not drawn again).
    pub fn finish_and_clear(&self) {
        self.clear_line();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // A finished bar stays quiet: later calls see it as just drawn.
        s.last_draw = Some(Instant::now() + Duration::from_secs(86_400 * 365));
    }

    fn clear_line(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if self.on && s.drawn {
            let mut err = std::io::stderr();
            let _ = write!(err, "{CLEAR}");
            let _ = err.flush();
            s.drawn = false;
        }
    }

    fn draw(&self, force: bool) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let finished_bar = s.last_draw.is_some_and(|t| t > now);
        let complete = s.total.is_some_and(|t| s.done >= t);
        if finished_bar || !(force || complete) && s.last_draw.is_some_and(|t| now - t < REDRAW) {
            return;
        }
        s.last_draw = Some(now);
        let line = render(&s.what, s.done, s.total, now - self.start, s.eta, &s.note, width());
        let mut err = std::io::stderr();
        let _ = write!(err, "{CLEAR}{line}");
        let _ = err.flush();
        s.drawn = true;
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.clear_line();
    }
}

/// The terminal's width from `COLUMNS` (80 when unset or not a number).
fn width() -> usize {
    std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()).filter(|&w| w >= 20).unwrap_or(80)
}

/// `m:ss` (or `h:mm:ss`).
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// One bar line, at most `width - 1` characters (the last column left free
/// so that no terminal wraps it): `what [=====>    ]  42% 5/12 0:03 eta 0:04 note`,
/// or `what 5 done 0:03 note` without a total. The time left is `eta`, else
/// the elapsed time scaled by the items left, once one item is done.
pub fn render(
    what: &str,
    done: u64,
    total: Option<u64>,
    elapsed: Duration,
    eta: Option<Duration>,
    note: &str,
    width: usize,
) -> String {
    let mut line = match total {
        Some(t) => {
            let frac = if t == 0 { 1.0 } else { (done as f64 / t as f64).clamp(0.0, 1.0) };
            let full = (frac * BAR_CELLS as f64).floor() as usize;
            let mut cells = "=".repeat(full);
            if full < BAR_CELLS {
                cells.push('>');
                cells.push_str(&" ".repeat(BAR_CELLS - full - 1));
            }
            let left = match eta {
                Some(e) => Some(e),
                None if done > 0 && done < t => Some(elapsed.mul_f64((t - done) as f64 / done as f64)),
                None => None,
            };
            let eta =
                if done < t { left.map_or(String::new(), |e| format!(" eta {}", clock(e))) } else { String::new() };
            format!("{what} [{cells}] {:>3}% {done}/{t} {}{eta}", (frac * 100.0).floor() as u64, clock(elapsed))
        }
        None => format!("{what} {done} done {}", clock(elapsed)),
    };
    if !note.is_empty() {
        line.push(' ');
        line.push_str(note);
    }
    line.chars().take(width.saturating_sub(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_shows_its_share_and_counts() {
        let l = render("ladder", 3, Some(12), Duration::from_secs(6), None, "attn_fwd", 80);
        assert_eq!(l, "ladder [======>                 ]  25% 3/12 0:06 eta 0:18 attn_fwd");
        let done = render("ladder", 12, Some(12), Duration::from_secs(61), None, "", 80);
        assert_eq!(done, format!("ladder [{}] 100% 12/12 1:01", "=".repeat(BAR_CELLS)));
        let empty = render("x", 0, Some(4), Duration::ZERO, None, "", 80);
        assert!(empty.starts_with("x [>") && empty.contains("  0% 0/4") && !empty.contains("eta"), "{empty}");
    }

    #[test]
    fn a_bar_fits_the_terminal() {
        let note = "a".repeat(200);
        for w in [20, 40, 80, 132] {
            let l = render("training", 50, Some(100), Duration::from_secs(3), None, &note, w);
            assert_eq!(l.chars().count(), w - 1, "{l}");
        }
        // Without a total: a count.
        assert_eq!(render("scan", 7, None, Duration::from_secs(3725), None, "", 80), "scan 7 done 1:02:05");
        // The library's own estimate wins over the one from the counts.
        let l = render("scan", 1, Some(4), Duration::from_secs(1), Some(Duration::from_secs(90)), "", 80);
        assert!(l.ends_with("eta 1:30"), "{l}");
    }

    #[test]
    fn a_hidden_bar_writes_nothing_and_the_clear_sequence_erases_the_line() {
        let b = Bar::new("ladder", Some(3), false);
        b.inc(1);
        b.set_message("gemm");
        assert!(!b.on);
        assert!(!b.state.lock().unwrap().drawn);
        assert!(CLEAR.starts_with('\r') && CLEAR.ends_with("\x1b[2K"));
        // A bar is drawn from its first update on, so hiding it at once
        // (`--quiet`, `--json`) leaves nothing on the line.
        let fresh = Bar::new("training", Some(3), true);
        assert!(!fresh.state.lock().unwrap().drawn);
        let fresh = fresh.hidden_if(true);
        fresh.inc(1);
        assert!(!fresh.state.lock().unwrap().drawn);
        // A shown bar, once finished, is no longer on the line.
        let shown = Bar::new("ladder", Some(3), true);
        shown.inc(3);
        assert!(shown.state.lock().unwrap().drawn);
        shown.finish_and_clear();
        assert!(!shown.state.lock().unwrap().drawn);
        shown.inc(1);
        assert!(!shown.state.lock().unwrap().drawn, "a finished bar is not drawn again");
    }
}
