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
    /// sequence|inspector|speedup|bisect|audit|training · panel NAME (toggle)
    /// · session PATH · capture PATH · sleep SECONDS. A bad line: exit 2
    /// before the window opens.
    #[arg(long, value_name = "FILE")]
    pub commands: Option<PathBuf>,
}

pub fn run(a: &GuiArgs) -> Result<i32, CliError> {
    let commands = match &a.commands {
        Some(p) => ui::script::read(p).map_err(CliError::Usage)?,
        None => Vec::new(),
    };
    let opts = LaunchOptions {
        data: a.data.clone(),
        session: a.session.clone(),
        capture: a.capture.clone(),
        state: None,
        commands,
    };
    ui::run(opts).map_err(CliError::Failed)?;
    Ok(0)
}
