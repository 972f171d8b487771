//! Scalar helpers of the CPU reference that several of its modules share
//! (a leaf module, so that `forward`, `backward` and `recurrence` need not
//! import one another for them).

use crate::tensor::Real;

/// The logistic function, the GRU's gate non-linearity.
#[inline(always)]
pub(crate) fn sigmoid<T: Real>(x: T) -> T {
    T::one() / (T::one() + (-x).exp())
}

/// Dot product with eight independent accumulators, so that the compiler can
/// keep them in vector registers (a single running sum cannot be reordered).
#[inline]
pub(crate) fn dot<T: Real>(x: &[T], y: &[T]) -> T {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut acc = [T::zero(); 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for i in 0..8 {
            acc[i] += a[i] * b[i];
        }
    }
    let mut tail = T::zero();
    for (&a, &b) in xr.iter().zip(yr) {
        tail += a * b;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}
