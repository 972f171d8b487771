//! The scanner: what is code, what is a token, which literal is which.

use super::{expect, found};
use crate::mutate::Operator;
use crate::mutate::scan::{Kind, scan};

/// The (kind, text) of every code token of `src`.
fn tokens(src: &str) -> Vec<(Kind, &str)> {
    scan(src).tokens.iter().map(|t| (t.kind, t.text)).collect()
}

#[test]
fn literals_names_and_long_operators_are_single_tokens() {
    use Kind::{Float, Ident, Int, Punct};
    let got = tokens("f16vec2 v = vec4(l1) + 1e-6 + 0x1Fu + 2u + .5hf + 1. + 1.0e+3 + 2.0lf + 7;");
    let want = [
        (Ident, "f16vec2"),
        (Ident, "v"),
        (Punct, "="),
        (Ident, "vec4"),
        (Punct, "("),
        (Ident, "l1"),
        (Punct, ")"),
        (Punct, "+"),
        (Float, "1e-6"),
        (Punct, "+"),
        (Int, "0x1Fu"),
        (Punct, "+"),
        (Int, "2u"),
        (Punct, "+"),
        (Float, ".5hf"),
        (Punct, "+"),
        (Float, "1."),
        (Punct, "+"),
        (Float, "1.0e+3"),
        (Punct, "+"),
        (Float, "2.0lf"),
        (Punct, "+"),
        (Int, "7"),
        (Punct, ";"),
    ];
    assert_eq!(got, want);
    let ops: Vec<&str> =
        tokens("a <<= b >> c <= d -> e ++ f -- g += h || i && j != k ^^ l").into_iter().map(|t| t.1).collect();
    assert_eq!(
        ops,
        [
            "a", "<<=", "b", ">>", "c", "<=", "d", "->", "e", "++", "f", "--", "g", "+=", "h", "||", "i", "&&", "j",
            "!=", "k", "^^", "l"
        ]
    );
    // A member after a literal's index, and a swizzle, are not floats.
    assert_eq!(tokens("a[1].x"), [(Ident, "a"), (Punct, "["), (Int, "1"), (Punct, "]"), (Punct, "."), (Ident, "x")]);
}

const SKIPPED: &str = "#version 450\n#define N (4 + 1)   // N * 2\n#define M(x) \\\n    ((x) - 1)\n/* a - b\n   c < d \
                       */\n#ifdef FAST\nuint f() { return a - b; } // 1 + 2\n#else\nuint f() { return a + b; }\n  \
                       #endif\n";

#[test]
fn comments_and_preprocessor_lines_are_skipped_but_if_blocks_are_code() {
    expect(SKIPPED, Operator::ArithmeticSwap, &[(8, 21, "-", "+"), (10, 21, "+", "-")]);
    assert!(found(SKIPPED, Operator::IntegerLiteral).is_empty(), "{:?}", found(SKIPPED, Operator::IntegerLiteral));
    assert!(found(SKIPPED, Operator::RelationalSwap).is_empty());
    let all = crate::mutate::generate("t.comp", SKIPPED, &Operator::ALL);
    assert!(!all.is_empty());
    assert!(all.iter().all(|m| m.line == 8 || m.line == 10), "{all:#?}");
    let s = scan(SKIPPED);
    assert_eq!(s.skipped.len(), 8, "{:?}", s.skipped);
    // The continued #define is one directive, its second line included.
    let define = &SKIPPED[s.skipped[2].clone()];
    assert_eq!(define, "#define M(x) \\\n    ((x) - 1)");
}

#[test]
fn macro_names_and_bodies_are_not_mutated() {
    let src =
        "#define ST_F(i) uintBitsToFloat(st[i - 1u])\n#define WG 256u\nvoid main() {\n    x = ST_F(2u) * WG;\n}\n";
    let all = crate::mutate::generate("t.comp", src, &Operator::ALL);
    assert!(all.iter().all(|m| m.line == 4), "{all:#?}");
    expect(src, Operator::IntegerLiteral, &[(4, 14, "2u", "3u"), (4, 14, "2u", "1u")]);
}

#[test]
fn unary_minus_is_not_an_arithmetic_operator() {
    let src = "void f() {\n    x = -a + (-b) * f(-c, -1.0) - -d;\n    return -e;\n}\n";
    expect(src, Operator::ArithmeticSwap, &[(2, 12, "+", "-"), (2, 19, "*", "/"), (2, 33, "-", "+")]);
}

#[test]
fn template_arguments_attributes_and_layouts_are_frozen() {
    let src = "layout(local_size_x = 64) in;\nvoid main() {\n    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, \
               gl_MatrixUseA> fa[2];\n    [[unroll]] for (uint i = 0u; i < 2u; ++i) fa[i] = coopmat<float16_t, \
               gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>(0.0);\n}\n";
    expect(src, Operator::RelationalSwap, &[(4, 36, "<", "<="), (4, 36, "<", ">")]);
    // Neither the template's sizes nor the declared array's size change.
    expect(src, Operator::IntegerLiteral, &[(4, 30, "0u", "1u"), (4, 38, "2u", "3u"), (4, 38, "2u", "1u")]);
    // The declaration of `fa` is not a statement to delete, nor its size an index.
    expect(
        src,
        Operator::DeleteStatement,
        &[(4, 47, "fa[i] = coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>(0.0);", ";")],
    );
    expect(src, Operator::IndexShift, &[(4, 50, "i", "i + 1"), (4, 50, "i", "i - 1")]);
}

#[test]
fn initializer_lists_are_not_blocks() {
    let src = "void f() {\n    const float w[2] = { 1.0, 2.0 };\n    y = w[1];\n}\n";
    expect(src, Operator::DeleteStatement, &[(3, 5, "y = w[1];", "")]);
    expect(
        src,
        Operator::FloatConstant,
        &[(2, 26, "1.0", "0.0"), (2, 26, "1.0", "2.0"), (2, 31, "2.0", "4.0"), (2, 31, "2.0", "1.0")],
    );
    // The declared size stays; the index is a lone literal.
    assert!(
        super::found(src, Operator::IntegerLiteral).iter().all(|m| m.0 == 3),
        "{:?}",
        super::found(src, Operator::IntegerLiteral)
    );
}

#[test]
fn built_in_type_names_are_told_from_other_names() {
    use crate::mutate::syntax::is_type_name;
    for t in ["float", "uint", "vec4", "f16vec2", "uvec4", "mat3x4", "dmat2", "float16_t", "uint8_t", "int64_t"] {
        assert!(is_type_name(t), "{t}");
    }
    for n in ["format2", "l1", "J_t", "vector", "vec", "vec5", "main", "coopmat", "u_t"] {
        assert!(!is_type_name(n), "{n}");
    }
}
