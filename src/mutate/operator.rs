//! The closed set of mutation operators: each names one kind of single-point
//! change a kernel author could plausibly get wrong, so that a ladder which
//! lets such a change through has a gap worth looking at.

use serde::{Deserialize, Serialize};

use super::MutateError;

/// One kind of single-point change to a kernel's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// A binary `+` becomes `-` and back; `*` becomes `/` and back.
    ArithmeticSwap,
    /// `<` becomes `<=` or `>`, `>` becomes `>=` or `<`, `<=` becomes `<`,
    /// `>=` becomes `>`, `==` becomes `!=` and back.
    RelationalSwap,
    /// An integer literal one more or one less (loop bounds included; never
    /// inside `layout(...)`, template arguments or a declared array's size,
    /// nor below zero).
    IntegerLiteral,
    /// An index `a[i]` reads `a[i + 1]` or `a[i - 1]` (not a declaration's
    /// size, nor a lone literal index, which `IntegerLiteral` already moves).
    IndexShift,
    /// A barrier statement (`barrier();`, `memoryBarrierShared();`,
    /// `groupMemoryBarrier();`, `controlBarrier(...)`, `subgroupBarrier();`, …)
    /// is gone.
    DeleteBarrier,
    /// A whole simple statement is gone: an assignment (`x = …;`, `x += …;`),
    /// an increment or a call that is not a built-in barrier (a macro such as
    /// `SYNC();` is a call, whatever it hides); never a declaration or
    /// control flow.
    DeleteStatement,
    /// An accumulation forgets what it held: `x += e;` (or `-=`) becomes `x = e;`.
    DeleteAccumulation,
    /// The operands of a non-commutative binary operator change places:
    /// `a - b` becomes `b - a`, `a / b` becomes `b / a`.
    SwapOperands,
    /// A float constant changes: `1.0` becomes `0.0` or `2.0`, `0.5` and `0.0`
    /// become `1.0`, any other is doubled or halved.
    FloatConstant,
    /// `return;` is the first statement of the body of a `for`, `while` or
    /// `if` inside `main`.
    EarlyReturn,
}

impl Operator {
    /// Every operator, in the order `generate` tries them at one place.
    pub const ALL: [Operator; 10] = [
        Operator::ArithmeticSwap,
        Operator::RelationalSwap,
        Operator::IntegerLiteral,
        Operator::IndexShift,
        Operator::DeleteBarrier,
        Operator::DeleteStatement,
        Operator::DeleteAccumulation,
        Operator::SwapOperands,
        Operator::FloatConstant,
        Operator::EarlyReturn,
    ];

    /// The operator's name in ids, JSON and on the command line (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Operator::ArithmeticSwap => "arithmetic_swap",
            Operator::RelationalSwap => "relational_swap",
            Operator::IntegerLiteral => "integer_literal",
            Operator::IndexShift => "index_shift",
            Operator::DeleteBarrier => "delete_barrier",
            Operator::DeleteStatement => "delete_statement",
            Operator::DeleteAccumulation => "delete_accumulation",
            Operator::SwapOperands => "swap_operands",
            Operator::FloatConstant => "float_constant",
            Operator::EarlyReturn => "early_return",
        }
    }

    /// The operator of a name written by [`Operator::name`].
    pub fn parse(name: &str) -> Result<Operator, MutateError> {
        Operator::ALL
            .into_iter()
            .find(|o| o.name() == name)
            .ok_or_else(|| MutateError::UnknownOperator(name.to_string()))
    }

    /// Where this operator stands in [`Operator::ALL`].
    pub(crate) fn index(self) -> usize {
        Operator::ALL.iter().position(|o| *o == self).expect("every operator is in ALL")
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
