//! Just enough structure over the token stream for the operators: matching
//! delimiters, the tokens no operator may touch, where statements start and
//! end, and the body of `main`.
//!
//! This is not a GLSL parser. It tells a block from an initializer list, a
//! declaration from an expression statement, a binary from a unary `-`, and
//! finds an operand's extent by precedence; everything it is unsure of, it
//! leaves alone (a missed mutant costs less than a wrong one).

use super::scan::{Kind, Scan, Token, scan};

/// Types written with template arguments (`coopmat<float16_t, …, 16, 16, …>`):
/// the `<` after them opens an argument list, not a comparison.
const TEMPLATE_TYPES: [&str; 4] = ["coopmat", "coopmatNV", "tensorLayoutNV", "tensorViewNV"];

/// Keywords that start a statement of control flow.
pub(crate) const CONTROL: [&str; 12] =
    ["if", "else", "for", "while", "do", "switch", "case", "default", "return", "break", "continue", "discard"];

/// Qualifiers that can only start a declaration.
const QUALIFIERS: [&str; 24] = [
    "const",
    "shared",
    "uniform",
    "buffer",
    "in",
    "out",
    "inout",
    "highp",
    "mediump",
    "lowp",
    "precision",
    "struct",
    "layout",
    "coherent",
    "volatile",
    "restrict",
    "readonly",
    "writeonly",
    "invariant",
    "precise",
    "flat",
    "smooth",
    "noperspective",
    "subroutine",
];

/// Whether `word` names a built-in type (`float`, `uint`, `vec4`, `f16vec2`,
/// `mat3x4`, `float16_t`, …).
pub(crate) fn is_type_name(word: &str) -> bool {
    const SCALARS: [&str; 6] = ["void", "bool", "int", "uint", "float", "double"];
    const VECTOR_PREFIXES: [&str; 17] =
        ["", "i", "u", "b", "d", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bf16"];
    const MATRIX_PREFIXES: [&str; 5] = ["", "d", "f16", "f32", "f64"];
    const SIZES: [&str; 12] = ["2", "3", "4", "2x2", "2x3", "2x4", "3x2", "3x3", "3x4", "4x2", "4x3", "4x4"];
    let sized = |kind: &str, prefixes: &[&str], sizes: &[&str]| {
        word.split_once(kind).is_some_and(|(prefix, size)| prefixes.contains(&prefix) && sizes.contains(&size))
    };
    let explicit = |base: &str| {
        word.strip_prefix(base)
            .and_then(|rest| rest.strip_suffix("_t"))
            .is_some_and(|bits| matches!(bits, "8" | "16" | "32" | "64"))
    };
    SCALARS.contains(&word)
        || sized("vec", &VECTOR_PREFIXES, &SIZES[..3])
        || sized("mat", &MATRIX_PREFIXES, &SIZES)
        || ["int", "uint", "float", "bfloat"].into_iter().any(explicit)
}

/// A keyword no expression operand can be.
fn is_keyword(word: &str) -> bool {
    CONTROL.contains(&word) || QUALIFIERS.contains(&word) || word == "true" || word == "false"
}

/// The tokens of a source and their structure.
pub(crate) struct Syntax<'a> {
    pub scan: Scan<'a>,
    /// The matching delimiter of `(`, `[`, `{` and a template `<`, both ways.
    pub partner: Vec<Option<usize>>,
    /// The innermost open delimiter around each token (for a delimiter, the
    /// one around it).
    pub enclosing: Vec<Option<usize>>,
    /// Tokens no operator changes: inside `layout(...)` (local sizes,
    /// bindings, sets, locations), attributes `[[...]]`, template arguments
    /// `<...>` and the sizes of declared arrays and array types (`float
    /// v[4]`, `vec4[4](…)`: a changed size does not build against its
    /// initializer or constant indices, or changes nothing).
    pub frozen: Vec<bool>,
    /// The `{` that open an initializer list (`= { … }`), not a block.
    pub initializer: Vec<bool>,
    /// The `{` and `}` of `main`'s body.
    pub main_body: Option<(usize, usize)>,
}

impl<'a> Syntax<'a> {
    pub fn new(source: &'a str) -> Syntax<'a> {
        let scan = scan(source);
        let n = scan.tokens.len();
        let t = &scan.tokens;
        let mut partner = vec![None; n];
        let mut enclosing = vec![None; n];
        let mut initializer = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        for i in 0..n {
            let text = t[i].text;
            let template_open = text == "<" && i > 0 && TEMPLATE_TYPES.contains(&t[i - 1].text);
            let closes = |open: &str| match open {
                "(" => text == ")",
                "[" => text == "]",
                "{" => text == "}",
                _ => text == ">",
            };
            if let Some(&top) = stack.last()
                && t[i].kind == Kind::Punct
                && closes(t[top].text)
            {
                stack.pop();
                partner[top] = Some(i);
                partner[i] = Some(top);
                enclosing[i] = stack.last().copied();
                continue;
            }
            enclosing[i] = stack.last().copied();
            if matches!(text, "(" | "[" | "{") || template_open {
                if text == "{" && i > 0 && (matches!(t[i - 1].text, "=" | ",") || initializer[i - 1]) {
                    initializer[i] = true;
                }
                stack.push(i);
            }
        }
        let mut frozen = vec![false; n];
        for i in 0..n {
            let group = match (t[i].text, partner[i]) {
                ("(", Some(close)) if i > 0 && t[i - 1].text == "layout" => Some(close),
                ("[", Some(close)) if t.get(i + 1).is_some_and(|x| x.text == "[") => Some(close),
                ("[", Some(close)) if i > 0 && t[i - 1].text == "[" && partner[i - 1].is_some() => Some(close),
                ("<", Some(close)) => Some(close),
                _ => None,
            };
            if let Some(close) = group.filter(|c| *c > i) {
                frozen[i..=close].iter_mut().for_each(|f| *f = true);
            }
        }
        let main_body = (0..n).find_map(|i| {
            let open = (t[i].text == "main" && enclosing[i].is_none() && t.get(i + 1)?.text == "(").then_some(i + 1)?;
            let body = partner[open]? + 1;
            (t.get(body)?.text == "{").then_some((body, partner[body]?))
        });
        let mut syn = Syntax { scan, partner, enclosing, frozen, initializer, main_body };
        for i in 0..n {
            if let Some(close) = syn.partner[i].filter(|c| *c > i && syn.text(i) == "[" && syn.declares_array(i)) {
                syn.frozen[i..=close].iter_mut().for_each(|f| *f = true);
            }
        }
        syn
    }

    pub fn tokens(&self) -> &[Token<'a>] {
        &self.scan.tokens
    }

    pub fn text(&self, i: usize) -> &'a str {
        self.scan.tokens[i].text
    }

    /// The source text from token `first` to token `last`, both included.
    pub fn span(&self, first: usize, last: usize) -> &'a str {
        let t = &self.scan.tokens;
        &self.scan.source[t[first].start..t[last].end]
    }

    /// Whether tokens `first..=last` all lie on one line.
    pub fn one_line(&self, first: usize, last: usize) -> bool {
        !self.span(first, last).contains('\n')
    }

    /// Whether token `i` ends an operand, so that a `+` or `-` after it is
    /// binary: a name that is not a keyword, a literal, `)`, `]`, or a postfix
    /// `++` / `--`.
    pub fn ends_operand(&self, i: usize) -> bool {
        let tok = self.scan.tokens[i];
        match tok.kind {
            Kind::Ident => !is_keyword(tok.text),
            Kind::Int | Kind::Float => true,
            Kind::Punct => match tok.text {
                ")" | "]" => true,
                "++" | "--" => i > 0 && (matches!(self.text(i - 1), ")" | "]") || self.is_name(i - 1)),
                _ => false,
            },
        }
    }

    /// Whether token `i` is a name that is not a keyword.
    fn is_name(&self, i: usize) -> bool {
        let tok = self.scan.tokens[i];
        tok.kind == Kind::Ident && !is_keyword(tok.text)
    }

    /// Whether the `{` at `i` opens a block of statements.
    fn is_block(&self, i: usize) -> bool {
        self.text(i) == "{" && !self.initializer[i]
    }

    /// Whether the `)` at `i` closes the header of `if`, `for`, `while` or
    /// `switch`.
    pub fn closes_header(&self, i: usize) -> bool {
        self.text(i) == ")"
            && self.partner[i]
                .is_some_and(|open| open > 0 && matches!(self.text(open - 1), "if" | "for" | "while" | "switch"))
    }

    /// Whether a statement starts at token `i`: it stands directly in a block
    /// (not in parentheses, brackets or an initializer) after a `;`, a `{`, a
    /// `}`, a control header or `else` / `do`.
    pub fn starts_statement(&self, i: usize) -> bool {
        let Some(block) = self.enclosing[i].filter(|b| self.is_block(*b)) else { return false };
        if i == 0 || self.frozen[i] || matches!(self.text(i), "}" | ";") {
            return false;
        }
        let prev = i - 1;
        match self.text(prev) {
            "{" => prev == block,
            ";" | "}" => self.enclosing[prev] == Some(block),
            ")" => self.closes_header(prev),
            "else" | "do" => true,
            _ => false,
        }
    }

    /// The `;` that ends the simple statement starting at `i`, skipping
    /// groups; `None` if a block or the end of the source comes first.
    pub fn statement_end(&self, i: usize) -> Option<usize> {
        let mut j = i;
        while j < self.scan.tokens.len() {
            match self.text(j) {
                ";" => return Some(j),
                "{" if !self.initializer[j] => return None,
                "}" => return None,
                "(" | "[" | "{" => j = self.partner[j]? + 1,
                _ => j += 1,
            }
        }
        None
    }

    /// Whether the statement starting at `i` is a declaration: a qualifier or
    /// a built-in type first, or a name followed by a name or by template
    /// arguments (`Foo x;`, `coopmat<…> acc[2];`).
    pub fn is_declaration(&self, i: usize) -> bool {
        let t = &self.scan.tokens;
        let first = t[i].text;
        if t[i].kind != Kind::Ident || CONTROL.contains(&first) {
            return false;
        }
        if QUALIFIERS.contains(&first) || is_type_name(first) {
            return true;
        }
        t.get(i + 1).is_some_and(|next| next.kind == Kind::Ident || (next.text == "<" && self.partner[i + 1].is_some()))
    }

    /// Whether the `[` at `open` is part of a declaration (an array's size, as
    /// in `float v[4]` or `shared float hs[2][MAXH]`) or of an array type
    /// (`float[2](…)`), not an index (of a name, or of a call's or a
    /// constructor's result).
    pub fn declares_array(&self, open: usize) -> bool {
        let mut j = open;
        while j > 0 && self.text(j - 1) == "]" {
            match self.partner[j - 1] {
                Some(o) => j = o,
                None => return false,
            }
        }
        let Some(base) = j.checked_sub(1) else { return false };
        if self.scan.tokens[base].kind != Kind::Ident {
            return false;
        }
        if is_type_name(self.text(base)) {
            return true;
        }
        let Some(before) = base.checked_sub(1) else { return false };
        let tok = self.scan.tokens[before];
        (tok.kind == Kind::Ident && !CONTROL.contains(&tok.text)) || (tok.text == ">" && self.frozen[before])
    }

    /// The last token of the unary term starting at `i` (prefix operators, a
    /// name, literal or parenthesized group, then calls, indices, members
    /// and postfix `++` / `--`), or `None` if no term starts there.
    pub fn unary_term(&self, i: usize) -> Option<usize> {
        let t = &self.scan.tokens;
        let mut j = i;
        while matches!(t.get(j)?.text, "-" | "+" | "!" | "~" | "++" | "--") {
            j += 1;
        }
        let tok = t.get(j)?;
        let mut last = match tok.kind {
            Kind::Ident if !is_keyword(tok.text) => j,
            Kind::Int | Kind::Float => j,
            Kind::Punct if tok.text == "(" => self.partner[j]?,
            _ => return None,
        };
        loop {
            match t.get(last + 1).map(|x| x.text) {
                // A call, a constructor (`vec4(…)`, `float[2](…)`).
                Some("(") if t[last].kind == Kind::Ident || t[last].text == "]" => last = self.partner[last + 1]?,
                // A template type's constructor: left alone.
                Some("<") if self.partner[last + 1].is_some() => return None,
                Some("[") => last = self.partner[last + 1]?,
                Some(".") if t.get(last + 2).is_some_and(|x| x.kind == Kind::Ident) => last += 2,
                Some("++" | "--") => last += 1,
                _ => break,
            }
        }
        (!self.frozen[i..=last].iter().any(|f| *f)).then_some(last)
    }

    /// The first token of the left operand of the binary operator at `op`
    /// (`-` or `/`), by precedence and left associativity, and whether that
    /// operand holds an operator of its own at its top level (so that, moved
    /// to the right, it needs parentheses).
    pub fn left_operand(&self, op: usize) -> Option<(usize, bool)> {
        let additive = matches!(self.text(op), "+" | "-");
        let t = &self.scan.tokens;
        let mut first = None;
        let mut compound = false;
        let mut j = op;
        while j > 0 {
            let k = j - 1;
            if self.frozen[k] {
                break;
            }
            let tok = t[k];
            match tok.text {
                ")" | "]" => match self.partner[k] {
                    Some(open) => j = open,
                    None => return None,
                },
                "." | "++" | "--" => j = k,
                "*" | "/" | "%" => {
                    compound |= !additive;
                    j = k;
                }
                "+" | "-" | "!" | "~" => {
                    let binary = k > 0 && self.ends_operand(k - 1);
                    if binary && !additive {
                        break;
                    }
                    compound = true;
                    j = k;
                }
                _ if matches!(tok.kind, Kind::Int | Kind::Float) || self.is_name(k) => j = k,
                _ => break,
            }
            first = Some(j);
        }
        let first = first?;
        // A group after a template type (`coopmat<…>(0.0)`) is a constructor's
        // arguments: left alone.
        if t[first].text == "(" && first > 0 && self.frozen[first - 1] {
            return None;
        }
        (matches!(t[first].kind, Kind::Ident | Kind::Int | Kind::Float)
            || matches!(t[first].text, "(" | "-" | "+" | "!" | "~" | "++" | "--"))
        .then_some((first, compound))
    }

    /// The last token of the right operand of the binary operator at `op`:
    /// one unary term for `/`, a chain of them joined by `*`, `/`, `%` for
    /// `-` (which binds looser).
    pub fn right_operand(&self, op: usize) -> Option<usize> {
        let mut last = self.unary_term(op + 1)?;
        if self.text(op) == "-" {
            while matches!(self.scan.tokens.get(last + 1).map(|x| x.text), Some("*" | "/" | "%")) {
                last = self.unary_term(last + 2)?;
            }
        }
        Some(last)
    }
}
