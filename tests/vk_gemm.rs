//! The GEMM kernel against the CPU reference on the Vulkan device (lavapipe in CI).

mod vk_support;

use dualscope::rng::Rng;
use dualscope::vk::ops;
use vk_support::{assert_clean, context, random, reference, rel_l2};

#[test]
fn gemm_odd_shapes_all_transposes() {
    let Some(ctx) = context("gemm_odd_shapes_all_transposes") else { return };
    let mut rng = Rng::new(11);
    for &(m, n, k) in
        &[(1, 1, 1), (7, 33, 5), (33, 7, 257), (65, 17, 3), (1, 100, 64), (130, 1, 17), (0, 3, 4), (3, 4, 0)]
    {
        for ta in [false, true] {
            for tb in [false, true] {
                let a = random(&mut rng, m * k);
                let b = random(&mut rng, k * n);
                let got = ops::gemm_host(&ctx, m, n, k, &a, ta, &b, tb).unwrap();
                let want = reference(m, n, k, &a, ta, &b, tb);
                assert_eq!(got.len(), m * n);
                let err = rel_l2(&got, &want);
                assert!(err <= 1e-5, "m={m} n={n} k={k} ta={ta} tb={tb}: rel L2 {err:e}");
            }
        }
    }
    assert_clean(&ctx, "gemm_odd_shapes_all_transposes");
}
