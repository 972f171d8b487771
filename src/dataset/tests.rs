//! Tests of `Dataset` on real files: every error, byte and JSON-lines datasets,
//! rows and batches, a large mapped file, and properties over arbitrary input.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use proptest::prelude::*;

use super::*;

/// Writes `bytes` to `name` inside `dir` and returns the path.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn open_err(path: &Path) -> (DatasetError, String) {
    let err = Dataset::open(path).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with(&path.display().to_string()), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    (err, msg)
}

fn jsonl(docs: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for d in docs {
        serde_json::to_writer(&mut out, &serde_json::json!({ "text": d })).unwrap();
        out.push(b'\n');
    }
    out
}

#[test]
fn open_errors_name_the_path_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let (e, msg) = open_err(&d.join("missing.txt"));
    assert!(matches!(e, DatasetError::NotFound { .. }) && msg.ends_with(": no such file"));
    let (e, msg) = open_err(d);
    assert!(matches!(e, DatasetError::IsDirectory { .. }) && msg.contains("is a directory"));
    let (e, msg) = open_err(&write(d, "empty.txt", b""));
    assert!(matches!(e, DatasetError::Empty { .. }) && msg.ends_with(": is empty"));
    let (e, _) = open_err(&write(d, "empty.jsonl", b""));
    assert!(matches!(e, DatasetError::Empty { .. }));
    let (e, msg) = open_err(&write(d, "one.bin", b"x"));
    assert!(matches!(e, DatasetError::TooShort { len: 1, .. }));
    assert!(msg.contains("needs at least 2 bytes: one input and its target"), "{msg}");

    let (e, msg) = open_err(&write(d, "blank.jsonl", b"\n  \n\r\n"));
    assert!(matches!(e, DatasetError::NoDocuments { .. }) && msg.contains("no documents"));
    let (e, msg) = open_err(&write(d, "bad.jsonl", b"{\"text\":\"ok\"}\n\n{\"text\": oops}\n"));
    assert!(matches!(e, DatasetError::BadJson { line: 3, .. }), "{msg}");
    assert!(msg.contains("line 3: bad JSON"), "{msg}");
    let (e, msg) = open_err(&write(d, "notext.jsonl", b"{\"text\":\"ok\"}\n{\"body\":\"x\"}\n"));
    assert!(matches!(e, DatasetError::NoText { line: 2, .. }), "{msg}");
    assert!(msg.contains("line 2: no string `text` field"), "{msg}");
    let (e, msg) = open_err(&write(d, "number.jsonl", b"{\"text\":[\"a\"]}"));
    assert!(matches!(e, DatasetError::NoText { line: 1, .. }) && msg.contains("an array"), "{msg}");
    let (e, msg) = open_err(&write(d, "binary.jsonl", b"{\"text\":\"\xff\xfe\"}\n"));
    assert!(matches!(e, DatasetError::BadJson { line: 1, .. }), "{msg}");
    let (e, msg) = open_err(&write(d, "short.jsonl", &jsonl(&["a", "", "\u{1}"])));
    assert!(matches!(e, DatasetError::DocumentsTooShort { documents: 3, .. }), "{msg}");
    assert!(msg.contains("shorter than 2 bytes"), "{msg}");
}

#[test]
fn a_row_file_is_all_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let not_json = write(d, "raw.jsonl", b"not json\xff");
    assert_eq!(read_row_file(&not_json).unwrap(), b"not json\xff");
    assert!(matches!(read_row_file(&write(d, "e", b"")), Err(DatasetError::Empty { .. })));
    assert!(matches!(read_row_file(&write(d, "o", b"1")), Err(DatasetError::TooShort { len: 1, .. })));
    assert!(matches!(read_row_file(d), Err(DatasetError::IsDirectory { .. })));
    assert!(matches!(read_row_file(&d.join("nope")), Err(DatasetError::NotFound { .. })));
}

#[test]
fn special_and_unreadable_files_are_errors() {
    let dev_null = Path::new("/dev/null");
    if dev_null.exists() {
        assert!(matches!(Dataset::open(dev_null), Err(DatasetError::NotAFile { .. })));
    }
    let e = error::io_error(Path::new("x"), std::io::ErrorKind::PermissionDenied.into());
    assert_eq!(e.to_string(), "x: permission denied");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "secret.txt", b"hello");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        // Root reads anything; the check only means something for other users.
        if std::fs::File::open(&path).is_err() {
            let (e, msg) = open_err(&path);
            assert!(matches!(e, DatasetError::PermissionDenied { .. }), "{msg}");
        }
    }
}

#[test]
fn binary_files_open_and_window() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..=255u8).rev().chain([0xff, 0xfe, 0, 0x80]).collect();
    let d = Dataset::open(&write(dir.path(), "blob.bin", &bytes)).unwrap();
    assert_eq!((d.kind(), d.name(), d.num_documents()), (DatasetKind::Bytes, "blob.bin", 1));
    assert_eq!(d.path(), Some(dir.path().join("blob.bin").as_path()));
    assert_eq!(d.len_bytes(), 260);
    assert_eq!(d.len_tokens(), 260);
    assert!(!d.is_mapped());
    assert_eq!(&*d.document(0).unwrap(), &bytes[..]);
    assert!(matches!(d.document(1), Err(DatasetError::NoSuchDocument { index: 1, count: 1, .. })));
    assert_eq!(d.window(250, 10).unwrap(), &bytes[250..]);
    assert_eq!(d.window(0, 2).unwrap(), [255, 254]);
    assert_eq!(d.to_string(), "blob.bin: 260 B of bytes");

    let err = d.window(251, 10).unwrap_err().to_string();
    assert_eq!(err, "blob.bin: window of 10 bytes at offset 251 runs past the end (251 + 10 > 260 bytes)");
    assert!(matches!(d.window(usize::MAX, 2), Err(DatasetError::WindowOutOfRange { .. })));
    assert!(matches!(d.window(0, 1), Err(DatasetError::RowTooShort { len: 1, .. })));
}

#[test]
fn jsonl_documents_pad_into_a_batch_with_masks() {
    let docs = ["hello world", "hi", "x", "caf\u{e9}", "line\none"];
    let mut file = jsonl(&docs);
    file.extend_from_slice(b"\n   \n"); // blank lines are not documents
    let d = Dataset::from_bytes("docs.jsonl", file).unwrap();
    assert_eq!((d.kind(), d.num_documents()), (DatasetKind::Jsonl, 5));
    assert_eq!(d.to_string(), format!("docs.jsonl: 5 documents, {} B", d.len_bytes()));
    assert_eq!(d.document_len(3).unwrap(), 5);

    let b = d.documents(0, 5, None).unwrap();
    // "x" is skipped: 4 rows, the longest 11 bytes.
    assert_eq!((b.rows, b.t), (4, 10));
    assert_eq!(b.lens, [11, 2, 5, 8]);
    assert_eq!(b.row(2), "caf\u{e9}".as_bytes());
    assert_eq!(b.row(3), b"line\none");
    assert!(b.mask(1, 0) && !b.mask(1, 1));
    assert!(b.mask(2, 3) && !b.mask(2, 4));
    assert_eq!((b.input(1, 1), b.input(1, 5)), (b'i', 0));
    assert_eq!(b.num_targets(), 10 + 1 + 4 + 7);

    let cut = d.documents(0, 2, Some(4)).unwrap();
    assert_eq!((cut.rows, cut.t, cut.lens.clone()), (2, 3, vec![4, 2]));
    assert_eq!(cut.row(0), b"hell");

    let name = |e: DatasetError| e.to_string();
    assert!(matches!(d.documents(2, 1, None), Err(DatasetError::NoUsableDocuments { .. })));
    assert!(matches!(d.documents(0, 0, None), Err(DatasetError::NoRows { .. })));
    assert!(matches!(d.documents(0, 2, Some(1)), Err(DatasetError::RowTooShort { len: 1, .. })));
    assert_eq!(
        name(d.documents(3, 3, None).unwrap_err()),
        "docs.jsonl: 3 documents from document 3 run past the end (there are 5)"
    );
    assert!(matches!(d.documents(usize::MAX, 2, None), Err(DatasetError::DocumentsOutOfRange { .. })));
}

#[test]
fn jsonl_escapes_decode() {
    let dir = tempfile::tempdir().unwrap();
    let line = br#"{"id": 1, "text": "a\nb \u00e9 \"q\" \\ \ud83d\ude00 tab\t", "meta": {"x": [1, 2]}}"#;
    let d = Dataset::open(&write(dir.path(), "esc.jsonl", line)).unwrap();
    let expected = "a\nb \u{e9} \"q\" \\ \u{1f600} tab\t";
    assert_eq!(&*d.document(0).unwrap(), expected.as_bytes());
    assert_eq!(d.len_tokens(), expected.len());
    assert_eq!(d.window(0, 4).unwrap(), "a\nb ".as_bytes());
}

#[test]
fn jsonl_windows_address_documents_joined_by_newlines() {
    let d = Dataset::from_bytes("w.jsonl", jsonl(&["abc", "", "de", "f\u{e9}"])).unwrap();
    let joined = "abc\n\nde\nf\u{e9}".as_bytes();
    assert_eq!(d.len_tokens(), joined.len());
    for offset in 0..joined.len() {
        for len in 2..=joined.len() - offset {
            assert_eq!(d.window(offset, len).unwrap(), &joined[offset..offset + len], "{offset} {len}");
        }
    }
    assert!(d.window(joined.len() - 1, 2).is_err());
}

#[test]
fn random_windows_are_deterministic_and_in_bounds() {
    let d = default_dataset();
    let a = d.random_windows(42, 8, 64).unwrap();
    assert_eq!(a, d.random_windows(42, 8, 64).unwrap());
    assert_ne!(a, d.random_windows(43, 8, 64).unwrap());
    assert_eq!((a.rows, a.t), (8, 63));
    let hay = d.bytes();
    for b in 0..a.rows {
        assert_eq!(a.lens[b], 64);
        assert!(hay.windows(64).any(|w| w == a.row(b)));
    }
    assert!(matches!(d.random_windows(1, 0, 8), Err(DatasetError::NoRows { .. })));
    assert!(matches!(d.random_windows(1, 2, 1), Err(DatasetError::RowTooShort { .. })));

    // Shorter than a row: the whole content in every row.
    let small = Dataset::from_bytes("small", b"abcde".to_vec()).unwrap();
    let s = small.random_windows(5, 3, 16).unwrap();
    assert_eq!((s.rows, s.t, s.lens.clone()), (3, 4, vec![5, 5, 5]));
    assert_eq!(s.row(2), b"abcde");
}

#[test]
fn jsonl_random_windows_stay_inside_one_document() {
    let docs = ["ab", "x", "the quick brown fox", "0123456789"];
    let d = Dataset::from_bytes("r.jsonl", jsonl(&docs)).unwrap();
    let b = d.random_windows(9, 64, 8).unwrap();
    assert_eq!(b.t, 7);
    for r in 0..b.rows {
        let row = b.row(r);
        assert!(row.len() >= 2 && row.len() <= 8);
        assert!(docs.iter().any(|doc| doc.as_bytes().windows(row.len()).any(|w| w == row)), "{row:?}");
        assert_eq!(b.lens[r] == 2, row == b"ab");
    }
    // The short "ab" document is padded and masked.
    let r = (0..b.rows).find(|&r| b.lens[r] == 2).expect("64 rows pick \"ab\" at least once");
    assert!(b.mask(r, 0) && !b.mask(r, 1) && b.input(r, 2) == 0);
}

#[test]
fn random_windows_per_step() {
    let d = default_dataset();
    let run = RandomWindows::new(7, 4, 32);
    let first: Vec<Batch> = run.iter(&d).take(3).map(Result::unwrap).collect();
    assert_eq!(first[2], run.at(&d, 2).unwrap());
    assert_eq!(first[0], d.random_windows(run.step_seed(0), 4, 32).unwrap());
    assert_ne!(first[0], first[1]);
    assert_ne!(run.step_seed(1), RandomWindows::new(8, 4, 32).step_seed(1));
}

#[test]
fn content_hash_is_fnv1a() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    let d = Dataset::from_bytes("h", b"foobar".to_vec()).unwrap();
    assert_eq!(d.content_hash(), "85944171f73967e8");
    assert_eq!(d.content_hash_u64(), 0x8594_4171_f739_67e8);
}

#[test]
fn datasets_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Dataset>();
    assert_send_sync::<DatasetError>();
}

#[test]
fn human_sizes() {
    let cases = [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1_234_567, "1.2 MB"), (999_999, "1.0 MB")];
    for (n, s) in cases {
        assert_eq!(human_size(n), s);
    }
}

#[test]
fn a_large_file_is_mapped_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    let mut f = std::fs::File::create(&path).unwrap();
    let len = 50 << 20;
    f.set_len(len).unwrap(); // sparse: nothing is written but the tail
    f.seek(SeekFrom::Start(len - 4)).unwrap();
    f.write_all(b"tail").unwrap();
    drop(f);

    let t = Instant::now();
    let d = Dataset::open(&path).unwrap();
    let opened = t.elapsed();
    assert!(d.is_mapped());
    assert_eq!(d.len_bytes(), 50 << 20);
    assert!(opened.as_secs_f64() < 1.0, "open took {opened:?}");
    assert_eq!(d.window((50 << 20) - 6, 6).unwrap(), b"\0\0tail");
    assert_eq!(d.to_string(), "big.bin: 52.4 MB of bytes");
    let b = d.random_windows(3, 4, 128).unwrap();
    assert_eq!(b.lens, [128; 4]);

    let t = Instant::now();
    let h = d.content_hash();
    assert!(t.elapsed().as_secs_f64() < 5.0, "hashing 50 MB took {:?}", t.elapsed());
    assert_eq!(h, format!("{:016x}", fnv1a64(d.bytes())));
}

#[test]
fn a_large_jsonl_file_is_mapped_and_indexed() {
    let docs: Vec<String> = (0..20_000).map(|i| format!("document {i}: {}", "z".repeat(i % 50))).collect();
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let d = Dataset::open(&write(dir.path(), "many.jsonl", &jsonl(&refs))).unwrap();
    assert!(d.is_mapped());
    assert_eq!(d.num_documents(), 20_000);
    assert_eq!(&*d.document(12_345).unwrap(), docs[12_345].as_bytes());
    let b = d.documents(100, 3, None).unwrap();
    assert_eq!(b.row(2), docs[102].as_bytes());
}

/// A line of a would-be JSON-lines file: a document, blank, or junk.
fn jsonl_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => ".{0,30}".prop_map(|t| serde_json::json!({ "text": t }).to_string()),
        1 => Just(String::new()),
        1 => "[ \t\r]{1,3}",
        1 => "\\PC{0,20}",
        1 => Just(r#"{"text": 1}"#.to_string()),
    ]
}

proptest! {
    #[test]
    fn opening_arbitrary_files_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        jsonl_suffix in any::<bool>(),
        seed in any::<u64>(),
        offset in 0usize..600,
        len in 0usize..600,
        batch in 0usize..5,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let name = if jsonl_suffix { "p.jsonl" } else { "p.bin" };
        let path = write(dir.path(), name, &bytes);
        let Ok(d) = Dataset::open(&path) else { return Ok(()) };
        let total = d.len_tokens();
        match d.window(offset, len) {
            Ok(w) => {
                prop_assert!(len >= 2 && offset + len <= total);
                prop_assert_eq!(w.len(), len);
                if !jsonl_suffix {
                    prop_assert_eq!(&w[..], &bytes[offset..offset + len]);
                }
            }
            Err(_) => prop_assert!(len < 2 || offset + len > total),
        }
        match d.random_windows(seed, batch, len) {
            Ok(b) => {
                prop_assert!(batch >= 1 && len >= 2);
                prop_assert_eq!(b.rows, batch);
                prop_assert!(b.t < len);
                for r in 0..b.rows {
                    let row = b.row(r);
                    prop_assert!(row.len() <= len);
                    if !jsonl_suffix {
                        prop_assert!(bytes.windows(row.len()).any(|w| w == row));
                    }
                }
            }
            Err(_) => prop_assert!(batch == 0 || len < 2),
        }
        let _ = d.documents(offset % 3, batch, Some(len));
        let _ = d.content_hash();
        let _ = d.to_string();
    }

    #[test]
    fn jsonl_like_files_never_panic(
        lines in proptest::collection::vec(jsonl_line(), 0..12),
        seed in any::<u64>(),
        offset in 0usize..200,
        len in 0usize..100,
        batch in 0usize..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "like.jsonl", lines.join("\n").as_bytes());
        let Ok(d) = Dataset::open(&path) else { return Ok(()) };
        let total = d.len_tokens();
        match d.window(offset, len) {
            Ok(w) => prop_assert!(w.len() == len && offset + len <= total),
            Err(_) => prop_assert!(len < 2 || offset + len > total),
        }
        match d.random_windows(seed, batch, len) {
            Ok(b) => prop_assert!(b.rows == batch && b.lens.iter().all(|&l| (2..=len).contains(&l))),
            Err(_) => prop_assert!(batch == 0 || len < 2),
        }
        let _ = d.documents(offset % 4, batch, None);
    }

    #[test]
    fn jsonl_documents_round_trip(docs in proptest::collection::vec(".{0,20}", 1..8)) {
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        let dir = tempfile::tempdir().unwrap();
        let result = Dataset::open(&write(dir.path(), "rt.jsonl", &jsonl(&refs)));
        if docs.iter().all(|d| d.len() < 2) {
            let is_too_short = matches!(result, Err(DatasetError::DocumentsTooShort { .. }));
            prop_assert!(is_too_short);
            return Ok(());
        }
        let d = result.unwrap();
        prop_assert_eq!(d.num_documents(), docs.len());
        for (i, doc) in docs.iter().enumerate() {
            prop_assert_eq!(&*d.document(i).unwrap(), doc.as_bytes());
        }
        let joined = docs.join("\n");
        prop_assert_eq!(d.len_tokens(), joined.len());
        if joined.len() >= 2 {
            prop_assert_eq!(d.window(0, joined.len()).unwrap(), joined.as_bytes());
        }
    }
}
