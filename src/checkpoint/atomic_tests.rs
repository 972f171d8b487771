//! Atomic writes: nothing half-written, no temporary file left behind.

use std::path::Path;

use super::atomic::write_atomic_hooked;
use super::tests::{assert_has, entries, tmp_file};
use super::*;
use crate::model::{Config, Params};

#[test]
fn atomic_write_into_missing_directory_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("missing").join("ckpt.safetensors");
    let cfg = Config::tiny();
    let e = save_params(&p, &cfg, &Params::<f32>::init(&cfg, 1)).unwrap_err().to_string();
    assert_has(&e, "does not exist");
    assert!(e.starts_with(&p.display().to_string()));
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn atomic_write_refuses_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let e = write_atomic(dir.path(), b"x").unwrap_err().to_string();
    assert_has(&e, "is a directory");
    let cfg = Config::tiny();
    let e = save_params(dir.path(), &cfg, &Params::<f32>::init(&cfg, 1)).unwrap_err();
    assert!(matches!(e, CheckpointError::IsDirectory { .. }), "{e}");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn atomic_write_replaces_and_leaves_no_temp_files() {
    let (dir, p) = tmp_file("state.bin");
    write_atomic(&p, b"old content that is longer").unwrap();
    write_atomic(&p, b"new").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"new");
    let cfg = Config::tiny();
    let params = Params::<f32>::init(&cfg, 5);
    save_params(&p, &cfg, &params).unwrap();
    assert_eq!(load_params(&p).unwrap().1, params);
    assert_eq!(entries(dir.path()), ["state.bin"]);
}

#[test]
fn relative_paths_write_into_the_current_directory_name() {
    // A bare file name has an empty parent; it must mean ".", not fail.
    let p = Path::new("dualscope-checkpoint-test-relative.bin");
    write_atomic(p, b"x").unwrap();
    assert_eq!(std::fs::read(p).unwrap(), b"x");
    std::fs::remove_file(p).unwrap();
}

#[test]
fn atomic_write_failures_remove_the_temp_file() {
    let (dir, p) = tmp_file("ckpt.safetensors");
    write_atomic(&p, b"old").unwrap();
    // A failure just before the rename.
    let e = write_atomic_hooked(&p, b"new", |_| Err(std::io::Error::other("injected"))).unwrap_err();
    assert_has(&e.to_string(), "injected");
    assert_eq!(entries(dir.path()), ["ckpt.safetensors"]);
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    // The rename itself failing: a directory appears at the target meanwhile.
    let q = dir.path().join("raced");
    let e = write_atomic_hooked(&q, b"new", |tmp| {
        assert!(tmp.exists());
        std::fs::create_dir(&q)?;
        std::fs::write(q.join("inside"), b"x")
    })
    .unwrap_err();
    assert_has(&e.to_string(), "cannot rename");
    assert_eq!(entries(dir.path()), ["ckpt.safetensors", "raced"]);
}

#[test]
fn concurrent_writes_use_distinct_temp_files() {
    let (dir, p) = tmp_file("shared.bin");
    std::thread::scope(|s| {
        for i in 0..8u8 {
            let p = &p;
            s.spawn(move || write_atomic(p, &[i; 1000]).unwrap());
        }
    });
    let got = std::fs::read(&p).unwrap();
    assert_eq!(got.len(), 1000);
    assert!(got.iter().all(|&b| b == got[0]));
    assert_eq!(entries(dir.path()), ["shared.bin"]);
}
