//! Atomic file replacement: write a sibling temporary file, fsync, rename.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{CheckpointError, show};

/// Makes temporary names unique among the writes of one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` so that `path` holds either its old content or all
/// of `bytes`, never anything in between.
///
/// The bytes go to a temporary file `.{name}.tmp.{pid}.{n}` in the same
/// directory, which is fsynced and then renamed over `path`; the directory is
/// then fsynced (best effort). On any failure the temporary file is removed.
/// A `path` that is a directory (or ends in `/`), whose directory does not
/// exist, or that is an existing special file (a device, FIFO or socket,
/// directly or through a symbolic link, which a rename would replace) is
/// refused ([`check_writable`]). A symbolic link to a regular file is
/// replaced, not written through.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    write_atomic_hooked(path, bytes, |_| Ok(()))
}

/// [`write_atomic`] with `before_rename` run on the synced temporary file just
/// before the rename; tests use it to make the last step fail.
pub(super) fn write_atomic_hooked(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce(&Path) -> io::Result<()>,
) -> Result<(), CheckpointError> {
    let shown = show(path);
    let io_err = |action: String| {
        let path = shown.clone();
        move |source| CheckpointError::Io { path, action, source }
    };
    let (dir, name) = check_writable(path)?;

    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    tmp_name.push(format!(".tmp.{}.{n}", std::process::id()));
    let tmp = dir.join(tmp_name);

    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io_err(format!("cannot create temporary file {}", show(&tmp))))?;
    // From here on the guard removes the temporary file unless disarmed.
    let guard = TempGuard(Some(tmp.clone()));
    file.write_all(bytes).map_err(io_err(format!("cannot write temporary file {}", show(&tmp))))?;
    file.sync_all().map_err(io_err(format!("cannot fsync temporary file {}", show(&tmp))))?;
    drop(file);
    before_rename(&tmp).map_err(io_err(format!("before renaming {}", show(&tmp))))?;
    fs::rename(&tmp, path).map_err(io_err(format!("cannot rename {} over it", show(&tmp))))?;
    guard.disarm();
    // Make the rename itself durable; not every platform or file system lets a
    // directory be opened and synced, and the data is already safe, so this
    // is best effort.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Whether `path` can be replaced by [`write_atomic`], checked before any
/// work so that a command can refuse a bad output at once: it must name a
/// file (not end in `/`, not be a directory), in a directory that exists,
/// and be absent or a regular file. Returns that directory and the name.
pub fn check_writable(path: &Path) -> Result<(&Path, &std::ffi::OsStr), CheckpointError> {
    let shown = show(path);
    let ends_in_slash = path.as_os_str().as_encoded_bytes().last() == Some(&b'/');
    if path.is_dir() || ends_in_slash {
        return Err(CheckpointError::IsDirectory { path: shown });
    }
    if let Ok(m) = fs::metadata(path)
        && !m.is_file()
    {
        let reason = format!(
            "it is {}, not a regular file; refusing to replace it",
            crate::dataset::special_kind(&m.file_type())
        );
        return Err(CheckpointError::Invalid { path: shown, reason });
    }
    let Some(name) = path.file_name() else {
        let reason = "the path does not end in a file name".to_string();
        return Err(CheckpointError::Invalid { path: shown, reason });
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(CheckpointError::NoDirectory { path: shown, dir: show(dir) });
    }
    Ok((dir, name))
}

/// Removes the temporary file when dropped, unless disarmed.
struct TempGuard(Option<PathBuf>);

impl TempGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}
