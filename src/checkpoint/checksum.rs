//! The content checksum every file this module writes carries, so that bytes
//! changed after writing (a flipped bit on disk, an edit) are refused on load
//! instead of resuming silently from damaged weights.
//!
//! The checksum is a CRC-32 (IEEE 802.3, the one of zlib and PNG) stored as
//! the metadata entry `checksum` = `crc32:XXXXXXXX` (8 lowercase hex digits).
//! It covers what a reader gets: every other metadata entry (key and value,
//! in key order) and every tensor (name, dtype, shape and data bytes, in name
//! order), so it does not depend on how the serializer lays out the header.
//! Files without the entry (older dualscope files, other tools' exports) load
//! unchecked.

use std::collections::BTreeMap;

use safetensors::Dtype;

use super::Metadata;

/// Metadata key holding the checksum.
pub const CHECKSUM_KEY: &str = "checksum";

/// The algorithm's prefix in the stored value.
const PREFIX: &str = "crc32:";

/// The reflected IEEE polynomial.
const POLY: u32 = 0xEDB8_8320;

/// Slicing-by-8 tables: `TABLES[0]` is the classic byte table, `TABLES[k][b]`
/// the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][b] = c;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// A running CRC-32.
#[derive(Clone, Copy, Debug)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Self {
        Crc32(!0)
    }
}

impl Crc32 {
    pub fn update(&mut self, bytes: &[u8]) {
        let mut c = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for ch in &mut chunks {
            let lo = c ^ u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
            c = TABLES[7][(lo & 0xff) as usize]
                ^ TABLES[6][((lo >> 8) & 0xff) as usize]
                ^ TABLES[5][((lo >> 16) & 0xff) as usize]
                ^ TABLES[4][(lo >> 24) as usize]
                ^ TABLES[3][ch[4] as usize]
                ^ TABLES[2][ch[5] as usize]
                ^ TABLES[1][ch[6] as usize]
                ^ TABLES[0][ch[7] as usize];
        }
        for &b in chunks.remainder() {
            c = (c >> 8) ^ TABLES[0][((c ^ b as u32) & 0xff) as usize];
        }
        self.0 = c;
    }

    pub fn finish(self) -> u32 {
        !self.0
    }
}

/// The CRC-32 of `bytes` in one call.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::default();
    c.update(bytes);
    c.finish()
}

/// One tensor as the checksum sees it.
pub(super) struct TensorBytes<'a> {
    pub dtype: Dtype,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

/// The checksum of a file's contents: `metadata` (its own `checksum` entry
/// left out) and `tensors` (by name), as the stored string `crc32:XXXXXXXX`.
pub(super) fn content_checksum(metadata: &Metadata, tensors: &BTreeMap<&str, TensorBytes<'_>>) -> String {
    let mut c = Crc32::default();
    // Lengths before each variable-length field keep the encoding unambiguous.
    let field = |c: &mut Crc32, bytes: &[u8]| {
        c.update(&(bytes.len() as u64).to_le_bytes());
        c.update(bytes);
    };
    for (key, value) in metadata.iter().filter(|(k, _)| *k != CHECKSUM_KEY) {
        field(&mut c, key.as_bytes());
        field(&mut c, value.as_bytes());
    }
    for (name, t) in tensors {
        field(&mut c, name.as_bytes());
        field(&mut c, t.dtype.to_string().as_bytes());
        c.update(&(t.shape.len() as u64).to_le_bytes());
        for &d in t.shape {
            c.update(&(d as u64).to_le_bytes());
        }
        field(&mut c, t.data);
    }
    format!("{PREFIX}{:08x}", c.finish())
}

/// Whether `stored` has the form [`content_checksum`] writes.
pub(super) fn well_formed(stored: &str) -> bool {
    stored
        .strip_prefix(PREFIX)
        .is_some_and(|hex| hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard check value, and agreement of the 8-byte path with the
    /// byte-at-a-time one on every length and alignment.
    #[test]
    fn crc32_matches_the_standard() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
        let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for start in 0..8 {
            for end in start..data.len() {
                let mut slow = !0u32;
                for &b in &data[start..end] {
                    slow = (slow >> 8) ^ TABLES[0][((slow ^ b as u32) & 0xff) as usize];
                }
                let mut split = Crc32::default();
                split.update(&data[start..(start + end) / 2]);
                split.update(&data[(start + end) / 2..end]);
                assert_eq!(crc32(&data[start..end]), !slow);
                assert_eq!(split.finish(), !slow);
            }
        }
    }

    #[test]
    fn well_formed_values() {
        assert!(well_formed("crc32:0123abcd"));
        for bad in ["crc32:0123ABCD", "crc32:123", "crc32:0123abcde", "md5:0123abcd", "", "crc32:0123abcg"] {
            assert!(!well_formed(bad), "{bad}");
        }
    }
}
