//! `dualscope gui`: the visual debugger's window.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::ui::{self, LaunchOptions};

#[derive(Args, Debug, Clone, Default)]
pub struct GuiArgs {
    /// Dataset file to open (default: the embedded synthetic corpus).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Session file (RON) to restore.
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// Capture folder (`OUT/captures/step_NNNNNN`, or its capture.json) to
    /// open: its weights, batch and precision replace the defaults.
    #[arg(long)]
    pub capture: Option<PathBuf>,
    /// Command file to run after start: one step a line (`#` comments), each
    /// once the jobs the previous one started have finished
    /// (docs/gui-scripting.md). Steps: config tiny|small|bench · seed N ·
    /// data PATH · embedded · offset N · len N · precision f32|f16|bf16 ·
    /// gpu-trace on|off · token-cap X|off · fault ladder|bisect|audit NAME|none
    /// · precision-map STAGE=PREC,…|default · open precision-map ·
    /// precision-bisect · run · ladder · rung ID|none · tensor NAME · worst · headroom (scroll
    /// the inspector to the headroom plot) · growth · cursor
    /// N|first|last|worst-loss|worst-divergence|next-non-finite · bisect ·
    /// bisect-max-len N · audit · view
    /// sequence|inspector|speedup|bisect|audit|training|detection · panel NAME (toggle)
    /// · session PATH · save-session PATH · capture PATH · sleep SECONDS. A bad line: exit 2
    /// before the window opens.
    #[arg(long, value_name = "FILE")]
    pub commands: Option<PathBuf>,
    /// The window's inner size in logical pixels, WIDTHxHEIGHT (default 1600x1000).
    #[arg(long, value_name = "WxH", value_parser = parse_window_size)]
    pub window_size: Option<[f32; 2]>,
}

/// `1280x800` → [1280, 800]; each side 200 to 16384.
fn parse_window_size(s: &str) -> Result<[f32; 2], String> {
    let bad = || format!("{s:?}: expected WIDTHxHEIGHT, each 200 to 16384 (for example 1280x800)");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |v: &str| v.trim().parse::<u32>().ok().filter(|n| (200..=16384).contains(n)).ok_or_else(bad);
    Ok([side(w)? as f32, side(h)? as f32])
}

pub fn run(a: &GuiArgs) -> Result<i32, CliError> {
    let commands = match &a.commands {
        Some(p) => ui::script::read(p).map_err(|e| CliError::Usage(e.to_string()))?,
        None => Vec::new(),
    };
    let opts = LaunchOptions {
        data: a.data.clone(),
        session: a.session.clone(),
        capture: a.capture.clone(),
        state: None,
        commands,
    };
    ui::run_sized(opts, a.window_size.unwrap_or(ui::DEFAULT_WINDOW_SIZE)).map_err(CliError::Failed)?;
    Ok(0)
}
