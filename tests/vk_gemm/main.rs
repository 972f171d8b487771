//! The GEMM kernel against the CPU reference on the Vulkan device (lavapipe in CI).
//!
//! One test binary, its tests by concern: products and the sequences they are
//! recorded in ([`sequences`]), split-K ([`split_k`]), the f32 kernels' bits
//! ([`bits`]) and the f16 kernels ([`f16`]). The padded products they share
//! are here.

#[path = "../common/mod.rs"]
mod common;

mod bits;
mod f16;
mod sequences;
mod split_k;

use common::{random, reference};
use dualscope::rng::Rng;
use dualscope::vk::gemm::{self, GemmShape, MatRef};
use dualscope::vk::{Buffer, Sequence, Timings};

const GUARD: usize = 37;

const SENTINEL: f32 = -7.25e30;

/// One product into a C padded with sentinels: the inputs, the initial C and
/// the device buffers, so that it can be recorded several times.
struct Product {
    s: GemmShape,
    offs: [usize; 3],
    a: Vec<f32>,
    b: Vec<f32>,
    c0: Vec<f32>,
    bufs: [Buffer; 3],
    c_init: Buffer,
    back: Buffer,
}

impl Product {
    fn new(ctx: &dualscope::vk::Context, rng: &mut Rng, s: GemmShape) -> Product {
        let offs = [rng.below(40) as usize, rng.below(40) as usize, 1 + rng.below(40) as usize];
        let (a, b, c0) = (random(rng, s.m * s.k), random(rng, s.k * s.n), random(rng, s.m * s.n));
        Product::with(ctx, s, offs, a, b, c0)
    }

    /// The product of `a` and `b` (`c0` the initial C) with the matrices at `offs` in their buffers.
    fn with(
        ctx: &dualscope::vk::Context,
        s: GemmShape,
        offs: [usize; 3],
        a: Vec<f32>,
        b: Vec<f32>,
        c0: Vec<f32>,
    ) -> Product {
        let padded = |x: &[f32], off: usize| {
            let mut v = vec![SENTINEL; off + x.len() + GUARD];
            v[off..off + x.len()].copy_from_slice(x);
            v
        };
        let c_pad = padded(&c0, offs[2]);
        let bufs = [
            Buffer::upload_f32(ctx, "a", &padded(&a, offs[0])).unwrap(),
            Buffer::upload_f32(ctx, "b", &padded(&b, offs[1])).unwrap(),
            Buffer::device_f32(ctx, "c", c_pad.len()).unwrap(),
        ];
        let c_init = Buffer::upload_f32(ctx, "c.init", &c_pad).unwrap();
        let back = Buffer::readback_f32(ctx, "c.back", c_pad.len()).unwrap();
        Product { s, offs, a, b, c0, bufs, c_init, back }
    }

    fn at(&self, i: usize) -> MatRef<'_> {
        MatRef { buf: &self.bufs[i], offset: self.offs[i] }
    }

    /// The f64 reference, with the initial C added when accumulating.
    fn want(&self) -> Vec<f64> {
        let GemmShape { m, n, k, ta, tb, accumulate } = self.s;
        let mut want = reference(m, n, k, &self.a, ta, &self.b, tb);
        if accumulate {
            want.iter_mut().zip(&self.c0).for_each(|(w, &x)| *w += x as f64);
        }
        want
    }

    /// C as read back, after checking that the guards kept their bits.
    fn result(&self) -> Vec<f32> {
        let got = self.back.read_f32().unwrap();
        let (off, len) = (self.offs[2], self.s.m * self.s.n);
        let guards = got[..off].iter().chain(&got[off + len..]);
        assert!(guards.into_iter().all(|x| x.to_bits() == SENTINEL.to_bits()), "{:?}: guard overwritten", self.s);
        got[off..off + len].to_vec()
    }
}

/// Records every product in one sequence (C reset from its initial value,
/// `product` run, C read back), submits it and returns the timings.
fn record<'a>(
    ctx: &'a dualscope::vk::Context,
    products: impl IntoIterator<Item = &'a Product>,
    mut product: impl FnMut(&mut Sequence<'a>, &'a Product),
) -> Timings {
    let mut seq = Sequence::new(ctx).unwrap();
    for c in products {
        seq.copy(&c.c_init, 0, &c.bufs[2], 0, c.c_init.bytes()).unwrap();
        product(&mut seq, c);
        seq.copy(&c.bufs[2], 0, &c.back, 0, c.back.bytes()).unwrap();
    }
    seq.submit().unwrap()
}

/// [`record`] with `gemm_split` on `path`, split over `scratch`.
fn record_split<'a>(
    ctx: &'a dualscope::vk::Context,
    path: gemm::GemmPath,
    scratch: &'a Buffer,
    products: impl IntoIterator<Item = &'a Product>,
) -> Timings {
    record(ctx, products, |seq, c| {
        gemm::gemm_split(ctx, seq, path, &c.s, c.at(0), c.at(1), c.at(2), Some(scratch)).unwrap()
    })
}
