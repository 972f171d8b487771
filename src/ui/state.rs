//! The saved state lives in [`crate::session::state`]; this re-export is only
//! for `ui/speed.rs` and `ui/worker.rs`, which helper F converts at the same time.
// TODO(redesign phase 2): remove once speed.rs and worker.rs import `crate::session::state`.

pub(crate) use crate::session::state::ConfigName;
