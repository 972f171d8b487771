//! The Vulkan context: device report, limits, errors.

mod common;

use common::assert_clean;
use dualscope::vk::{Context, ContextOptions, VkError};

#[test]
fn report_describes_the_device() {
    let (_, ctx) = common::vulkan!();
    let r = ctx.report();
    eprintln!("{}", serde_json::to_string(r).unwrap());
    assert!(!r.name.is_empty());
    assert!(r.subgroup_size >= 1);
    assert!(r.max_workgroup_invocations >= 128, "Vulkan guarantees at least 128");
    assert!(r.max_shared_memory >= 16384, "Vulkan guarantees at least 16 KiB");
    assert_eq!(r.devices[r.index].name, r.name);
    let json: serde_json::Value = serde_json::to_value(r).unwrap();
    for key in ["driver_name", "api_version", "timestamp_period_ns", "features", "validation"] {
        assert!(json.get(key).is_some(), "report lacks {key}");
    }
    assert!(ctx.validation(), "tests run with validation on (is vulkan-validationlayers installed?)");
    assert_clean(&ctx, "report_describes_the_device");
}

#[test]
fn a_missing_device_index_is_a_clear_error() {
    common::skip_without_vulkan!();
    let e = Context::new(&ContextOptions { device: Some(99), validation: Some(false) }).err().expect("no device 99");
    assert!(matches!(e, VkError::BadDeviceIndex { index: 99, .. }), "{e}");
    assert!(e.to_string().contains("device 99 does not exist"), "{e}");
}

/// The engine's handles can move to a worker thread (the UI runs long work there).
#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Context>();
    send_sync::<dualscope::vk::Buffer>();
    send_sync::<dualscope::vk::Kernel>();
    fn send<T: Send>() {}
    send::<dualscope::vk::Sequence<'static>>();
}

#[test]
fn an_impossible_allocation_is_an_error_not_a_panic() {
    common::skip_without_vulkan!();
    // Validation off: asking for more than the heap holds is itself invalid usage.
    let ctx = Context::new(&ContextOptions { device: None, validation: Some(false) }).unwrap();
    let e = dualscope::vk::Buffer::new(&ctx, "too.big", 1 << 44, dualscope::vk::MemoryKind::Device).unwrap_err();
    eprintln!("{e}");
    assert!(matches!(e, VkError::Alloc { .. }), "{e}");
    assert!(e.to_string().contains("too.big"), "{e}");
    // The context still works afterwards.
    dualscope::vk::Buffer::device_f32(&ctx, "fine", 16).unwrap();
}
