//! Set-up shared by the integration tests: the Vulkan context or a printed
//! skip ([`vk`]), the binary and its failure contract ([`cli`]), and the model
//! inputs and error measures several tests use ([`fixtures`]).
//!
//! Each test file declares `mod common;`; a file uses only part of this, so
//! unused items are allowed here.

#![allow(dead_code, unused_imports, unused_macros)]

pub mod cli;
pub mod fixtures;
pub mod vk;

pub use cli::*;
pub use fixtures::*;
pub use vk::*;

/// The name of the test function this is written in (the last segment of its
/// path), as the `SKIPPED name: …` notices and assertion messages spell it.
macro_rules! test_name {
    () => {{
        fn here() {}
        let path = std::any::type_name_of_val(&here);
        let path = path.strip_suffix("::here").unwrap_or(path);
        &path[path.rfind("::").map_or(0, |i| i + 2)..]
    }};
}
pub(crate) use test_name;
