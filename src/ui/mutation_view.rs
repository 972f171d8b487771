//! The *Detection power* view's state: a `dualscope mutate --out DIR`
//! campaign read on a thread, the survivor picked, and the command line that
//! opens a survivor's mutated kernels in a second dualscope window.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::mutate::read::Campaign;
use crate::session::job::{Job, Waker};
use crate::ui::error::{UiError, UiResult};

#[derive(Default)]
pub struct MutationView {
    pub campaign: Option<Arc<Campaign>>,
    /// The survivor whose diff is shown (its id).
    pub selected: Option<String>,
    job: Option<Job<(), UiResult<Campaign>>>,
}

impl MutationView {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    pub fn load(&mut self, path: PathBuf, wake: Waker) -> UiResult<()> {
        let job = Job::spawn("mutate-report", wake, move |_| Campaign::read(&path).map_err(UiError::refused))
            .map_err(|e| UiError::refused(format!("cannot start reading the campaign: {e}")))?;
        self.job = Some(job);
        Ok(())
    }

    /// A line saying what was read, once the job is done.
    pub fn poll(&mut self) -> Option<UiResult<String>> {
        let done = self.job.as_mut()?.poll().done?;
        self.job = None;
        match done {
            Ok(Ok(c)) => {
                let t = c.total();
                let said = format!(
                    "Read {} mutants from {}{}: score {}, {} survivors",
                    t.mutants,
                    c.dir.display(),
                    if c.finished { "" } else { " (a campaign not finished)" },
                    t.score_line(),
                    t.missed + t.equivalent
                );
                self.selected = c.survivors().next().map(|r| r.mutant.id.clone());
                self.campaign = Some(Arc::new(c));
                Some(Ok(said))
            }
            Ok(Err(e)) => Some(Err(e)),
            Err(_) => Some(Err(UiError::refused("the campaign reader ended without a result"))),
        }
    }
}

/// The command that opens dualscope's GUI on the kernels of `shaders` (a
/// survivor's mutated folder): `EXE --shaders DIR gui`.
pub fn mutant_gui_command(exe: &Path, shaders: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(exe);
    c.arg("--shaders").arg(shaders).arg("gui");
    c
}

/// Starts a second dualscope window on `shaders`; the line for the status bar.
pub fn open_mutant(shaders: &Path) -> UiResult<String> {
    let exe = std::env::current_exe().map_err(|e| UiError::refused(format!("cannot find dualscope's binary: {e}")))?;
    mutant_gui_command(&exe, shaders)
        .spawn()
        .map_err(|e| UiError::refused(format!("cannot start {}: {e}", exe.display())))?;
    Ok(format!("Opened a dualscope window on the kernels of {}: run the ladder there", shaders.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_window_gets_the_mutants_folder() {
        let c = mutant_gui_command(Path::new("/bin/dualscope"), Path::new("/runs/m/mutants/x/shaders"));
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(c.get_program(), "/bin/dualscope");
        assert_eq!(args, ["--shaders", "/runs/m/mutants/x/shaders", "gui"]);
    }
}
