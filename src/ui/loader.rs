//! Opens dataset files on their own threads: mapping a file, indexing a large
//! JSON-lines file and hashing its content take seconds for big corpora, and the
//! UI keeps drawing meanwhile.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};

use crate::dataset::Dataset;

use super::state::State;

/// What to do once the file is open.
pub enum AfterOpen {
    /// Make it the current dataset.
    Plain,
    /// Restore this session (read from `session`) over it.
    Session { state: Box<State>, session: PathBuf },
}

pub struct Opened {
    pub path: PathBuf,
    pub result: Result<Dataset, String>,
    pub after: AfterOpen,
}

pub struct Loader {
    tx: Sender<Opened>,
    rx: Receiver<Opened>,
    in_flight: usize,
}

impl Default for Loader {
    fn default() -> Self {
        let (tx, rx) = channel();
        Loader { tx, rx, in_flight: 0 }
    }
}

impl Loader {
    /// Opens `path` on a new thread; `wake` runs when it is done.
    pub fn open(&mut self, path: PathBuf, after: AfterOpen, wake: impl Fn() + Send + 'static) -> Result<(), String> {
        let tx = self.tx.clone();
        let p = path.clone();
        let spawned = std::thread::Builder::new().name("dualscope-open".into()).spawn(move || {
            let result = Dataset::open(&p).map_err(|e| e.to_string()).inspect(|ds| {
                ds.content_hash(); // computed here, remembered by the dataset
            });
            let _ = tx.send(Opened { path: p, result, after });
            wake();
        });
        match spawned {
            Ok(_) => {
                self.in_flight += 1;
                Ok(())
            }
            Err(e) => Err(format!("cannot start a thread to open {}: {e}", path.display())),
        }
    }

    /// Files opened (or not) since the last call, in the order they finished.
    pub fn poll(&mut self) -> Vec<Opened> {
        let done: Vec<Opened> = self.rx.try_iter().collect();
        self.in_flight -= done.len();
        done
    }

    pub fn is_busy(&self) -> bool {
        self.in_flight > 0
    }
}
