//! What this machine can hold: every allocation sized by a user's number is
//! checked here first (70% of MemAvailable), so that a huge number is a clear
//! refusal naming its argument rather than an allocation abort. The lowest
//! layer, so that file readers (checkpoints) use the same check as the engine.

/// A request the memory cannot hold: `what` names the argument that sized it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// The byte count does not even fit in 64 bits.
    #[error("{what}: the memory it needs does not fit in 64 bits")]
    Overflow { what: String },
    /// More than the machine can spare.
    #[error("{what}: needs {} MiB of memory, over the {} MiB limit (70% of the memory available)", need >> 20, limit >> 20)]
    TooLarge { what: String, need: u64, limit: u64 },
}

/// The product of `factors`, or `None` when it overflows 64 bits: how a
/// byte count is computed from user numbers.
pub fn bytes_of(factors: &[u64]) -> Option<u64> {
    factors.iter().try_fold(1u64, |acc, &f| acc.checked_mul(f))
}

/// Refuses to allocate `bytes` (`None`: an overflowed count) for the input
/// `what` (an argument and its value, as the error names it) when it exceeds
/// 70% of the available memory (`/proc/meminfo` MemAvailable; 8 GiB when it
/// cannot be read). Called before the allocation, so that a huge number is a
/// clear refusal rather than an abort.
pub fn check_alloc(what: &str, bytes: Option<u64>) -> Result<(), SizeError> {
    let what = what.to_string();
    let need = bytes.ok_or_else(|| SizeError::Overflow { what: what.clone() })?;
    let limit = memory_limit();
    if need > limit {
        return Err(SizeError::TooLarge { what, need, limit });
    }
    Ok(())
}

/// 70% of the memory available now: the most one request may take.
pub fn memory_limit() -> u64 {
    available_memory().unwrap_or(8 << 30) / 10 * 7
}

fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
