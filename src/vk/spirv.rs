//! Just enough SPIR-V reading to check a kernel's contract against its
//! shader (the size of the push-constant block) and to tell what it uses
//! (cooperative matrices).

const OP_TYPE_INT: u32 = 21;
const OP_TYPE_FLOAT: u32 = 22;
const OP_TYPE_VECTOR: u32 = 23;
const OP_TYPE_STRUCT: u32 = 30;
const OP_TYPE_POINTER: u32 = 32;
const OP_VARIABLE: u32 = 59;
const OP_MEMBER_DECORATE: u32 = 72;
const DECORATION_OFFSET: u32 = 35;
const STORAGE_PUSH_CONSTANT: u32 = 9;
const OP_CAPABILITY: u32 = 17;
const CAPABILITY_COOPERATIVE_MATRIX_KHR: u32 = 6022;

/// Whether the module `bytes` declares the `CooperativeMatrixKHR` capability
/// (false for one this reader cannot walk).
pub fn uses_cooperative_matrix(bytes: &[u8]) -> bool {
    let words: Vec<u32> = bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return false;
    }
    let mut i = 5;
    while i < words.len() {
        let (count, op) = ((words[i] >> 16) as usize, words[i] & 0xffff);
        if count == 0 || i + count > words.len() {
            return false;
        }
        if op == OP_CAPABILITY && count >= 2 && words[i + 1] == CAPABILITY_COOPERATIVE_MATRIX_KHR {
            return true;
        }
        i += count;
    }
    false
}

/// Size in bytes of the push-constant block (last member's offset plus its
/// size), `Some(0)` without one, `None` if the module is malformed or uses a
/// member type this reader does not size (only scalars and vectors).
pub fn push_constant_size(words: &[u32]) -> Option<u32> {
    use std::collections::HashMap;
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return None;
    }
    let mut sizes: HashMap<u32, u32> = HashMap::new();
    let mut structs: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut pointers: HashMap<u32, u32> = HashMap::new();
    let mut offsets: HashMap<(u32, u32), u32> = HashMap::new();
    let mut block_ptr_type = None;
    let mut i = 5;
    while i < words.len() {
        let (count, op) = ((words[i] >> 16) as usize, words[i] & 0xffff);
        if count == 0 || i + count > words.len() {
            return None;
        }
        let w = &words[i + 1..i + count];
        match op {
            OP_TYPE_INT | OP_TYPE_FLOAT if w.len() >= 2 => {
                sizes.insert(w[0], w[1] / 8);
            }
            OP_TYPE_VECTOR if w.len() >= 3 => {
                let c = *sizes.get(&w[1])?;
                sizes.insert(w[0], c * w[2]);
            }
            OP_TYPE_STRUCT if !w.is_empty() => {
                structs.insert(w[0], w[1..].to_vec());
            }
            OP_TYPE_POINTER if w.len() >= 3 && w[1] == STORAGE_PUSH_CONSTANT => {
                pointers.insert(w[0], w[2]);
            }
            OP_VARIABLE if w.len() >= 3 && w[2] == STORAGE_PUSH_CONSTANT => block_ptr_type = Some(w[0]),
            OP_MEMBER_DECORATE if w.len() >= 4 && w[2] == DECORATION_OFFSET => {
                offsets.insert((w[0], w[1]), w[3]);
            }
            _ => {}
        }
        i += count;
    }
    let Some(ptr) = block_ptr_type else { return Some(0) };
    let block = *pointers.get(&ptr)?;
    let members = structs.get(&block)?;
    let mut size = 0;
    for (m, ty) in members.iter().enumerate() {
        let end = offsets.get(&(block, m as u32))? + sizes.get(ty)?;
        size = size.max(end);
    }
    Some(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_gemm_push_constant_block() {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(super::super::shaders::GEMM_F32)).unwrap();
        assert_eq!(push_constant_size(&words), Some(64));
        // The other kernels that share `GemmPush` declare the same 16 words.
        use super::super::shaders as sh;
        let shaders = sh::GEMM_F16_COOPMAT
            .into_iter()
            .chain(sh::GEMM_F16_COOPMAT_BIG)
            .chain([sh::GEMM_SPLITK_REDUCE, sh::GEMM_F16_TILED]);
        for spirv in shaders {
            let words = ash::util::read_spv(&mut std::io::Cursor::new(spirv)).unwrap();
            assert_eq!(push_constant_size(&words), Some(64));
        }
        assert_eq!(push_constant_size(&[1, 2, 3]), None);
    }

    /// The cooperative-matrix kernels declare the capability; the f32 ones,
    /// and those with their products as FMAs built from the same sources, do not.
    #[test]
    fn tells_the_cooperative_matrix_kernels() {
        use super::super::shaders as sh;
        for spirv in sh::GEMM_F16_COOPMAT.into_iter().chain(sh::GRU_FWD_WG_CM).chain(sh::GRU_FWD_WAVE_CM) {
            assert!(uses_cooperative_matrix(spirv));
        }
        for spirv in [sh::GEMM_F32, sh::GRU_FWD_WG_FMA].into_iter().chain(sh::GRU_FWD_WAVE_FMA_NC) {
            assert!(!uses_cooperative_matrix(spirv));
        }
        assert!(!uses_cooperative_matrix(&[1, 2, 3]));
    }
}
