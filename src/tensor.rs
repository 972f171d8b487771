//! Dense row-major tensors, the `Real` float abstraction (f32 and f64), and the
//! one matrix-product entry point every engine-side CPU op goes through.

use std::fmt::Debug;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

/// The float types the CPU reference runs in: `f32` (the contract's precision)
/// and `f64` (the rounding-free column the ladder compares both engines with).
pub trait Real:
    num_traits::Float + AddAssign + SubAssign + MulAssign + DivAssign + Send + Sync + Debug + Default + 'static
{
    /// safetensors / display name of the type.
    const DTYPE: &'static str;
    fn of(x: f64) -> Self;
    fn f64(self) -> f64;
}

impl Real for f32 {
    const DTYPE: &'static str = "f32";
    #[inline(always)]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn f64(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    const DTYPE: &'static str = "f64";
    #[inline(always)]
    fn of(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn f64(self) -> f64 {
        self
    }
}

/// A dense row-major tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

impl<T: Real> Tensor<T> {
    pub fn zeros(shape: &[usize]) -> Self {
        let n = shape.iter().product();
        Tensor { shape: shape.to_vec(), data: vec![T::zero(); n] }
    }

    /// Wraps `data`; panics if its length does not match `shape` (a programming error).
    pub fn from_vec(shape: &[usize], data: Vec<T>) -> Self {
        assert_eq!(
            shape.iter().product::<usize>(),
            data.len(),
            "tensor data of length {} does not fit shape {:?}",
            data.len(),
            shape
        );
        Tensor { shape: shape.to_vec(), data }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn cast<U: Real>(&self) -> Tensor<U> {
        Tensor { shape: self.shape.clone(), data: self.data.iter().map(|&x| U::of(x.f64())).collect() }
    }

    pub fn to_f64(&self) -> Vec<f64> {
        self.data.iter().map(|x| x.f64()).collect()
    }

    /// Sum of squares accumulated in f64, in index order.
    pub fn sum_sq_f64(&self) -> f64 {
        sum_sq_f64(&self.data)
    }
}

/// Sum of squares accumulated in float64 with a fixed, thread-count-independent
/// order: fixed chunks summed in parallel, then the partial sums in chunk order.
pub fn sum_sq_f64<T: Real>(x: &[T]) -> f64 {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 14;
    let parts: Vec<f64> = x
        .par_chunks(CHUNK)
        .map(|c| {
            c.iter()
                .map(|v| {
                    let v = v.f64();
                    v * v
                })
                .sum::<f64>()
        })
        .collect();
    parts.iter().sum()
}

/// `c[m×n] = op(a)·op(b)` (or `+=` with `accumulate`), all row-major.
///
/// `a` holds `[m, k]`, or `[k, m]` when `ta` (then `op(a)` is its transpose);
/// `b` holds `[k, n]`, or `[n, k]` when `tb`.
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: Real>(
    c: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    ta: bool,
    b: &[T],
    tb: bool,
    accumulate: bool,
) {
    gemm_in(c, m, n, k, a, ta, b, tb, accumulate, true)
}

/// `gemm` on the calling thread only, for small products inside parallel tasks.
#[allow(clippy::too_many_arguments)]
pub fn gemm_serial<T: Real>(
    c: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    ta: bool,
    b: &[T],
    tb: bool,
    accumulate: bool,
) {
    gemm_in(c, m, n, k, a, ta, b, tb, accumulate, false)
}

#[allow(clippy::too_many_arguments)]
fn gemm_in<T: Real>(
    c: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    ta: bool,
    b: &[T],
    tb: bool,
    accumulate: bool,
    parallel: bool,
) {
    assert_eq!(c.len(), m * n, "gemm: c has {} elements, expected {m}×{n}", c.len());
    assert_eq!(a.len(), m * k, "gemm: a has {} elements, expected {m}×{k}", a.len());
    assert_eq!(b.len(), k * n, "gemm: b has {} elements, expected {k}×{n}", b.len());
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.iter_mut().for_each(|x| *x = T::zero());
        }
        return;
    }
    let (a_rs, a_cs) = if ta { (1isize, m as isize) } else { (k as isize, 1isize) };
    let (b_rs, b_cs) = if tb { (1isize, k as isize) } else { (n as isize, 1isize) };
    // SAFETY: the asserts above prove that every index the strides reach lies
    // inside `a`, `b` and `c`; `c` is borrowed mutably, so nothing aliases it;
    // `T` is f32 or f64, both of which `gemm::gemm` supports.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            T::one(),
            T::one(),
            false,
            false,
            false,
            if parallel { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f64], ta: bool, b: &[f64], tb: bool) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let av = if ta { a[p * m + i] } else { a[i * k + p] };
                    let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                    s += av * bv;
                }
                c[i * n + j] = s;
            }
        }
        c
    }

    #[test]
    fn gemm_all_transposes_odd_shapes() {
        let mut rng = crate::rng::Rng::new(7);
        for &(m, n, k) in &[(1, 1, 1), (7, 33, 5), (33, 1, 257), (65, 17, 3), (2, 300, 70)] {
            for ta in [false, true] {
                for tb in [false, true] {
                    let a: Vec<f64> = (0..m * k).map(|_| rng.normal()).collect();
                    let b: Vec<f64> = (0..k * n).map(|_| rng.normal()).collect();
                    let want = naive(m, n, k, &a, ta, &b, tb);
                    let mut c = vec![1.0; m * n];
                    gemm(&mut c, m, n, k, &a, ta, &b, tb, true);
                    for (x, w) in c.iter().zip(&want) {
                        assert!((x - (w + 1.0)).abs() < 1e-9, "m={m} n={n} k={k} ta={ta} tb={tb}");
                    }
                    gemm(&mut c, m, n, k, &a, ta, &b, tb, false);
                    for (x, w) in c.iter().zip(&want) {
                        assert!((x - w).abs() < 1e-9, "m={m} n={n} k={k} ta={ta} tb={tb}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod throughput {
    /// Prints the GEMM rate of the model's big products (run with --ignored).
    #[test]
    #[ignore]
    fn gemm_throughput() {
        for &(m, n, k, ta) in &[(8192, 1536, 512, false), (1536, 512, 8192, true), (2048, 2048, 2048, false)] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0f32; m * n];
            super::gemm(&mut c, m, n, k, &a, ta, &b, false, false);
            let t0 = std::time::Instant::now();
            for _ in 0..5 {
                super::gemm(&mut c, m, n, k, &a, ta, &b, false, false);
            }
            let s = t0.elapsed().as_secs_f64() / 5.0;
            println!("gemm {m}x{n}x{k} ta={ta}: {:.1} ms, {:.0} GFLOP/s", s * 1e3, 2.0 * (m * n * k) as f64 / s / 1e9);
        }
    }
}
