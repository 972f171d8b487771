//! The dataset API as the rest of dualscope (and the CLI) sees it.

mod common;

use common::Dir;
use dualscope::dataset::{Dataset, DatasetError, DatasetKind, RandomWindows, corpus, default_dataset};

#[test]
fn files_open_by_kind_and_summarise() {
    let dir = Dir::new();
    let text = dir.file("corpus.txt", "hello, world\n".repeat(100).as_bytes());
    let docs = dir.file("x.jsonl", b"{\"text\":\"first document\"}\n\n{\"text\":\"second\"}\n");

    let t = Dataset::open(&text).unwrap();
    assert_eq!((t.kind(), t.num_documents()), (DatasetKind::Bytes, 1));
    assert_eq!(t.to_string(), "corpus.txt: 1.3 kB of bytes");
    let j = Dataset::open(&docs).unwrap();
    assert_eq!((j.kind(), j.num_documents()), (DatasetKind::Jsonl, 2));
    assert_eq!(j.to_string(), "x.jsonl: 2 documents, 45 B");
    assert_eq!(j.content_hash().len(), 16);
    assert_ne!(j.content_hash(), t.content_hash());

    let b = j.documents(0, 2, None).unwrap();
    assert_eq!((b.rows, b.lens.clone()), (2, vec![14, 6]));
}

#[test]
fn a_training_run_gets_the_same_batch_for_the_same_step() {
    let data = default_dataset();
    assert_eq!(data.name(), "embedded:synthetic");
    assert_eq!(data.bytes(), &corpus(dualscope::dataset::synthetic::DEFAULT_SEED, 1 << 20)[..]);
    let run = RandomWindows::new(1234, 8, 129);
    let steps: Vec<_> = run.iter(&data).take(4).collect::<Result<_, _>>().unwrap();
    for (k, batch) in steps.iter().enumerate() {
        assert_eq!((batch.rows, batch.t), (8, 128));
        assert_eq!(batch.num_targets(), 8 * 128);
        assert_eq!(*batch, run.at(&default_dataset(), k as u64).unwrap());
    }
}

#[test]
fn errors_are_one_line_and_name_the_file() {
    let dir = Dir::new();
    let bad = dir.file("bad.jsonl", b"{\"text\":\"fine\"}\n{\"text\":\"unterminated}\n");
    let err = Dataset::open(&bad).unwrap_err();
    assert!(matches!(err, DatasetError::BadJson { line: 2, .. }));
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{}: line 2: bad JSON: ", bad.display())), "{msg}");
    assert!(!msg.contains('\n'));
}
