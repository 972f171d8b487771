//! Opens dataset files as background [`Job`]s: mapping a file, indexing a large
//! JSON-lines file and hashing its content take seconds for big corpora, and the
//! UI keeps drawing meanwhile.

use crate::ui::error::{UiError, UiResult};
use std::path::PathBuf;
use std::time::Instant;

use crate::dataset::Dataset;
use crate::session::job::{Job, Waker};
use crate::session::state::State;

/// What to do once the file is open.
pub enum AfterOpen {
    /// Make it the current dataset.
    Plain,
    /// Restore this session (read from `session`) over it.
    Session { state: Box<State>, session: PathBuf },
}

pub struct Opened {
    pub path: PathBuf,
    pub result: UiResult<Dataset>,
    pub after: AfterOpen,
}

/// The files being opened; each job ends with the time it finished.
#[derive(Default)]
pub struct Loader {
    jobs: Vec<(PathBuf, OpenJob)>,
}

/// Opening one file: no progress, the result with the time it finished.
type OpenJob = Job<(), (Instant, Opened)>;

impl Loader {
    /// Opens `path` on a new thread; `wake` runs when it is done.
    pub fn open(&mut self, path: PathBuf, after: AfterOpen, wake: Waker) -> UiResult<()> {
        let p = path.clone();
        let job = Job::spawn("open", wake, move |_| {
            let result = Dataset::open(&p).map_err(UiError::from).inspect(|ds| {
                ds.content_hash(); // computed here, remembered by the dataset
            });
            (Instant::now(), Opened { path: p, result, after })
        })
        .map_err(|e| UiError::refused(format!("cannot start a thread to open {}: {e}", path.display())))?;
        self.jobs.push((path, job));
        Ok(())
    }

    /// Files opened (or not) since the last call, in the order they finished.
    pub fn poll(&mut self) -> Vec<Opened> {
        let mut done = Vec::new();
        self.jobs.retain_mut(|(path, job)| match job.poll().done {
            None => true,
            Some(Ok(r)) => {
                done.push(r);
                false
            }
            Some(Err(lost)) => {
                let opened = Opened { path: path.clone(), result: Err(lost.into()), after: AfterOpen::Plain };
                done.push((Instant::now(), opened));
                false
            }
        });
        done.sort_by_key(|(at, _)| *at);
        done.into_iter().map(|(_, o)| o).collect()
    }

    pub fn is_busy(&self) -> bool {
        !self.jobs.is_empty()
    }
}
