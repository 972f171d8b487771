//! The model the views use: the state's source (embedded trained, seeded,
//! checkpoint file) or parameters trained here, and the train-here run.

use std::sync::Arc;

use super::{App, waker};
use crate::session::state::ModelSource;
use crate::session::weights::Weights;
use crate::step::StepOptions;
use crate::ui::panels::status::Level;
use crate::ui::train_here::TrainHereJob;

impl App {
    /// The parameters every job takes: those trained here, else the state's source.
    pub fn weights(&self) -> Weights {
        match &self.trained {
            Some((p, _)) => Weights::Live(p.clone()),
            None => self.state.weights(),
        }
    }

    /// Steps trained here on top of the state's source (`None`: none).
    pub fn trained_steps(&self) -> Option<usize> {
        self.trained.as_ref().map(|t| t.1)
    }

    /// The train-here run: its steps asked for and last progress.
    pub fn train_here(&self) -> &crate::ui::train_here::TrainHere {
        &self.train_here
    }

    pub(super) fn set_model_source(&mut self, m: ModelSource) {
        self.close_capture();
        self.trained = None;
        self.state.checkpoint = None;
        self.state.model = m;
        self.needs_run = true;
    }

    /// Starts training the current model `steps` steps at `lr` on the dataset.
    pub(super) fn start_train_here(&mut self, steps: usize, lr: f64) {
        if self.train_here.is_busy() {
            return;
        }
        if self.capture.open.is_some() {
            return self.say(Level::Error, "cannot train here with a capture open: close the capture first");
        }
        let config = self.state.config;
        let started = self.weights().params(config, self.state.seed).and_then(|params| {
            let job = TrainHereJob {
                config: config.config(),
                params,
                dataset: self.dataset.clone(),
                steps,
                seed: self.state.seed ^ self.trained_steps().unwrap_or(0) as u64,
                opts: StepOptions { lr, token_cap: self.state.token_cap, ..Default::default() },
                precision: self.state.precision,
            };
            Ok(self.train_here.start(job, waker(&self.ctx_slot))?)
        });
        match started {
            Ok(()) => self.say(Level::Info, format!("Training {steps} steps here…")),
            Err(e) => self.say(Level::Error, format!("cannot train here: {e}")),
        }
    }

    pub(super) fn poll_train_here(&mut self) {
        match self.train_here.poll() {
            None => {}
            Some(Ok(None)) => self.say(Level::Info, "Training cancelled: the model is as it was"),
            Some(Ok(Some(t))) => {
                let total = self.trained_steps().unwrap_or(0) + t.steps;
                self.trained = Some((Arc::new(t.params), total));
                self.needs_run = true;
                let text = format!(
                    "Trained {} steps here ({}): loss {:.4} to {:.4}; the views use the trained model",
                    t.steps,
                    crate::ui::engines::label(t.engine),
                    t.first_loss,
                    t.last_loss
                );
                self.say(Level::Info, text);
            }
            Some(Err(e)) => self.say(Level::Error, format!("training here failed: {e}")),
        }
    }
}
