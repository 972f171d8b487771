//! The saved state moved to [`crate::session::state`]; this re-export keeps
//! the ladder, worker and speed jobs compiling until they are converted.
// TODO(redesign phase 2): remove; import `crate::session::state` instead.

pub use crate::session::state::*;
