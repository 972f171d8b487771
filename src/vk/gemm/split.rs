//! The shape of a product, a matrix inside a buffer, and how a product's K
//! is split across workgroups (split-K).

use crate::vk::buffer::Buffer;
use crate::vk::context::Context;
use crate::vk::error::{VkError, VkResult};
use crate::vk::recorder::Bind;

use super::path::GemmPath;

/// The shape of one matrix product `C[m×n] (+)= op(A)·op(B)`, all row-major
/// and packed (as `crate::tensor::gemm`): A is `[m,k]` (`[k,m]` when `ta`),
/// B is `[k,n]` (`[n,k]` when `tb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ta: bool,
    pub tb: bool,
    pub accumulate: bool,
}

/// A matrix inside a buffer: the buffer and the offset of element 0, in f32 values.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub buf: &'a Buffer,
    pub offset: usize,
}

impl<'a> MatRef<'a> {
    pub fn whole(buf: &'a Buffer) -> Self {
        MatRef { buf, offset: 0 }
    }
}

pub(super) fn fits(what: &str, m: &MatRef<'_>, len: usize) -> VkResult<u32> {
    if m.offset + len > m.buf.len_f32() {
        return Err(VkError::Invalid(format!(
            "gemm: {what} needs {len} values at offset {}, buffer {:?} holds {}",
            m.offset,
            m.buf.name(),
            m.buf.len_f32()
        )));
    }
    u32::try_from(m.offset + len)
        .map(|_| m.offset as u32)
        .map_err(|_| VkError::Limit(format!("gemm: {what} reaches past 2^32 values")))
}

/// `m`'s `len` values bound as the part of its buffer that holds them, and
/// the offset of the first of them inside that part (f32 values): the part
/// starts on the last 16-byte boundary (and the device's offset alignment)
/// at or before them, so a value's place modulo 4 is kept (the kernels'
/// 16-byte loads), and ends after the last, rounded up to 16 bytes inside the
/// buffer. An empty matrix binds the whole buffer at its offset.
pub fn part<'a>(ctx: &Context, what: &str, m: &MatRef<'a>, len: usize) -> VkResult<(Bind<'a>, u32)> {
    let off = fits(what, m, len)?;
    if len == 0 {
        return Ok((Bind::whole(m.buf), off));
    }
    let align = ctx.limits().min_storage_buffer_offset_alignment.max(16);
    let (first, end) = (m.offset as u64 * 4, (m.offset + len) as u64 * 4);
    let start = first / align * align;
    let end = end.next_multiple_of(16).min(m.buf.bytes());
    Ok((Bind { buf: m.buf, part: Some((start, end - start)) }, ((first - start) / 4) as u32))
}

pub(super) fn dim(what: &str, x: usize) -> VkResult<u32> {
    u32::try_from(x).map_err(|_| VkError::Limit(format!("gemm: {what} = {x} does not fit in 32 bits")))
}

/// Workgroups a split product aims for: about four per multiprocessor of a
/// 132-SM GPU, two waves at two resident workgroups each. A property of the
/// shape only, so that the summation order (and so every bit of the result)
/// is the same on every device.
pub const SPLIT_K_TARGET_GROUPS: usize = 512;
/// The shortest K range a slice gets (but see [`split_k_min_slice`]).
pub const SPLIT_K_MIN_SLICE: usize = 256;

/// The shortest K range a slice of a product of more than
/// [`SPLIT_K_FEW_TILES`] output tiles gets on `path`, unless it is small:
/// longer on the two 128×128 kernels. On the H200 (`bench`, every product
/// with the same shortest slice) the whole step took 4.66 ms (mixed) and 9.59
/// (f32) with slices of 256, 4.54 and 9.57 with 1024, 4.57 and 9.53 with 512;
/// per kernel, the products of many tiles gained most from 1024 on the
/// cooperative-matrix kernel and from 512 on the f32 one, and those of few
/// tiles did best as they were (docs/results/ab.md).
pub fn split_k_min_slice(path: GemmPath) -> usize {
    match path {
        GemmPath::CoopMatF16Big => 1024,
        GemmPath::TiledF32Big => 512,
        _ => SPLIT_K_MIN_SLICE,
    }
}

/// The shortest K range a slice of a small product gets: an output of fewer
/// than [`SPLIT_K_SMALL_OUTPUT`] values with K of 512 or more (the weight
/// gradients at `small`, K = B·T = 1024) may be cut into up to
/// [`SPLIT_K_MAX_SHORT_SLICES`] slices of 32 or more. On the H200 that took
/// `small`'s products from 0.74 to 0.24 ms per step (f32) and from 0.44 to 0.25
/// (mixed); at `bench` width more slices were slower, the larger outputs'
/// partial sums costing more than the parallelism gained
/// (docs/results/ab.md).
pub const SPLIT_K_MIN_SHORT_SLICE: usize = 32;
/// Slices a small product may be cut into.
pub const SPLIT_K_MAX_SHORT_SLICES: usize = 32;
/// Output values under which a product counts as small.
pub const SPLIT_K_SMALL_OUTPUT: usize = 1 << 16;

/// Output tiles up to which a product counts as having few: its workgroups
/// would leave most of a large GPU idle.
pub const SPLIT_K_FEW_TILES: usize = 16;
/// Workgroups a product with few tiles and K of 256 or more aims for, in
/// slices of at least [`SPLIT_K_MIN_SHORT_SLICE`]. On the H200 (gemm-bench,
/// 2026-12-02) the weight gradients and input gradients at B=1 T=512 and at
/// `small` (4 to 16 tiles, K = 256 to 1536) took 14–21 µs this way against
/// 17–54 µs in slices of 256; more workgroups than about 100 were slower
/// again, and products with more tiles or long K gain nothing
/// (docs/results/ab.md).
pub const SPLIT_K_FEW_TILES_GROUPS: usize = 96;

/// Whether the few-tiles rule is on (a `lab` build's `DUALSCOPE_SPLIT_FEW=0`
/// turns it off, for comparison).
fn few_tiles_rule() -> bool {
    #[cfg(feature = "lab")]
    {
        crate::vk::switches::switches().lab.split_few
    }
    #[cfg(not(feature = "lab"))]
    {
        true
    }
}

/// The shortest slice of a product of `s`'s shape on `path`:
/// [`split_k_min_slice`] for one of many tiles, [`SPLIT_K_MIN_SLICE`] for one
/// of few, for a small product `k / 32` between
/// [`SPLIT_K_MIN_SHORT_SLICE`] and [`SPLIT_K_MIN_SLICE`], or in a `lab`
/// build `DUALSCOPE_SPLIT_MIN_SLICE` (a timing probe: the split then differs
/// from the default's, and with it the summation order).
pub fn min_slice(path: GemmPath, s: &GemmShape) -> usize {
    let small = s.m * s.n < SPLIT_K_SMALL_OUTPUT && s.k >= 512;
    let (tm, tn, _) = path.tile();
    let rule = if small {
        (s.k / SPLIT_K_MAX_SHORT_SLICES).clamp(SPLIT_K_MIN_SHORT_SLICE, SPLIT_K_MIN_SLICE)
    } else if s.m.div_ceil(tm) * s.n.div_ceil(tn) > SPLIT_K_FEW_TILES {
        split_k_min_slice(path)
    } else {
        SPLIT_K_MIN_SLICE
    };
    min_slice_probe().unwrap_or(rule)
}

/// The shortest slices `DUALSCOPE_SPLIT_MIN_SLICE` may name (a bad one is
/// refused, `vk::switches`).
#[cfg(feature = "lab")]
pub const SPLIT_K_PROBE_SLICES: std::ops::RangeInclusive<usize> = 16..=1 << 16;

/// The shortest slice a `lab` build's `DUALSCOPE_SPLIT_MIN_SLICE` asks for.
fn min_slice_probe() -> Option<usize> {
    #[cfg(feature = "lab")]
    {
        crate::vk::switches::switches().lab.split_min_slice
    }
    #[cfg(not(feature = "lab"))]
    {
        None
    }
}

/// The longest K range a workgroup walks: its loop over K-slices (16 or
/// more each) then takes at most 16384 passes, inside lavapipe's guard of
/// 65535 loop passes per invocation (`docs/shader-loops.md`). Longer
/// products are split whatever their tiles (scratch permitting).
pub const SPLIT_K_MAX_CHUNK: usize = 1 << 18;

/// How a product's K is cut: `slices` ranges of `chunk` (a multiple of the
/// kernel's K-slice; the last may be shorter). `slices == 1`: not split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitK {
    pub slices: usize,
    pub chunk: usize,
}

/// The split of `s` on `path` when the scratch holds `max_scratch` values:
/// as many slices as bring the workgroups to about
/// [`SPLIT_K_TARGET_GROUPS`], each at least [`min_slice`] long, or for a
/// product of few tiles to [`SPLIT_K_FEW_TILES_GROUPS`] in slices of 32 or
/// more where that gives more, and no more than the scratch holds
/// (`slices·m·n` values). Products with enough
/// output tiles, short K, or on the 64×64 cooperative-matrix kernel are not
/// split. The output tiles and the chunk's alignment are the path's.
pub fn split_k_plan(path: GemmPath, s: &GemmShape, max_scratch: usize) -> SplitK {
    let whole = SplitK { slices: 1, chunk: s.k };
    let (tm, tn, tk) = path.tile();
    let tiles = s.m.div_ceil(tm) * s.n.div_ceil(tn);
    if !path.splits() || tiles == 0 {
        return whole;
    }
    let mut for_groups = (SPLIT_K_TARGET_GROUPS / tiles).min(s.k / min_slice(path, s));
    if tiles <= SPLIT_K_FEW_TILES && s.k >= 256 && few_tiles_rule() && min_slice_probe().is_none() {
        for_groups = for_groups.max((SPLIT_K_FEW_TILES_GROUPS / tiles).min(s.k / SPLIT_K_MIN_SHORT_SLICE));
    }
    let want = for_groups.max(s.k.div_ceil(SPLIT_K_MAX_CHUNK)).min(max_scratch / (s.m * s.n));
    if want < 2 {
        return whole;
    }
    let chunk = s.k.div_ceil(want).next_multiple_of(tk);
    let slices = s.k.div_ceil(chunk);
    if slices < 2 { whole } else { SplitK { slices, chunk } }
}

/// Scratch values (f32) that `gemm_split` needs to split `s` as planned with
/// unbounded scratch (0 when it is not split). Never more than
/// `SPLIT_K_TARGET_GROUPS` times the path's output tile, whatever the shape.
pub fn split_k_scratch_len(path: GemmPath, s: &GemmShape) -> usize {
    let plan = split_k_plan(path, s, usize::MAX);
    if plan.slices > 1 { plan.slices * s.m * s.n } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::super::specs::{GEMM_TILE_K, GEMM_TILE_M, GEMM_TILE_N};
    use super::*;

    fn shape(m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape { m, n, k, ta: true, tb: false, accumulate: false }
    }

    /// On the two 128×128 kernels a product that is neither small nor of
    /// few tiles is cut into slices of at least their longer minimum, and
    /// the bench products that the H200 ran faster unsplit are not split, and
    /// a product of few tiles is cut as before.
    #[test]
    fn the_wide_kernels_take_longer_slices() {
        for path in [GemmPath::CoopMatF16Big, GemmPath::TiledF32Big] {
            let (tm, tn, _) = path.tile();
            for (m, n, k) in [(1536, 512, 8160), (768, 512, 8192), (8192, 512, 768), (4096, 256, 3000)] {
                let s = shape(m, n, k);
                let p = split_k_plan(path, &s, usize::MAX);
                let tiles = m.div_ceil(tm) * n.div_ceil(tn);
                assert!(tiles > SPLIT_K_FEW_TILES && m * n >= SPLIT_K_SMALL_OUTPUT, "{s:?}");
                assert!(p.slices == 1 || p.chunk >= split_k_min_slice(path), "{path:?} {s:?} {p:?}");
            }
            let s = GemmShape { m: 8192, n: 256, k: 512, ta: false, tb: true, accumulate: false };
            assert_eq!(split_k_plan(path, &s, usize::MAX).slices, 1, "{path:?}");
            let p = split_k_plan(path, &shape(256, 512, 8192), usize::MAX);
            assert_eq!((p.slices, p.chunk), (32, 256), "{path:?}: 8 tiles");
        }
        assert_eq!(split_k_min_slice(GemmPath::TiledF32), SPLIT_K_MIN_SLICE);
    }

    #[test]
    fn split_k_plans_cover_k_with_aligned_slices() {
        for m in [1, 7, 64, 128, 129, 256, 1536, 8192] {
            for n in [1, 3, 64, 65, 512] {
                for k in [0, 1, 255, 256, 511, 512, 513, 1000, 4100, 8160, 8192, 131072] {
                    let s = shape(m, n, k);
                    let p = split_k_plan(GemmPath::TiledF32, &s, usize::MAX);
                    if p.slices == 1 {
                        assert_eq!(p.chunk, k);
                        assert_eq!(split_k_scratch_len(GemmPath::TiledF32, &s), 0);
                        continue;
                    }
                    let tiles = m.div_ceil(GEMM_TILE_M) * n.div_ceil(GEMM_TILE_N);
                    assert!(p.chunk.is_multiple_of(GEMM_TILE_K), "{s:?} {p:?}");
                    // Every slice is non-empty and together they cover K.
                    assert!((p.slices - 1) * p.chunk < k && p.slices * p.chunk >= k, "{s:?} {p:?}");
                    let few = tiles <= SPLIT_K_FEW_TILES && p.slices * tiles <= SPLIT_K_FEW_TILES_GROUPS;
                    assert!(
                        (few || p.chunk >= min_slice(GemmPath::TiledF32, &s)) && p.chunk >= SPLIT_K_MIN_SHORT_SLICE,
                        "{s:?} {p:?}"
                    );
                    let small = m * n < SPLIT_K_SMALL_OUTPUT && k < SPLIT_K_MIN_SLICE * SPLIT_K_MAX_SHORT_SLICES;
                    assert!(small || few || p.chunk >= SPLIT_K_MIN_SLICE, "{s:?} {p:?}");
                    assert!(p.slices * tiles <= SPLIT_K_TARGET_GROUPS, "{s:?} {p:?}");
                    let scratch = split_k_scratch_len(GemmPath::TiledF32, &s);
                    assert_eq!(scratch, p.slices * m * n);
                    assert!(scratch <= SPLIT_K_TARGET_GROUPS * GEMM_TILE_M * GEMM_TILE_N);
                    // Less scratch: fewer slices, never more than it holds.
                    let q = split_k_plan(GemmPath::TiledF32, &s, scratch - 1);
                    assert!(q.slices < p.slices && (q.slices == 1 || q.slices * m * n < scratch), "{s:?} {q:?}");
                }
            }
        }
        assert_eq!(split_k_plan(GemmPath::CoopMatF16, &shape(256, 512, 8192), usize::MAX).slices, 1);
    }

    /// The mixed step's kernels (and the 128×128 f32 one) split on their own
    /// tiles: the 128×128 cooperative-matrix kernel's chunks are multiples of
    /// its K-slice of 32, and the long-K weight gradients get at least a
    /// workgroup for each of a large GPU's multiprocessors (fewer than the
    /// 128×64 f32 kernel's: the H200 ran the 128×128 kernels faster on
    /// slices of 512 and 1024 than of 256).
    #[test]
    fn split_k_plans_follow_the_path_tiles() {
        for (m, n, k) in [(256, 512, 8192), (1536, 512, 8160), (1536, 256, 8192), (37, 70, 1500)] {
            for path in [GemmPath::CoopMatF16Big, GemmPath::TiledF16, GemmPath::TiledF32Big] {
                let s = shape(m, n, k);
                let p = split_k_plan(path, &s, usize::MAX);
                let (tm, tn, tk) = path.tile();
                assert!(p.slices >= 2 && p.chunk.is_multiple_of(tk), "{path:?} {s:?} {p:?}");
                assert!((p.slices - 1) * p.chunk < k && p.slices * p.chunk >= k);
                let groups = p.slices * m.div_ceil(tm) * n.div_ceil(tn);
                assert!(groups <= SPLIT_K_TARGET_GROUPS, "{path:?} {s:?}: {groups}");
                assert!(m * n < 10_000 || groups >= 128, "{path:?} {s:?}: {groups} workgroups");
            }
        }
    }

    /// Small products (the weight gradients at `small`, K = B·T = 1024) are
    /// cut into up to 32 slices of 32 or more; larger outputs, and K under
    /// 512, keep the shortest slice at 256.
    #[test]
    fn short_k_products_get_short_slices() {
        for path in [GemmPath::CoopMatF16Big, GemmPath::TiledF32] {
            let p = split_k_plan(path, &shape(64, 128, 1024), usize::MAX);
            assert_eq!((p.slices, p.chunk), (32, 32), "{path:?}");
            let p = split_k_plan(path, &shape(384, 128, 1016), usize::MAX);
            assert!(p.slices >= 16 && p.chunk >= SPLIT_K_MIN_SHORT_SLICE, "{path:?} {p:?}");
            let p = split_k_plan(path, &shape(256, 256, 8192), usize::MAX);
            assert_eq!(p.chunk, 256, "{path:?} {p:?}");
            let p = split_k_plan(path, &shape(256, 512, 4096), usize::MAX);
            assert!(p.chunk >= 256, "{path:?} {p:?}");
            assert_eq!(split_k_plan(path, &shape(300, 200, 100), usize::MAX).slices, 1, "{path:?}");
        }
    }

    /// Products of few output tiles with K of 256 or more (B=1 T=512's
    /// and `small`'s weight and input gradients) are cut into slices of 32
    /// or more until they reach about 96 workgroups; more tiles, K under
    /// 256, or a long K that the usual rule already cuts finer, are not.
    #[test]
    fn products_of_few_tiles_are_cut_to_about_96_workgroups() {
        let path = GemmPath::CoopMatF16Big;
        let plan = |m, n, k| {
            let p = split_k_plan(path, &shape(m, n, k), usize::MAX);
            (p.slices, p.chunk)
        };
        assert_eq!(plan(256, 512, 512), (8, 64), "8 tiles");
        assert_eq!(plan(512, 512, 256), (4, 64), "16 tiles");
        assert_eq!(plan(512, 256, 1536), (12, 128), "8 tiles, K = 1536");
        assert_eq!(plan(1024, 64, 384), (12, 32), "8 tiles, slices of 32");
        assert_eq!(plan(1536, 256, 512), (1, 512), "24 tiles: the usual rule, slices of 1024 on this kernel");
        assert_eq!(plan(1024, 256, 128).0, 1, "K under 256");
        assert_eq!(plan(256, 512, 8192), (32, 256), "long K: the usual rule cuts finer");
    }

    /// The bench configuration's weight gradients get enough workgroups.
    #[test]
    fn the_weight_gradients_of_bench_are_split() {
        for (m, n, k) in [(256, 512, 8192), (1536, 512, 8160), (1536, 512, 8192), (1536, 256, 8192), (256, 256, 8192)] {
            let p = split_k_plan(GemmPath::TiledF32, &shape(m, n, k), usize::MAX);
            let groups = p.slices * m.div_ceil(GEMM_TILE_M) * n.div_ceil(GEMM_TILE_N);
            assert!(groups >= 256, "{m}x{n}x{k}: {p:?}, {groups} workgroups");
        }
        // A product with enough tiles is left whole.
        assert_eq!(split_k_plan(GemmPath::TiledF32, &shape(8192, 1536, 512), usize::MAX).slices, 1);
    }

    /// However many output tiles, no workgroup walks more than
    /// `SPLIT_K_MAX_CHUNK` of K (lavapipe's loop guard), on every path that splits.
    #[test]
    fn long_products_are_split_into_bounded_chunks() {
        for path in [GemmPath::TiledF32, GemmPath::TiledF32Big, GemmPath::TiledF16, GemmPath::CoopMatF16Big] {
            for (m, n, k) in [(8192, 1536, 1 << 22), (1536, 512, (1 << 18) + 1), (15, 6, 3 << 20)] {
                let p = split_k_plan(path, &shape(m, n, k), usize::MAX);
                assert!(p.chunk <= SPLIT_K_MAX_CHUNK && p.slices * p.chunk >= k, "{path:?} {m}x{n}x{k}: {p:?}");
            }
        }
    }
}
