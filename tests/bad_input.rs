//! Hostile input on the command line (issue 16, item 6): every case is one
//! clear line on stderr and a clean exit, never a panic, an allocation abort,
//! a hang, or a replaced file. Sizes are refused before anything is
//! allocated, so no test here allocates much; none needs a GPU (the refusals
//! come before the device is opened).
//!
//! `DUALSCOPE_TEST_BIN=/path/to/dualscope` runs these tests against another
//! build (an older one, to see them fail there).

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Dir, fails, fails_cleanly, s, text};

/// The largest `u64`: the number a hostile user types first.
const MAX: &str = "18446744073709551615";

/// The binary under test (two rayon threads, validation off).
fn bin() -> Command {
    let path =
        std::env::var_os("DUALSCOPE_TEST_BIN").map_or(PathBuf::from(env!("CARGO_BIN_EXE_dualscope")), PathBuf::from);
    let mut c = Command::new(path);
    c.env("RAYON_NUM_THREADS", "2");
    c
}

/// Runs the binary with `args`; a run past 60 s (a hang on a FIFO, a run
/// that should have been refused) is killed and fails the test.
fn run(args: &[&str]) -> Output {
    let mut child =
        bin().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("dualscope {args:?} still ran after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `fails(o, code)`, and the line contains every one of `words`.
fn fails_with(o: &Output, code: i32, words: &[&str]) -> String {
    let err = fails(o, code);
    for w in words {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
    err
}

/// A FIFO at `name` in `d`.
fn fifo(d: &Dir, name: &str) -> PathBuf {
    let p = d.path(name);
    let st = Command::new("mkfifo").arg(&p).status().unwrap();
    assert!(st.success(), "mkfifo");
    p
}

fn is_fifo(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

/// A sparse file of `len` bytes (all zero, no disk blocks).
fn sparse(d: &Dir, name: &str, len: u64) -> PathBuf {
    let p = d.path(name);
    std::fs::File::create(&p).unwrap().set_len(len).unwrap();
    p
}

/// A text of `len` bytes that is not one repeated byte.
fn text_file(d: &Dir, name: &str, len: usize) -> PathBuf {
    let bytes: Vec<u8> = (0..len).map(|i| b"the quick brown fox jumps over the lazy dog "[i % 44]).collect();
    d.file(name, &bytes)
}

/// The tiny config as JSON with `field` set to the raw JSON `value`.
fn tiny_with(field: &str, value: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&dualscope::model::Config::tiny().to_json()).unwrap();
    v[field] = serde_json::from_str(value).unwrap_or(serde_json::Value::Null);
    let text = v.to_string();
    // serde_json would write a huge integer as a float: splice the raw text in.
    let key = format!("\"{field}\":{}", v[field]);
    text.replace(&key, &format!("\"{field}\":{value}"))
}

#[test]
fn bench_step_counts_that_overflow_or_cannot_be_held_are_refused() {
    let o = run(&["bench", "--config", "tiny", "--warmup", MAX]);
    fails_with(&o, 2, &["--warmup", "--steps"]);
    let o = run(&["bench", "--config", "tiny", "--warmup", "0", "--steps", MAX]);
    fails_with(&o, 1, &["--steps", "64 bits"]);
    let o = run(&["bench", "--config", "tiny", "--steps", "1000000000"]);
    fails_with(&o, 1, &["--steps 1000000000", "MiB"]);
}

#[test]
fn demo_refuses_zero_sizes_and_steps_it_cannot_hold() {
    let o = run(&["demo", "--steps", MAX]);
    fails_with(&o, 1, &["--steps"]);
    for flag in ["--steps", "--batch", "--seq-len"] {
        let o = run(&["demo", flag, "0"]);
        fails_with(&o, 2, &[flag, "at least 1"]);
    }
}

#[test]
fn a_model_too_large_for_memory_is_refused_before_it_is_initialised() {
    let d = Dir::new();
    // hidden 65536 over 4 layers: hundreds of GB of weights.
    let cfg = d.file("wide.json", tiny_with("hidden", "65536").replace("\"layers\":2", "\"layers\":4").as_bytes());
    let out = d.path("wide.safetensors");
    let o = run(&["init", "--config", s(&cfg), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("--config") && err.contains("parameters") && err.contains("MiB"), "{err}");
    let data = text_file(&d, "a.txt", 200);
    let o = run(&["train", "--data", s(&data), "--config", s(&cfg), "--steps", "1"]);
    fails_with(&o, 1, &["--config", "parameters"]);
    let o = run(&["bench", "--config", s(&cfg), "--steps", "1"]);
    fails_with(&o, 1, &["--config", "parameters"]);
    let o = run(&["ladder", "--config", s(&cfg)]);
    fails_with(&o, 1, &["--config", "parameters"]);
}

#[test]
fn gemm_bench_sizes_are_refused_before_the_device_is_opened() {
    let o = run(&["gemm-bench", "--shape", "100000x100000x100000"]);
    fails_with(&o, 1, &["--shape 100000x100000x100000", "MiB"]);
    let o = run(&["gemm-bench", "--shape", "8x8x8", "--reps", MAX]);
    fails_with(&o, 1, &["--reps"]);
}

#[test]
fn ladder_and_audit_lengths_are_checked_before_the_row_is_cut() {
    let d = Dir::new();
    let big = sparse(&d, "big.bin", 12_000_000);
    let o = run(&["ladder", "--data", s(&big), "--len", "5000000"]);
    fails_with(&o, 1, &["--len 5000000", "MiB"]);
    let o = run(&["audit", "--data", s(&big), "--len", "10000000"]);
    fails_with(&o, 1, &["--len 10000000", "MiB"]);
}

#[test]
fn ladder_refuses_a_checkpoint_whose_seq_len_cannot_fit() {
    let d = Dir::new();
    let cfg = dualscope::model::Config::from_json(&tiny_with("seq_len", "1000000000000000")).unwrap();
    let params = dualscope::model::Params::<f32>::init(&cfg, 0);
    let ck = d.path("long.safetensors");
    dualscope::checkpoint::save_params(&ck, &cfg, &params).unwrap();
    let o = run(&["ladder", "--checkpoint", s(&ck)]);
    fails_with(&o, 1, &["seq_len 1000000000000000"]);
}

#[test]
fn outputs_onto_a_fifo_are_refused_and_the_fifo_stays() {
    let d = Dir::new();
    let ck = d.ckpt("tiny");
    let data = text_file(&d, "a.txt", 64);
    let f = fifo(&d, "pipe");
    let link = d.path("link");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let (ck, data) = (s(&ck), s(&data));
    for out in [&f, &link] {
        let out = s(out);
        let cases: [&[&str]; 7] = [
            &["init", "--config", "tiny", "--out", out],
            &["grads", "--checkpoint", ck, "--data", data, "--out", out],
            &["step", "--checkpoint", ck, "--data", data, "--out", out],
            &["bench", "--config", "tiny", "--steps", "1", "--warmup", "0", "--save-batch", out],
            &["bench", "--config", "tiny", "--steps", "1", "--warmup", "0", "--save-checkpoint", out],
            &["ladder", "--config", "tiny", "--out", out],
            &["audit", "--config", "tiny", "--data", data, "--len", "8", "--out", out],
        ];
        for args in cases {
            let o = run(args);
            let err = fails(&o, 2);
            assert!(err.contains("a FIFO, not a regular file"), "{args:?}: {err}");
            assert!(is_fifo(&f), "{args:?} replaced the FIFO");
        }
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    }
}

#[test]
fn an_output_ending_in_a_slash_does_not_show_a_temporary_file() {
    let d = Dir::new();
    let out = format!("{}/newdir/", d.0.path().display());
    let o = run(&["init", "--config", "tiny", "--out", &out]);
    let err = fails_with(&o, 2, &["--out", "'/'"]);
    // write_atomic's temporary file would be `.newdir.tmp.PID.N`.
    assert!(!err.contains("newdir.tmp"), "{err}");
    assert!(std::fs::read_dir(d.0.path()).unwrap().next().is_none(), "nothing is left in the folder");
}

#[test]
fn an_output_may_not_replace_the_config_it_reads() {
    let d = Dir::new();
    let json = dualscope::model::Config::tiny().to_json();
    let cfg = d.file("c.json", json.as_bytes());
    let o = run(&["init", "--config", s(&cfg), "--out", s(&cfg)]);
    fails_with(&o, 2, &["--out", "overwrite an input"]);
    let o = run(&["bench", "--config", s(&cfg), "--steps", "1", "--save-batch", s(&cfg)]);
    fails_with(&o, 2, &["--save-batch", "overwrite an input"]);
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), json);
}

#[test]
fn special_files_as_config_or_checkpoint_are_refused_at_once() {
    let d = Dir::new();
    let f = fifo(&d, "pipe");
    let data = text_file(&d, "a.txt", 64);
    let out = d.path("out.safetensors");
    for (input, kind) in [(f.as_path(), "a FIFO"), (Path::new("/dev/zero"), "a device")] {
        let o = run(&["init", "--config", s(input), "--out", s(&out)]);
        let err = fails_cleanly(&o, 1, &out);
        assert!(err.contains(kind), "{err}");
        let o = run(&["grads", "--checkpoint", s(input), "--data", s(&data), "--out", s(&out)]);
        let err = fails_cleanly(&o, 1, &out);
        assert!(err.contains(kind), "{err}");
        let o = run(&["ladder", "--checkpoint", s(input)]);
        fails_with(&o, 1, &[kind]);
    }
    assert!(is_fifo(&f));
}

#[test]
fn huge_config_and_checkpoint_files_are_refused_unread() {
    let d = Dir::new();
    // Sparse: no disk used, but reading either in full would need 100 GB.
    let huge = sparse(&d, "huge.json", 100 << 30);
    let data = text_file(&d, "a.txt", 64);
    let out = d.path("out.safetensors");
    let o = run(&["init", "--config", s(&huge), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("more than the 1048576 bytes accepted"), "{err}");
    let o = run(&["grads", "--checkpoint", s(&huge), "--data", s(&data), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("not a safetensors file"), "{err}");
    // A header length of 1 GB that starts like JSON: refused from its first
    // bytes, though the file is large enough to hold it.
    let f = std::fs::OpenOptions::new().write(true).open(&huge).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[&(1u64 << 30).to_le_bytes()[..], b"{"].concat(), 0).unwrap();
    let o = run(&["grads", "--checkpoint", s(&huge), "--data", s(&data), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("over the 100000000-byte limit"), "{err}");
    // Well framed (a two-byte header) but 1 TiB long: refused against memory
    // before a byte past the header is read.
    let big = sparse(&d, "big.safetensors", 1 << 40);
    let f = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[&2u64.to_le_bytes()[..], b"{}"].concat(), 0).unwrap();
    let o = run(&["grads", "--checkpoint", s(&big), "--data", s(&data), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("70% of the memory available"), "{err}");
}

#[test]
fn config_numbers_and_marks_are_read_or_named() {
    let d = Dir::new();
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(dualscope::model::Config::tiny().to_json().as_bytes());
    let cfg = d.file("bom.json", &bom);
    let out = d.path("bom.safetensors");
    let o = run(&["init", "--config", s(&cfg), "--out", s(&out)]);
    assert!(o.status.success(), "a byte-order mark is accepted: {}", text(&o.stderr));
    let cfg = d.file("huge.json", tiny_with("hidden", "1180591620717411303424").as_bytes());
    let out = d.path("huge.safetensors");
    let o = run(&["init", "--config", s(&cfg), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("hidden must be an integer from 1 to 65536"), "{err}");
}

#[test]
fn learning_rates_outside_the_range_are_refused_naming_the_flag() {
    let d = Dir::new();
    let data = text_file(&d, "a.txt", 200);
    for (lr, why) in
        [("-1", "--lr -1 must be > 0"), ("1e300", "--lr 1e300 must be at most 10"), ("0", "--lr 0 must be > 0")]
    {
        let o = run(&["train", "--data", s(&data), "--config", "tiny", "--steps", "1", "--lr", lr]);
        fails_with(&o, 2, &[why]);
    }
}

#[test]
fn zero_and_short_lengths_name_their_flag() {
    let d = Dir::new();
    let short = text_file(&d, "short.txt", 100);
    let o = run(&["bisect", "--config", "tiny", "--max-len", "0"]);
    let err = fails_with(&o, 2, &["--max-len"]);
    assert!(!err.contains("--offset"), "{err}");
    let o = run(&["ladder", "--config", "tiny", "--len", "0"]);
    fails_with(&o, 2, &["--len must be at least 1"]);
    let o = run(&["audit", "--config", "tiny", "--len", "0"]);
    fails_with(&o, 2, &["--len must be at least 1"]);
    let o = run(&["audit", "--config", "tiny", "--data", s(&short), "--len", "512"]);
    fails_with(&o, 2, &["--len 512", "100 tokens"]);
}

#[test]
fn audit_refuses_an_empty_file_or_a_row_of_one_repeated_byte() {
    let d = Dir::new();
    let empty = d.file("empty.txt", b"");
    let o = run(&["audit", "--config", "tiny", "--data", s(&empty), "--len", "64"]);
    fails_with(&o, 1, &["--data", "empty.txt: is empty"]);
    let zeros = d.file("zeros.bin", &[0u8; 4096]);
    let o = run(&["audit", "--config", "tiny", "--data", s(&zeros), "--len", "64"]);
    fails_with(&o, 2, &["--data", "one byte (0x00) repeated"]);
}

#[test]
fn help_lists_the_tiny_preset() {
    for cmd in ["init", "bench"] {
        let o = run(&[cmd, "--help"]);
        let help = text(&o.stdout);
        // The flag's line and the next (clap puts a long help under the flag).
        let text: String = help.lines().skip_while(|l| !l.contains("--config")).take(2).collect();
        assert!(text.contains("tiny"), "{cmd} --help: {text}");
    }
}

#[test]
fn gemm_path_with_the_cpu_engine_is_refused() {
    let d = Dir::new();
    let data = text_file(&d, "a.txt", 200);
    let o = run(&["train", "--data", s(&data), "--config", "tiny", "--steps", "1", "--gemm-path", "tiled"]);
    fails_with(&o, 2, &["--gemm-path applies only to --engine gpu"]);
    let o = run(&["bench", "--config", "tiny", "--steps", "1", "--gemm-path", "tiled"]);
    fails_with(&o, 2, &["--gemm-path applies only to --engine gpu"]);
}

#[test]
fn a_short_run_reports_its_real_window() {
    let d = Dir::new();
    let data = text_file(&d, "a.txt", 200);
    let o = run(&["train", "--data", s(&data), "--config", "tiny", "--steps", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("over the first 2,") && out.contains("over the last 2;"), "{out}");
}

#[test]
fn report_outputs_are_checked_before_the_run() {
    let d = Dir::new();
    let data = text_file(&d, "a.txt", 200);
    let nosuch = d.path("nosuch/x.json");
    let o = run(&["ladder", "--config", "tiny", "--out", s(&nosuch)]);
    fails_with(&o, 2, &["--out", "nosuch", "does not exist"]);
    let o = run(&["audit", "--config", "tiny", "--data", s(&data), "--len", "8", "--out", s(&nosuch)]);
    fails_with(&o, 2, &["--out", "nosuch", "does not exist"]);
}

#[test]
fn control_characters_in_paths_are_escaped() {
    let d = Dir::new();
    let odd = d.path("line\nbreak.txt");
    let o = run(&["train", "--data", s(&odd), "--config", "tiny"]);
    fails_with(&o, 1, &["line\\nbreak.txt"]);
    let odd_cfg = d.path("bad\ncfg.json");
    let o = run(&["init", "--config", s(&odd_cfg), "--out", s(&d.path("x.safetensors"))]);
    fails_with(&o, 1, &["bad\\ncfg.json"]);
}
