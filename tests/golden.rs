//! Golden files: what the embedded default dataset and a seeded initialisation
//! are must not drift between versions, or old sessions and reports stop
//! meaning what they said.

use dualscope::dataset::synthetic;
use dualscope::model::{Config, Params};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/synthetic-sample.txt");

#[test]
fn synthetic_corpus_matches_its_golden_sample() {
    let golden = std::fs::read(SAMPLE).expect("assets/synthetic-sample.txt");
    let now = synthetic::corpus(synthetic::DEFAULT_SEED, golden.len());
    assert_eq!(now, golden, "the embedded corpus changed; if on purpose, regenerate the sample");
    assert!(synthetic::default_dataset().bytes().starts_with(&golden));
}

#[test]
fn seeded_initialisation_is_stable() {
    let p = Params::<f32>::init(&Config::tiny(), 0);
    // First values of two tensors drawn from the SplitMix64 stream of seed 0.
    let golden = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/init-tiny-seed0.txt"))
        .expect("assets/init-tiny-seed0.txt");
    let now = format!("{:?}\n{:?}\n", &p.embed.data[..4], &p.head_bias.data[..4]);
    assert_eq!(now, golden);
}

/// Writes the golden files (run with `--ignored` after a deliberate change).
#[test]
#[ignore]
fn regenerate_golden_files() {
    std::fs::write(SAMPLE, synthetic::corpus(synthetic::DEFAULT_SEED, 4096)).unwrap();
    let p = Params::<f32>::init(&Config::tiny(), 0);
    std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/assets/init-tiny-seed0.txt"),
        format!("{:?}\n{:?}\n", &p.embed.data[..4], &p.head_bias.data[..4]),
    )
    .unwrap();
}
