//! A fixed sample of mutants for CI: the same mutants for the same list and
//! seed on every machine, every operator present represented.

use super::{Mutant, Operator, id};
use crate::rng::Rng;

/// `n` of `mutants`, drawn with `seed`, in their order in `mutants`.
///
/// Stratified by operator: with `n` at least the number of operators
/// present, each gets one, and the rest are shared out in proportion to how
/// many mutants each operator has beyond its first (largest remainders, ties
/// to the operator first in [`Operator::ALL`]). With fewer, `n` operators
/// chosen by the seed get one each. Within an operator the mutants are drawn
/// by a generator seeded from `seed` and the operator's name, so that one
/// operator's draw does not depend on the others'. `n` at least the number
/// of mutants gives them all.
pub fn sample(mutants: &[Mutant], n: usize, seed: u64) -> Vec<Mutant> {
    if n >= mutants.len() {
        return mutants.to_vec();
    }
    let groups: Vec<(Operator, Vec<usize>)> = Operator::ALL
        .into_iter()
        .map(|op| (op, (0..mutants.len()).filter(|i| mutants[*i].operator == op).collect::<Vec<_>>()))
        .filter(|(_, members)| !members.is_empty())
        .collect();
    let quota = quotas(&groups.iter().map(|(_, m)| m.len()).collect::<Vec<_>>(), n, seed);
    let mut picked = Vec::with_capacity(n);
    for ((op, members), q) in groups.into_iter().zip(quota) {
        let mut members = members;
        let mut rng = Rng::new(seed ^ id::fnv(&[op.name()]));
        for i in 0..q {
            let j = i + rng.below((members.len() - i) as u64) as usize;
            members.swap(i, j);
        }
        picked.extend_from_slice(&members[..q]);
    }
    picked.sort_unstable();
    picked.into_iter().map(|i| mutants[i].clone()).collect()
}

/// How many of each group to draw, `n` in all (`n` below the sum of `sizes`).
fn quotas(sizes: &[usize], n: usize, seed: u64) -> Vec<usize> {
    let g = sizes.len();
    if n < g {
        let mut order: Vec<usize> = (0..g).collect();
        let mut rng = Rng::new(seed);
        for i in 0..n {
            let j = i + rng.below((g - i) as u64) as usize;
            order.swap(i, j);
        }
        let mut quota = vec![0; g];
        order[..n].iter().for_each(|o| quota[*o] = 1);
        return quota;
    }
    let rest = (n - g) as u128;
    let spare: Vec<u128> = sizes.iter().map(|s| (*s - 1) as u128).collect();
    let total: u128 = spare.iter().sum();
    let mut quota: Vec<usize> = vec![1; g];
    if total == 0 {
        return quota;
    }
    for (q, s) in quota.iter_mut().zip(&spare) {
        *q += (rest * s / total) as usize;
    }
    let left = n - quota.iter().sum::<usize>();
    let mut by_remainder: Vec<usize> = (0..g).collect();
    by_remainder.sort_by_key(|i| std::cmp::Reverse(rest * spare[*i] % total));
    by_remainder[..left].iter().for_each(|i| quota[*i] += 1);
    quota
}
