//! The GRU recurrence, forward and backward through time, on a team of threads
//! that walk the timesteps in lockstep.
//!
//! The recurrence is a chain of `T` dependent steps, each a small product
//! (`[B, H] × [H, 3H]`) and a few element-wise gates. Forking a parallel GEMM at
//! every step spends more on scheduling than on arithmetic and streams all of
//! `W_hh` from the shared cache each time. Instead each team member owns a
//! fixed slice of hidden units `j0..j1`, keeps the matching rows (forward) or
//! columns (backward) of `W_hh` in its own cache for the whole sequence, and
//! computes those units' gates itself; the team meets at one barrier per step.
//! Every element is computed by the same sequence of operations whatever the
//! team size, apart from the blocking inside the per-member GEMM.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::math::sigmoid;
use super::rounding::Round;
use crate::tensor::{Real, gemm_serial};

/// Multiply-adds per step below which one more member does not pay for itself.
const WORK_PER_MEMBER: usize = 1 << 16;
/// Fewest hidden units a member owns.
const MIN_UNITS: usize = 8;

/// Team size for a recurrence of `bb` rows and `h` units.
pub(crate) fn team_size(bb: usize, h: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let by_work = (bb * 3 * h * h / WORK_PER_MEMBER).max(1);
    threads.min(by_work).min((h / MIN_UNITS).max(1))
}

/// A barrier that spins briefly, then yields, so that it is cheap when every
/// member has a core and still makes progress when they share one.
struct SpinBarrier {
    arrived: AtomicUsize,
    generation: AtomicUsize,
    members: usize,
}

impl SpinBarrier {
    fn new(members: usize) -> Self {
        SpinBarrier { arrived: AtomicUsize::new(0), generation: AtomicUsize::new(0), members }
    }

    fn wait(&self) {
        if self.members == 1 {
            return;
        }
        let seen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.members {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == seen {
            if spins < 4096 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// A shared output that team members write at disjoint indices.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T, usize);

// SAFETY: members write disjoint elements (each owns its hidden units) and
// read other members' elements only after the barrier that follows the write.
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T: Copy> Shared<T> {
    fn new(v: &mut [T]) -> Self {
        Shared(v.as_mut_ptr(), v.len())
    }

    /// # Safety
    /// No other member writes index `i` concurrently.
    #[inline(always)]
    unsafe fn set(&self, i: usize, x: T) {
        assert!(i < self.1);
        // SAFETY: in bounds by the assert; exclusive by the caller's contract.
        unsafe { *self.0.add(i) = x }
    }

    /// # Safety
    /// Nobody writes `[start, start + len)` while the slice lives.
    #[inline(always)]
    unsafe fn slice(&self, start: usize, len: usize) -> &[T] {
        assert!(start + len <= self.1);
        // SAFETY: in bounds by the assert; no concurrent writer by the contract.
        unsafe { std::slice::from_raw_parts(self.0.add(start), len) }
    }
}

/// Splits `h` units into `p` contiguous ranges.
fn units(h: usize, p: usize, member: usize) -> (usize, usize) {
    (member * h / p, (member + 1) * h / p)
}

/// Runs `body(member)` on `p` members: this thread and `p − 1` scoped threads.
fn run_team(p: usize, body: impl Fn(usize) + Sync) {
    if p == 1 {
        return body(0);
    }
    std::thread::scope(|s| {
        for m in 1..p {
            let body = &body;
            s.spawn(move || body(m));
        }
        body(0);
    });
}

/// Forward outputs of one layer's recurrence, each `[T, B, ·]`.
pub(crate) struct RecurrenceOut<'a, T> {
    pub gh: &'a mut [T],
    pub r: &'a mut [T],
    pub z: &'a mut [T],
    pub n: &'a mut [T],
    pub h: &'a mut [T],
}

/// `gi` is `W_ih u + b_ih` for every step; fills `gh`, the gates and `h`.
/// `h0` is `h_{-1}`, `[B, H]` (None: zeros, docs/model.md's start). `round`
/// rounds the product's operands, `W_hh` and `h_{t−1}` (Exact: none).
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward<T: Real>(
    round: Round,
    w_hh: &[T],
    b_hh: &[T],
    gi: &[T],
    h0: Option<&[T]>,
    tt: usize,
    bb: usize,
    h: usize,
    out: RecurrenceOut<T>,
) {
    forward_on(team_size(bb, h), round, w_hh, b_hh, gi, h0, tt, bb, h, out)
}

/// `forward` on a team of `p` members.
#[allow(clippy::too_many_arguments)]
fn forward_on<T: Real>(
    p: usize,
    round: Round,
    w_hh: &[T],
    b_hh: &[T],
    gi: &[T],
    h0: Option<&[T]>,
    tt: usize,
    bb: usize,
    h: usize,
    out: RecurrenceOut<T>,
) {
    let g3 = 3 * h;
    let barrier = SpinBarrier::new(p);
    let (gh, r, z, n, hs) =
        (Shared::new(out.gh), Shared::new(out.r), Shared::new(out.z), Shared::new(out.n), Shared::new(out.h));
    run_team(p, |member| {
        let (j0, j1) = units(h, p, member);
        let u = j1 - j0;
        // This member's rows of W_hh and b_hh: gate blocks r, z, n of units j0..j1.
        let mut w = Vec::with_capacity(3 * u * h);
        let mut bias = Vec::with_capacity(3 * u);
        for g in 0..3 {
            w.extend_from_slice(&w_hh[(g * h + j0) * h..(g * h + j1) * h]);
            bias.extend_from_slice(&b_hh[g * h + j0..g * h + j1]);
        }
        if !round.is_exact() {
            w.iter_mut().for_each(|x| *x = round.value(*x));
        }
        let mut loc = vec![T::zero(); bb * 3 * u];
        for t in 0..tt {
            if t > 0 {
                // SAFETY: step t − 1 of `h` is complete (barrier) and nobody writes it again.
                let hprev = unsafe { hs.slice((t - 1) * bb * h, bb * h) };
                gemm_serial(&mut loc, bb, 3 * u, h, &round.slice(hprev), false, &w, true, false);
            } else if let Some(h0) = h0 {
                gemm_serial(&mut loc, bb, 3 * u, h, &round.slice(h0), false, &w, true, false);
            }
            for b in 0..bb {
                let row = t * bb + b;
                for jj in 0..u {
                    let j = j0 + jj;
                    let ghr = loc[b * 3 * u + jj] + bias[jj];
                    let ghz = loc[b * 3 * u + u + jj] + bias[u + jj];
                    let ghn = loc[b * 3 * u + 2 * u + jj] + bias[2 * u + jj];
                    let gi_row = &gi[row * g3..(row + 1) * g3];
                    let rj = sigmoid(gi_row[j] + ghr);
                    let zj = sigmoid(gi_row[h + j] + ghz);
                    let nj = (gi_row[2 * h + j] + rj * ghn).tanh();
                    // SAFETY: t > 0 reads h[t − 1, b, j], complete since the last barrier.
                    let hp = match (t, h0) {
                        (0, None) => T::zero(),
                        (0, Some(h0)) => h0[b * h + j],
                        _ => unsafe { hs.slice(((t - 1) * bb + b) * h + j, 1)[0] },
                    };
                    // SAFETY: units j0..j1 of step t belong to this member alone.
                    unsafe {
                        gh.set(row * g3 + j, ghr);
                        gh.set(row * g3 + h + j, ghz);
                        gh.set(row * g3 + 2 * h + j, ghn);
                        r.set(row * h + j, rj);
                        z.set(row * h + j, zj);
                        n.set(row * h + j, nj);
                        hs.set(row * h + j, (T::one() - zj) * nj + zj * hp);
                    }
                }
            }
            barrier.wait();
        }
    });
}

/// Forward values the backward pass reads, each `[T, B, ·]`.
pub(crate) struct RecurrenceIn<'a, T> {
    pub gh: &'a [T],
    pub r: &'a [T],
    pub z: &'a [T],
    pub n: &'a [T],
    pub h: &'a [T],
}

/// Backpropagation through time: given `d_h` from above, fills `d_gi` and
/// `d_gh` (each `[T, B, 3H]`). `h0` is the forward's `h_{-1}` (None: zeros);
/// no gradient flows into it (truncated BPTT). `round` rounds the product's
/// operands, `d_gh[t]` and `W_hh` (Exact: none).
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<T: Real>(
    round: Round,
    w_hh: &[T],
    f: RecurrenceIn<T>,
    h0: Option<&[T]>,
    d_h: &[T],
    tt: usize,
    bb: usize,
    h: usize,
    d_gi: &mut [T],
    d_gh: &mut [T],
) {
    backward_on(team_size(bb, h), round, w_hh, f, h0, d_h, tt, bb, h, d_gi, d_gh)
}

/// `backward` on a team of `p` members.
#[allow(clippy::too_many_arguments)]
fn backward_on<T: Real>(
    p: usize,
    round: Round,
    w_hh: &[T],
    f: RecurrenceIn<T>,
    h0: Option<&[T]>,
    d_h: &[T],
    tt: usize,
    bb: usize,
    h: usize,
    d_gi: &mut [T],
    d_gh: &mut [T],
) {
    let g3 = 3 * h;
    let barrier = SpinBarrier::new(p);
    let (dgi, dgh) = (Shared::new(d_gi), Shared::new(d_gh));
    let one = T::one();
    run_team(p, |member| {
        let (j0, j1) = units(h, p, member);
        let u = j1 - j0;
        // This member's columns of W_hh, `[3H, u]`.
        let mut w = Vec::with_capacity(g3 * u);
        for row in 0..g3 {
            w.extend_from_slice(&w_hh[row * h + j0..row * h + j1]);
        }
        if !round.is_exact() {
            w.iter_mut().for_each(|x| *x = round.value(*x));
        }
        let mut dh_next = vec![T::zero(); bb * u];
        for t in (0..tt).rev() {
            for b in 0..bb {
                let row = t * bb + b;
                for jj in 0..u {
                    let (j, i) = (j0 + jj, row * h + j0 + jj);
                    let hp = match (t, h0) {
                        (0, None) => T::zero(),
                        (0, Some(h0)) => h0[b * h + j],
                        _ => f.h[((t - 1) * bb + b) * h + j],
                    };
                    let dh = d_h[i] + dh_next[b * u + jj];
                    let (rj, zj, nj) = (f.r[i], f.z[i], f.n[i]);
                    let dn = dh * (one - zj);
                    let dz = dh * (hp - nj);
                    dh_next[b * u + jj] = dh * zj;
                    let dan = dn * (one - nj * nj);
                    let dar = dan * f.gh[row * g3 + 2 * h + j] * rj * (one - rj);
                    let daz = dz * zj * (one - zj);
                    // SAFETY: units j0..j1 of step t belong to this member alone.
                    unsafe {
                        dgi.set(row * g3 + j, dar);
                        dgi.set(row * g3 + h + j, daz);
                        dgi.set(row * g3 + 2 * h + j, dan);
                        dgh.set(row * g3 + j, dar);
                        dgh.set(row * g3 + h + j, daz);
                        dgh.set(row * g3 + 2 * h + j, dan * rj);
                    }
                }
            }
            barrier.wait();
            if t > 0 {
                // SAFETY: step t of d_gh is complete (barrier) and nobody writes it again.
                let dgh_t = unsafe { dgh.slice(t * bb * g3, bb * g3) };
                gemm_serial(&mut dh_next, bb, u, g3, &round.slice(dgh_t), false, &w, false, true);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Teams of any size compute what one member computes.
    #[test]
    fn team_size_does_not_change_the_result() {
        let (tt, bb, h) = (9, 3, 13);
        let g3 = 3 * h;
        let mut rng = Rng::new(3);
        let mut rand = |n: usize| -> Vec<f64> { (0..n).map(|_| rng.normal() * 0.5).collect() };
        let (w, b, gi, d_h) = (rand(g3 * h), rand(g3), rand(tt * bb * g3), rand(tt * bb * h));
        let h0 = rand(bb * h);
        let run = |p: usize| {
            let (mut gh, mut r, mut z, mut n, mut hs) = (
                vec![0.0; tt * bb * g3],
                vec![0.0; tt * bb * h],
                vec![0.0; tt * bb * h],
                vec![0.0; tt * bb * h],
                vec![0.0; tt * bb * h],
            );
            forward_on(
                p,
                Round::Exact,
                &w,
                &b,
                &gi,
                Some(&h0),
                tt,
                bb,
                h,
                RecurrenceOut { gh: &mut gh, r: &mut r, z: &mut z, n: &mut n, h: &mut hs },
            );
            let (mut dgi, mut dgh) = (vec![0.0; tt * bb * g3], vec![0.0; tt * bb * g3]);
            backward_on(
                p,
                Round::Exact,
                &w,
                RecurrenceIn { gh: &gh, r: &r, z: &z, n: &n, h: &hs },
                Some(&h0),
                &d_h,
                tt,
                bb,
                h,
                &mut dgi,
                &mut dgh,
            );
            [gh, r, z, n, hs, dgi, dgh]
        };
        let one = run(1);
        for p in [2, 3, 5] {
            for (a, b) in one.iter().zip(run(p)) {
                for (x, y) in a.iter().zip(&b) {
                    assert!((x - y).abs() <= 1e-12 * (1.0 + x.abs()), "team of {p}: {x} vs {y}");
                }
            }
        }
        assert!(one[4].iter().all(|x| x.is_finite() && *x != 0.0));
    }
}

#[cfg(test)]
mod timing {
    #[test]
    #[ignore]
    fn member_gemm_timing() {
        let (m, n, k) = (32, 96, 512);
        let a = vec![0.5f32; m * k];
        let w = vec![0.25f32; n * k];
        let mut c = vec![0f32; m * n];
        for _ in 0..100 {
            crate::tensor::gemm_serial(&mut c, m, n, k, &a, false, &w, true, false);
        }
        let t0 = std::time::Instant::now();
        for _ in 0..1000 {
            crate::tensor::gemm_serial(&mut c, m, n, k, &a, false, &w, true, false);
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / 1000.0;
        println!("gemm_serial {m}x{n}x{k}: {us:.1} us, {:.1} GFLOP/s", 2.0 * (m * n * k) as f64 / us / 1e3);
        let t0 = std::time::Instant::now();
        for _ in 0..1000 {
            for i in 0..m {
                for j in 0..n {
                    c[i * n + j] = crate::cpu::math::dot(&a[i * k..(i + 1) * k], &w[j * k..(j + 1) * k]);
                }
            }
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / 1000.0;
        println!("dot loop: {us:.1} us, {:.1} GFLOP/s", 2.0 * (m * n * k) as f64 / us / 1e3);
    }
}
