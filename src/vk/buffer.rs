//! Buffers: device-local storage, and host-visible staging for upload and
//! readback, all through gpu-allocator with named allocations.

use std::sync::Arc;

use ash::vk;
use gpu_allocator::MemoryLocation;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};

use super::context::Context;
use super::error::{VkError, VkResult, call};
use super::inner::Inner;

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// Device-local: fastest for kernels, not mapped.
    Device,
    /// Host-visible, written by the host, read by the device.
    Upload,
    /// Host-visible, written by the device, read by the host.
    Readback,
}

/// A storage buffer that owns its memory. Dropping it destroys the buffer,
/// then frees the memory; the context outlives it (it holds an `Arc`).
pub struct Buffer {
    inner: Arc<Inner>,
    pub(crate) handle: vk::Buffer,
    allocation: Option<Allocation>,
    bytes: u64,
    kind: MemoryKind,
    name: String,
}

/// The least alignment of a buffer's memory, in bytes (a GPU's cache line).
pub const BUFFER_ALIGN: u64 = 128;

impl Buffer {
    /// A buffer of `bytes` bytes (rounded up to a multiple of 4, at least 4).
    pub fn new(ctx: &Context, name: &str, bytes: u64, kind: MemoryKind) -> VkResult<Buffer> {
        let inner = ctx.inner.clone();
        let size = bytes.max(4).div_ceil(4) * 4;
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let alloc_err = |msg: String| VkError::Alloc { name: name.to_string(), bytes: size, msg };
        // SAFETY: a valid create-info on a live device; the handle is owned by
        // the `Buffer` below, whose `Drop` destroys it (also on the error paths).
        let handle = unsafe { inner.device.create_buffer(&info, None) }.map_err(|e| match e {
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => alloc_err(e.to_string()),
            e => call("vkCreateBuffer")(e),
        })?;
        let mut buf = Buffer { inner, handle, allocation: None, bytes: size, kind, name: name.to_string() };
        // SAFETY: `handle` is a live buffer of this device.
        let mut requirements = unsafe { buf.inner.device.get_buffer_memory_requirements(handle) };
        // Every buffer starts on a cache-line boundary, so that a tensor's rows of
        // whole 128-byte lines are whole lines in memory too (the recurrences'
        // loads without `coherent` rely on it: Engine::grid_noncoherent).
        requirements.alignment = requirements.alignment.max(BUFFER_ALIGN);
        let location = match kind {
            MemoryKind::Device => MemoryLocation::GpuOnly,
            MemoryKind::Upload => MemoryLocation::CpuToGpu,
            MemoryKind::Readback => MemoryLocation::GpuToCpu,
        };
        let allocation = {
            let mut guard = buf.inner.allocator.lock().unwrap_or_else(|p| p.into_inner());
            let allocator = guard.as_mut().ok_or_else(|| alloc_err("the allocator is gone".into()))?;
            allocator
                .allocate(&AllocationCreateDesc {
                    name,
                    requirements,
                    location,
                    linear: true,
                    allocation_scheme: AllocationScheme::GpuAllocatorManaged,
                })
                .map_err(|e| alloc_err(e.to_string()))?
        };
        // SAFETY: the memory was allocated for this buffer's requirements and
        // is not bound to anything else; the offset comes from the allocator.
        let bound = unsafe { buf.inner.device.bind_buffer_memory(handle, allocation.memory(), allocation.offset()) };
        buf.allocation = Some(allocation);
        bound.map_err(call("vkBindBufferMemory"))?;
        Ok(buf)
    }

    /// A device-local buffer of `len` f32 values (contents undefined).
    pub fn device_f32(ctx: &Context, name: &str, len: usize) -> VkResult<Buffer> {
        Buffer::new(ctx, name, (len as u64) * 4, MemoryKind::Device)
    }

    /// A host-visible buffer holding `data`, for upload.
    pub fn upload_f32(ctx: &Context, name: &str, data: &[f32]) -> VkResult<Buffer> {
        let mut b = Buffer::new(ctx, name, (data.len() as u64) * 4, MemoryKind::Upload)?;
        b.write_f32(0, data)?;
        Ok(b)
    }

    /// A host-visible buffer of `len` f32 values, for readback.
    pub fn readback_f32(ctx: &Context, name: &str, len: usize) -> VkResult<Buffer> {
        Buffer::new(ctx, name, (len as u64) * 4, MemoryKind::Readback)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Capacity in f32 values.
    pub fn len_f32(&self) -> usize {
        (self.bytes / 4) as usize
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> MemoryKind {
        self.kind
    }

    pub(crate) fn same_context(&self, inner: &Arc<Inner>) -> bool {
        Arc::ptr_eq(&self.inner, inner)
    }

    fn not_mapped(&self) -> VkError {
        VkError::Invalid(format!(
            "buffer {:?} is not host-visible ({:?}); copy it through a staging buffer",
            self.name, self.kind
        ))
    }

    /// Writes `data` at element `offset` (host-visible buffers only).
    pub fn write_f32(&mut self, offset: usize, data: &[f32]) -> VkResult<()> {
        let (name, len) = (self.name.clone(), self.len_f32());
        if offset + data.len() > len {
            return Err(VkError::Invalid(format!(
                "write of {} values at {offset} past the end of buffer {name:?} ({len} values)",
                data.len()
            )));
        }
        let err = self.not_mapped();
        let bytes = self.allocation.as_mut().and_then(|a| a.mapped_slice_mut()).ok_or(err)?;
        for (dst, x) in bytes[offset * 4..].chunks_exact_mut(4).zip(data) {
            dst.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    }

    /// Reads the whole buffer as f32 values (host-visible buffers only; the
    /// sequence that wrote it must have been waited for).
    pub fn read_f32(&self) -> VkResult<Vec<f32>> {
        let bytes = self.allocation.as_ref().and_then(|a| a.mapped_slice()).ok_or_else(|| self.not_mapped())?;
        Ok(bytes[..self.bytes as usize].chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: sequences that use this buffer borrow it, so they were waited
        // for and dropped before it; the buffer goes first, then its memory.
        unsafe { self.inner.device.destroy_buffer(self.handle, None) };
        let Some(a) = self.allocation.take() else { return };
        let mut guard = self.inner.allocator.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Err(e)) = guard.as_mut().map(|alloc| alloc.free(a)) {
            eprintln!("dualscope: freeing GPU buffer {:?} failed: {e}", self.name);
        }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({:?}, {} bytes, {:?})", self.name, self.bytes, self.kind)
    }
}
