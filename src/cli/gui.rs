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
}

pub fn run(a: &GuiArgs) -> Result<i32, CliError> {
    let opts =
        LaunchOptions { data: a.data.clone(), session: a.session.clone(), capture: a.capture.clone(), state: None };
    ui::run(opts).map_err(CliError::Failed)?;
    Ok(0)
}
