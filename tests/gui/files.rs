//! Datasets, sessions and checkpoints: bad datasets in the status bar, files
//! dropped or hovered, sessions saved and loaded (from the command line too,
//! the shipped ones, old ones without diagnostics), the file dialog without a
//! portal, and parameters from a checkpoint.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dualscope::session::state::State;
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::{App, LaunchOptions, session};
use egui::Key;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use crate::{Dropped, harness, init_env, message, tiny, wait_for_trace};

#[test]
fn bad_datasets_show_in_the_status_bar_and_the_app_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(tiny(40), (1400.0, 900.0));
    wait_for_trace(&mut h);

    // A directory dropped on the window.
    h.input_mut().dropped_files.push(Arc::new(Dropped(dir.path().to_path_buf())));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(message(&h).contains("is a directory"), "{}", message(&h));
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    h.get_by_label_contains("is a directory");

    // An empty file, typed into the dataset field.
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    h.state_mut().data_path = empty.display().to_string();
    h.run_steps(1);
    h.get_by_label("Open").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(message(&h).contains("is empty"), "{}", message(&h));
    assert_eq!(h.state().dataset().name(), "embedded:synthetic");

    // Still usable.
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 1);

    // A good (binary) file opens and is computed.
    let bin = dir.path().join("data.bin");
    std::fs::write(&bin, (0..=255u8).cycle().take(300).collect::<Vec<_>>()).unwrap();
    h.input_mut().dropped_files.push(Arc::new(Dropped(bin.clone())));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().dataset().name(), "data.bin");
    assert_eq!(h.state().state.dataset.path.as_deref(), Some(bin.as_path()));
    assert_eq!(h.state().computed().unwrap().tokens[..3], [0, 1, 2]);
}

#[test]
fn sessions_save_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.ron");
    let mut h = harness(State { seed: 3, ..tiny(40) }, (1400.0, 900.0));
    wait_for_trace(&mut h);
    for _ in 0..5 {
        h.key_press(Key::ArrowRight);
    }
    h.run_steps(2);
    h.get_by_label("head 1").click();
    h.run_steps(2);
    h.state_mut().session_path = path.display().to_string();
    h.run_steps(1);
    h.get_by_label("Save session").click();
    h.run_steps(2);
    assert!(message(&h).contains("Saved"), "{}", message(&h));
    let saved = h.state().state.clone();
    assert_eq!(session::load(&path).unwrap(), saved);
    assert_eq!((saved.cursor, saved.head, saved.seed), (5, 1, 3));

    // Change things, then load the session back.
    h.key_press(Key::End);
    h.state_mut().queue(Command::SetSeed(9));
    h.state_mut().queue(Command::SelectHead(0));
    h.run_steps(2);
    assert_ne!(h.state().state, saved);
    h.get_by_label("Load session").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state, saved);
    assert_eq!(h.state().computed().unwrap().spec.seed, 3);

    // A corrupt file changes nothing and says where it broke.
    std::fs::write(&path, "(format_version: 1, seed: [").unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(2);
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    assert!(message(&h).contains("s.ron"), "{}", message(&h));
    assert_eq!(h.state().state, saved);

    // Another format version is named.
    let other = State { format_version: 2, ..saved.clone() };
    std::fs::write(&path, session::to_ron(&other).unwrap()).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(2);
    assert!(message(&h).contains("format version 2"), "{}", message(&h));

    // A missing dataset: a warning, and the rest still loads.
    let gone = State {
        dataset: dualscope::session::state::DatasetRef { path: Some(dir.path().join("gone.txt")), hash: None },
        cursor: 7,
        ..saved.clone()
    };
    std::fs::write(&path, session::to_ron(&gone).unwrap()).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().message().unwrap().level, Level::Warning);
    assert!(message(&h).contains("gone.txt"), "{}", message(&h));
    assert_eq!(h.state().state.cursor, 7);
    assert_eq!(h.state().dataset().name(), "embedded:synthetic");

    // A changed dataset: a warning naming the hashes, the session restored.
    let data = dir.path().join("d.txt");
    std::fs::write(&data, "hello world, hello dualscope\n".repeat(4)).unwrap();
    let changed = State {
        dataset: dualscope::session::state::DatasetRef {
            path: Some(data.clone()),
            hash: Some("0000000000000000".into()),
        },
        ..saved.clone()
    };
    std::fs::write(&path, session::to_ron(&changed).unwrap()).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(message(&h).contains("changed since it was saved"), "{}", message(&h));
    assert_eq!(h.state().dataset().name(), "d.txt");
    assert_eq!(h.state().state.cursor, 5);
}

#[test]
fn session_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.ron");
    let want = State { seed: 4, cursor: 9, head: 1, offset: 100, ..tiny(30) };
    session::save(&path, &want).unwrap();
    init_env();
    let app = App::new(LaunchOptions { session: Some(path.clone()), state: Some(tiny(40)), ..Default::default() });
    let mut h =
        Harness::builder().with_size(egui::vec2(1400.0, 900.0)).build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_trace(&mut h);
    let got = &h.state().state;
    assert_eq!((got.seed, got.cursor, got.head, got.offset, got.len), (4, 9, 1, 100, 30));
    assert_eq!(h.state().computed().unwrap().spec.offset, 100);
    assert_eq!(h.state().session_path, path.display().to_string());
}

#[test]
fn file_dialog_without_a_portal_says_so() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.get_by_label("Open dataset…").click();
    for _ in 0..2000 {
        h.step();
        if message(&h).contains("no file chosen") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // With a desktop portal a real dialog would be open; this machine has none.
    assert!(message(&h).contains("no file chosen"), "{}", message(&h));
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 1, "the app stays usable");
}

/// The sessions shipped in `sessions/` parse, and name the embedded corpus as it is.
#[test]
fn shipped_sessions_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions");
    let hash = dualscope::dataset::default_dataset().content_hash();
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "ron") {
            let s = session::load(&path).unwrap_or_else(|e| panic!("{e}"));
            if s.dataset.path.is_none() {
                assert_eq!(s.dataset.hash.as_deref(), Some(hash.as_str()), "{}", path.display());
            }
            // Its side file, where it names one, reads and holds the tensors of every rung that has some.
            if let Some(tensors) = session::load_side_file(&path, &s).unwrap_or_else(|e| panic!("{e}")) {
                let ladder = s.ladder.as_ref().expect("a side file comes with ladder results");
                for rung in ladder.rungs.keys().filter(|r| *r != "gemm") {
                    assert!(!tensors[rung].is_empty(), "{}: no tensors for {rung}", path.display());
                }
            }
            n += 1;
        }
    }
    assert!(n > 0, "no session in {}", dir.display());
}

#[test]
fn data_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("corpus.txt");
    std::fs::write(&good, "the quick brown fox jumps over the lazy dog\n".repeat(10)).unwrap();
    for (data, name, error) in
        [(good.clone(), "corpus.txt", None), (dir.path().join("nope.txt"), "embedded:synthetic", Some("no such file"))]
    {
        init_env();
        let app = App::new(LaunchOptions { data: Some(data), state: Some(tiny(40)), ..Default::default() });
        let mut h = Harness::builder()
            .with_size(egui::vec2(1400.0, 900.0))
            .build_ui_state(|ui, app: &mut App| app.show(ui), app);
        wait_for_trace(&mut h);
        assert_eq!(h.state().dataset().name(), name);
        assert_eq!(h.state().computed().unwrap().spec.dataset_name, name);
        if let Some(e) = error {
            assert!(message(&h).contains(e), "{}", message(&h));
        }
    }
}

#[test]
fn hovering_a_file_says_what_dropping_does() {
    let mut h = harness(tiny(20), (1000.0, 700.0));
    wait_for_trace(&mut h);
    let brightness = |h: &mut Harness<'static, App>| {
        let shot = h.render().expect("render");
        shot.pixels().map(|p| p.0[..3].iter().map(|&c| c as f64).sum::<f64>()).sum::<f64>()
            / (shot.width() * shot.height()) as f64
    };
    let before = brightness(&mut h);
    h.input_mut().hovered_files.push(egui::HoveredFile { path: Some("/tmp/corpus.txt".into()), ..Default::default() });
    h.run_steps(1);
    // The overlay dims the whole window.
    let during = brightness(&mut h);
    assert!(during < 0.6 * before, "brightness {before} -> {during}");
}

/// Parameters from a checkpoint: a good one changes the trace, one of another
/// config or a missing file is an error in the status bar, and the seed's
/// initialisation comes back with "Init from seed".
#[test]
fn checkpoint_field() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dualscope::model::Config::tiny();
    let good = dir.path().join("tiny.safetensors");
    dualscope::checkpoint::save_params(&good, &cfg, &dualscope::model::Params::<f32>::init(&cfg, 77)).unwrap();
    let small = dir.path().join("small.safetensors");
    let scfg = dualscope::model::Config::small();
    dualscope::checkpoint::save_params(&small, &scfg, &dualscope::model::Params::<f32>::init(&scfg, 0)).unwrap();

    let mut h = harness(tiny(30), (1400.0, 900.0));
    wait_for_trace(&mut h);
    let seed_loss = h.state().computed().unwrap().loss;
    h.state_mut().checkpoint_path = good.display().to_string();
    h.run_steps(1);
    h.get_by_label("Use checkpoint").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.checkpoint.as_deref(), Some(good.as_path()));
    let ckpt_loss = h.state().computed().unwrap().loss;
    assert_ne!(ckpt_loss, seed_loss, "the checkpoint's parameters are used");

    for (bad, says) in [(small, "another configuration"), (dir.path().join("nope.safetensors"), "nope.safetensors")] {
        h.state_mut().queue(Command::SetCheckpoint(Some(bad)));
        h.run_steps(1);
        wait_for_trace(&mut h);
        assert_eq!(h.state().message().unwrap().level, Level::Error, "{}", message(&h));
        assert!(message(&h).contains(says), "{}", message(&h));
    }
    h.get_by_label("Init from seed").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.checkpoint, None);
    assert_eq!(h.state().computed().unwrap().loss, seed_loss);
}

#[test]
fn sessions_without_diagnostics_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.ron");
    std::fs::write(&path, "(format_version: 1, config: Tiny, len: 40)").unwrap();
    let s = session::load(&path).unwrap();
    assert_eq!(s.bisect, None);
    assert_eq!(s.ladder_fault, None);
    assert_eq!(s.bisect_max_len, 512);
}
