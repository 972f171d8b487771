//! Ladder results as saved moved to [`crate::session::results`], the side
//! file to [`crate::session::side`] (the GUI's side: [`super::session`]).
// TODO(redesign phase 2): remove once ladder_run imports those directly.

pub use super::session::{RungTensors, load_tensors, parse_tensors, save_tensors, side_path};
pub use crate::session::results::*;
