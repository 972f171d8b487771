//! Each operator on a hand-written snippet: exactly the mutants expected
//! (count, place, replaced text, replacement).

use super::expect;
use crate::mutate::Operator;

#[test]
fn arithmetic_swap_changes_binary_operators_only() {
    let src = "void f() {\n    x = a + b * c - -d;\n    y = i++ + 1;\n    z += w / 2.0;\n}\n";
    expect(
        src,
        Operator::ArithmeticSwap,
        &[(2, 11, "+", "-"), (2, 15, "*", "/"), (2, 19, "-", "+"), (3, 13, "+", "-"), (4, 12, "/", "*")],
    );
}

#[test]
fn relational_swap_moves_each_comparison() {
    let src = "void f() {\n    if (a < b && c >= d) x = 1;\n    bool e = p == q || r != s;\n    uint s = a << 2u;\n    \
               t = u <= v ? w > 0 : 1;\n}\n";
    expect(
        src,
        Operator::RelationalSwap,
        &[
            (2, 11, "<", "<="),
            (2, 11, "<", ">"),
            (2, 20, ">=", ">"),
            (3, 16, "==", "!="),
            (3, 26, "!=", "=="),
            (5, 11, "<=", "<"),
            (5, 20, ">", ">="),
            (5, 20, ">", "<"),
        ],
    );
}

#[test]
fn integer_literal_moves_bounds_but_not_layouts_or_names() {
    let src = "#version 450\nlayout(local_size_x = 64, local_size_y = 1) in;\nlayout(std430, set = 0, binding = 1) \
               buffer B { float b[]; };\nvoid main() {\n    for (uint i = 0u; i < 16u; ++i) b[i] = float(i) * \
               vec4(1).x;\n    uint m = 0x0fffu + l1 + 7;\n}\n";
    expect(
        src,
        Operator::IntegerLiteral,
        &[
            (5, 19, "0u", "1u"),
            (5, 27, "16u", "17u"),
            (5, 27, "16u", "15u"),
            (5, 60, "1", "2"),
            (5, 60, "1", "0"),
            (6, 14, "0x0fffu", "0x1000u"),
            (6, 14, "0x0fffu", "0x0ffeu"),
            (6, 29, "7", "8"),
            (6, 29, "7", "6"),
        ],
    );
}

#[test]
fn integer_literal_keeps_hex_case_and_stays_in_range() {
    let src = "void f() {\n    x = 0xFFu + 0xffffffffu + 2147483647;\n}\n";
    expect(
        src,
        Operator::IntegerLiteral,
        &[
            (2, 9, "0xFFu", "0x100u"),
            (2, 9, "0xFFu", "0xFEu"),
            (2, 17, "0xffffffffu", "0xfffffffeu"),
            (2, 31, "2147483647", "2147483646"),
        ],
    );
}

#[test]
fn index_shift_moves_indices_not_declarations() {
    let src = "shared float hs[2][64];\nvoid f(uint i) {\n    float v[4];\n    x = a[i] + b[k * 2u + j][0] + c[i < n \
               ? i : 0u];\n    y = float[2](1.0, 2.0)[i];\n    [[unroll]] for (uint j = 0u; j < 4u; ++j) v[j] = \
               hs[0][j];\n}\n";
    expect(
        src,
        Operator::IndexShift,
        &[
            (4, 11, "i", "i + 1"),
            (4, 11, "i", "i - 1"),
            (4, 18, "k * 2u + j", "k * 2u + j + 1"),
            (4, 18, "k * 2u + j", "k * 2u + j - 1"),
            (4, 37, "i < n ? i : 0u", "(i < n ? i : 0u) + 1"),
            (4, 37, "i < n ? i : 0u", "(i < n ? i : 0u) - 1"),
            // An index of a constructor's result; the array type's size is not one.
            (5, 28, "i", "i + 1"),
            (5, 28, "i", "i - 1"),
            (6, 49, "j", "j + 1"),
            (6, 49, "j", "j - 1"),
            (6, 60, "j", "j + 1"),
            (6, 60, "j", "j - 1"),
        ],
    );
}

#[test]
fn delete_barrier_deletes_each_barrier_statement() {
    let src = "void main() {\n    memoryBarrierShared();\n    barrier();\n    if (x) subgroupBarrier();\n    \
               controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, 0, 0);\n    groupMemoryBarrier(); \
               barrierLike();\n    // barrier();\n}\n";
    expect(
        src,
        Operator::DeleteBarrier,
        &[
            (2, 5, "memoryBarrierShared();", ""),
            (3, 5, "barrier();", ""),
            // The body of the `if` becomes an empty statement, not the next one.
            (4, 12, "subgroupBarrier();", ";"),
            (5, 5, "controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, 0, 0);", ""),
            (6, 5, "groupMemoryBarrier();", ""),
        ],
    );
}

const STATEMENTS: &str = "void f() {\n    uint i = 0u;\n    x = 1.0;\n    acc += a * b;\n    y[i] -= 2.0;\n    i++;\n    \
                          store(x, y);\n    if (c) z = 3; else w = 4;\n    for (uint k = 0u; k < n; k += 1u) { t *= \
                          2.0; }\n    barrier();\n    return;\n}\n";

#[test]
fn delete_statement_deletes_simple_statements_only() {
    expect(
        STATEMENTS,
        Operator::DeleteStatement,
        &[
            (3, 5, "x = 1.0;", ""),
            (4, 5, "acc += a * b;", ""),
            (5, 5, "y[i] -= 2.0;", ""),
            (6, 5, "i++;", ""),
            (7, 5, "store(x, y);", ""),
            (8, 12, "z = 3;", ";"),
            (8, 24, "w = 4;", ";"),
            (9, 41, "t *= 2.0;", ""),
        ],
    );
}

#[test]
fn delete_accumulation_forgets_what_was_held() {
    expect(STATEMENTS, Operator::DeleteAccumulation, &[(4, 9, "+=", "="), (5, 10, "-=", "=")]);
}

#[test]
fn swap_operands_respects_precedence_and_associativity() {
    let src = "float f(float a, float b) {\n    float d = a - b;\n    float e = a * x - f(b) / (c + 1.0);\n    float g \
               = p - q - r;\n    float h = -a / b * c;\n    float i = a - a;\n    return a + -b;\n}\n";
    expect(
        src,
        Operator::SwapOperands,
        &[
            (2, 15, "a - b", "b - a"),
            (3, 15, "a * x - f(b) / (c + 1.0)", "f(b) / (c + 1.0) - a * x"),
            (3, 23, "f(b) / (c + 1.0)", "(c + 1.0) / f(b)"),
            (4, 15, "p - q", "q - p"),
            (4, 15, "p - q - r", "r - (p - q)"),
            (5, 15, "-a / b", "b / (-a)"),
        ],
    );
}

#[test]
fn float_constant_changes_each_form() {
    let src = "void f() {\n    x = 1.0 + 0.5 * 2.5 - 0.0;\n    y = 1e-6 + 1.5e+3f + .25 + 3. + 2.0lf;\n    z = \
               vec4(1);\n}\n";
    expect(
        src,
        Operator::FloatConstant,
        &[
            (2, 9, "1.0", "0.0"),
            (2, 9, "1.0", "2.0"),
            (2, 15, "0.5", "1.0"),
            (2, 21, "2.5", "5.0"),
            (2, 21, "2.5", "1.25"),
            (2, 27, "0.0", "1.0"),
            (3, 9, "1e-6", "2e-6"),
            (3, 9, "1e-6", "5e-7"),
            (3, 16, "1.5e+3f", "3000.0f"),
            (3, 16, "1.5e+3f", "750.0f"),
            (3, 26, ".25", "0.5"),
            (3, 26, ".25", "0.125"),
            (3, 32, "3.", "6.0"),
            (3, 32, "3.", "1.5"),
            (3, 37, "2.0lf", "4.0lf"),
            (3, 37, "2.0lf", "1.0lf"),
        ],
    );
}

#[test]
fn early_return_enters_bodies_in_main_only() {
    let src = "void helper() {\n    for (int i = 0; i < 3; ++i) { x += 1; }\n}\nvoid main() {\n    for (uint i = 0u; i \
               < n; ++i) {\n        if (i == 3u) break;\n        while (k > 0u) k -= 1u;\n        if (a) {\n        \
               }\n        if (b) { return; }\n    }\n    for (uint j = 0u; j < 2u; ++j)\n        for (uint k = 0u; k \
               < 2u; ++k)\n            acc[j][k] = 0.0;\n}\n";
    expect(
        src,
        Operator::EarlyReturn,
        &[
            (5, 35, "{", "{ return;"),
            (6, 22, "break;", "{ return; break; }"),
            (7, 24, "k -= 1u;", "{ return; k -= 1u; }"),
            (14, 13, "acc[j][k] = 0.0;", "{ return; acc[j][k] = 0.0; }"),
        ],
    );
}

#[test]
fn every_operator_together_in_source_order() {
    let src = "void main() {\n    if (a < 2u) x[i] += 1.0 - y;\n}\n";
    let all = crate::mutate::generate("t.comp", src, &Operator::ALL);
    let places: Vec<(usize, usize)> = all.iter().map(|m| (m.line, m.column)).collect();
    let mut sorted = places.clone();
    sorted.sort();
    assert_eq!(places, sorted, "mutants in source order");
    let ops: std::collections::BTreeSet<Operator> = all.iter().map(|m| m.operator).collect();
    let want = [
        Operator::ArithmeticSwap,
        Operator::RelationalSwap,
        Operator::IntegerLiteral,
        Operator::IndexShift,
        Operator::DeleteStatement,
        Operator::DeleteAccumulation,
        Operator::SwapOperands,
        Operator::FloatConstant,
        Operator::EarlyReturn,
    ];
    assert_eq!(ops, want.into_iter().collect(), "{all:#?}");
    // Asking for some operators gives exactly their mutants of the whole set.
    let some = crate::mutate::generate("t.comp", src, &[Operator::FloatConstant, Operator::ArithmeticSwap]);
    let filtered: Vec<_> = all
        .iter()
        .filter(|m| matches!(m.operator, Operator::FloatConstant | Operator::ArithmeticSwap))
        .cloned()
        .collect();
    assert_eq!(some, filtered);
}
