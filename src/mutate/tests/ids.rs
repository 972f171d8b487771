//! Ids (their form, their stability, finding a mutant again), `apply` and
//! `diff`, serde, and `sample`.

use std::collections::BTreeSet;

use super::assert_applies;
use crate::mutate::{Mutant, MutateError, Operator, find, generate, parse_id, sample};

/// Two pairs of identical lines (`memoryBarrierShared();`, `barrier();`) with
/// different neighbours, and two identical statements.
const SRC: &str = "void main() {\n    memoryBarrierShared();\n    barrier();\n    x[i] = a - b;\n    \
                   memoryBarrierShared();\n    barrier();\n    y[i] = a - b;\n    y[i] = a - b;\n}\n";

#[test]
fn ids_read_kernel_operator_place_and_hash() {
    let src = "void f() {\n    if (a < b) x = 1;\n}\n";
    let ms = generate("gru_fwd_seq.comp", src, &[Operator::RelationalSwap]);
    assert_eq!(ms.len(), 2);
    for (k, m) in ms.iter().enumerate() {
        assert!(m.id.starts_with(&format!("gru_fwd_seq:relational_swap:2:11:{k}:")), "{}", m.id);
        let p = parse_id(&m.id).unwrap();
        assert_eq!((p.kernel.as_str(), p.operator, p.line, p.column, p.k), ("gru_fwd_seq", m.operator, 2, 11, k));
        assert_eq!(p.to_string(), m.id);
    }
    assert_ne!(parse_id(&ms[0].id).unwrap().hash, parse_id(&ms[1].id).unwrap().hash);
    let inc = generate("include/common.glsl", src, &[Operator::RelationalSwap]);
    assert!(inc[0].id.starts_with("include/common:relational_swap:2:11:0:"), "{}", inc[0].id);
    assert_eq!(inc[0].kernel, "include/common.glsl");
}

#[test]
fn ids_that_do_not_parse_are_errors() {
    for bad in [
        "",
        "nope",
        "k:arithmetic_swap:1:1:0",
        "k:arithmetic_swap:x:1:0:0000abcd-0000",
        "k:arithmetic_swap:1:1:0:abcd-0000",
        "k:arithmetic_swap:0:1:0:0000abcd-0000",
        "k:arithmetic_swap:1:1:0:0000abcd",
    ] {
        assert!(matches!(parse_id(bad), Err(MutateError::BadId { .. })), "{bad}: {:?}", parse_id(bad));
    }
    let unknown = parse_id("k:bogus_swap:1:1:0:0000abcd-0000");
    assert_eq!(unknown, Err(MutateError::UnknownOperator("bogus_swap".into())));
    assert!(unknown.unwrap_err().to_string().contains("arithmetic_swap"));
    assert!(find(&[], "nope").is_err());
}

#[test]
fn ids_are_unique_and_stable_when_lines_move() {
    let old = generate("k.comp", SRC, &Operator::ALL);
    let ids: BTreeSet<&str> = old.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids.len(), old.len(), "ids are unique");
    let moved = format!("// a new first line\nconst uint EXTRA = 3u;\n{SRC}");
    let new = generate("k.comp", &moved, &Operator::ALL);
    assert_eq!(new.len(), old.len() + 2, "the new line's own literal mutants");
    for m in &old {
        let hit = find(&new, &m.id).unwrap().unwrap_or_else(|| panic!("{} is lost", m.id));
        assert_eq!((hit.line, hit.column, hit.operator), (m.line + 2, m.column, m.operator), "{}", m.id);
        assert_eq!((&hit.original, &hit.replacement), (&m.original, &m.replacement));
        // The line number changed and the hash stayed; so did the context,
        // but for the lines within two of the new ones.
        assert_ne!(hit.id, m.id);
        let (was, is) = (m.id.rsplit(':').next().unwrap(), hit.id.rsplit(':').next().unwrap());
        assert_eq!(was[..8], is[..8], "{}", m.id);
        if m.line > 2 {
            assert_eq!(was, is, "{}", m.id);
        }
        assert_eq!(find(&old, &m.id).unwrap(), Some(m));
        // The old mutant no longer fits: its place holds another line.
        assert!(matches!(m.apply(&moved), Err(MutateError::NotAtPlace { .. })), "{}", m.id);
        assert_applies(hit, &moved);
    }
}

#[test]
fn an_id_finds_nothing_once_its_line_changed() {
    let old = generate("k.comp", SRC, &[Operator::SwapOperands]);
    let x = old.iter().find(|m| m.line == 4).unwrap();
    let edited = SRC.replace("x[i] = a - b;", "x[i] = a - c;");
    let new = generate("k.comp", &edited, &[Operator::SwapOperands]);
    assert_eq!(find(&new, &x.id).unwrap(), None);
    assert!(x.apply(&edited).is_err());
}

#[test]
fn a_changed_neighbour_refuses_apply_and_tells_identical_lines_apart() {
    let barrier = generate("k.comp", SRC, &[Operator::DeleteBarrier]).remove(1);
    assert_eq!((barrier.line, barrier.original.as_str()), (3, "barrier();"));
    // Line 4, after the first `barrier();` (line 3), changes: `apply`
    // refuses, and `find` still tells it from the other `barrier();` by the
    // lines before it.
    let below = SRC.replace("    x[i] = a - b;\n", "    x[i] = a - b; // changed\n");
    assert!(matches!(barrier.apply(&below), Err(MutateError::NotAtPlace { .. })));
    let again = generate("k.comp", &below, &[Operator::DeleteBarrier]);
    assert_eq!(find(&again, &barrier.id).unwrap().map(|m| m.line), Some(3));
    // Lines on both sides change: nothing, rather than the other one.
    let both = below.replace("{\n    memoryBarrierShared();", "{\n    memoryBarrierShared(); // too");
    let again = generate("k.comp", &both, &[Operator::DeleteBarrier]);
    assert_eq!(again.iter().filter(|m| m.original == "barrier();").count(), 2);
    assert_eq!(find(&again, &barrier.id).unwrap(), None);
    // Line 8 changes: line 7, no longer one of two, is found with its new
    // neighbour.
    let y = generate("k.comp", SRC, &[Operator::SwapOperands]).into_iter().find(|m| m.line == 7).unwrap();
    let last = SRC.replace("    y[i] = a - b;\n}", "    y[i] = a - b; // last\n}");
    let now = generate("k.comp", &last, &[Operator::SwapOperands]);
    let hit = find(&now, &y.id).unwrap().unwrap();
    assert_eq!((hit.line, hit.column, hit.replacement.as_str()), (7, 12, "b - a"));
    assert_ne!(hit.id, y.id, "the context changed");
    assert!(y.apply(&last).is_err());
}

#[test]
fn apply_changes_one_place_and_refuses_another_source() {
    for m in generate("k.comp", SRC, &Operator::ALL) {
        assert_applies(&m, SRC);
    }
    let m = &generate("k.comp", SRC, &[Operator::ArithmeticSwap])[0];
    assert_eq!((m.line, m.column, m.original.as_str(), m.replacement.as_str()), (4, 14, "-", "+"));
    assert_eq!(m.apply(SRC).unwrap(), SRC.replacen("x[i] = a - b;", "x[i] = a + b;", 1));
    let moved_column = SRC.replace("x[i] = a - b;", "x[i]  = a - b;");
    let err = m.apply(&moved_column).unwrap_err();
    assert!(matches!(err, MutateError::NotAtPlace { line: 4, column: 14, .. }), "{err:?}");
    assert!(err.to_string().contains("x[i]  = a - b;"), "{err}");
    // The original still at its place but the line otherwise changed.
    let same_place = SRC.replace("x[i] = a - b;", "x[i] = a - c;");
    assert!(m.apply(&same_place).is_err());
    assert!(m.apply("void main() {}\n").is_err(), "a shorter file");
    let mut lost = m.clone();
    lost.id = "k:arithmetic_swap:4:14".into();
    assert!(matches!(lost.apply(SRC), Err(MutateError::BadId { .. })));
}

#[test]
fn diff_shows_the_line_with_one_line_of_context() {
    let m = &generate("k.comp", SRC, &[Operator::ArithmeticSwap])[0];
    let want = format!(
        "--- a/k.comp\n+++ b/k.comp\n@@ -3,3 +3,3 @@ {}\n     barrier();\n-    x[i] = a - b;\n+    x[i] = a + b;\n     \
         memoryBarrierShared();\n",
        m.id
    );
    assert_eq!(m.diff(SRC), want);
    let first = &generate("k.comp", SRC, &[Operator::DeleteBarrier])[0];
    assert!(first.diff("void f() {}\n").contains("does not fit"));
    let top = &generate("k.comp", "x = 1.0;\n", &[Operator::FloatConstant])[0];
    assert_eq!(
        top.diff("x = 1.0;\n"),
        format!("--- a/k.comp\n+++ b/k.comp\n@@ -1,1 +1,1 @@ {}\n-x = 1.0;\n+x = 0.0;\n", top.id)
    );
}

#[test]
fn operators_and_mutants_round_trip_through_names_and_json() {
    for op in Operator::ALL {
        assert_eq!(Operator::parse(op.name()), Ok(op));
        assert_eq!(serde_json::to_string(&op).unwrap(), format!("\"{}\"", op.name()));
    }
    assert!(matches!(Operator::parse("swap"), Err(MutateError::UnknownOperator(_))));
    for m in generate("k.comp", SRC, &Operator::ALL) {
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Mutant>(&json).unwrap(), m);
    }
}

/// Mutants of a few real kernels: every operator, in unequal numbers.
fn some_real_mutants() -> Vec<Mutant> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    ["gru_fwd_seq.comp", "attn_fwd.comp", "include/attn_tile.glsl", "include/model.glsl"]
        .iter()
        .flat_map(|k| generate(k, &std::fs::read_to_string(dir.join(k)).unwrap(), &Operator::ALL))
        .collect()
}

#[test]
fn sample_is_deterministic_and_stratified() {
    let all = some_real_mutants();
    let present: BTreeSet<Operator> = all.iter().map(|m| m.operator).collect();
    assert!(present.len() >= 9, "{present:?}");
    let a = sample(&all, 40, 7);
    assert_eq!(a.len(), 40);
    assert_eq!(a, sample(&all, 40, 7), "the same seed, the same sample");
    assert_ne!(a, sample(&all, 40, 8), "another seed, another sample");
    let got: BTreeSet<Operator> = a.iter().map(|m| m.operator).collect();
    assert_eq!(got, present, "every operator present is represented");
    let unique: BTreeSet<&str> = a.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(unique.len(), a.len());
    // In the list's order, and in proportion: the largest operator gets most.
    let pos: Vec<usize> = a.iter().map(|m| all.iter().position(|x| x.id == m.id).unwrap()).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]));
    let count = |v: &[Mutant], op| v.iter().filter(|m| m.operator == op).count();
    let biggest = *present.iter().max_by_key(|op| count(&all, **op)).unwrap();
    assert!(present.iter().all(|op| count(&a, *op) <= count(&a, biggest)));
    // Fewer than the operators: one each of as many operators.
    let few = sample(&all, 3, 1);
    assert_eq!(few.iter().map(|m| m.operator).collect::<BTreeSet<_>>().len(), 3);
    assert_eq!(sample(&all, all.len() + 5, 1), all);
    assert!(sample(&all, 0, 1).is_empty());
}
