//! Where sessions live by default and the recent-sessions list: a per-user
//! data folder (`$DUALSCOPE_DATA_DIR`, else `$XDG_DATA_HOME/dualscope`, else
//! `~/.local/share/dualscope`), so that "Save session" works from any working
//! directory. The folders are created on first use, never at start.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The environment variable that overrides the data folder (tests, portable
/// setups), read once with the other switches (`vk::switches`).
pub const DATA_DIR_ENV: &str = "DUALSCOPE_DATA_DIR";

/// The most sessions the recent list keeps.
pub const RECENT_MAX: usize = 10;

/// The per-user data folder (not created here).
pub fn data_dir() -> PathBuf {
    if let Some(d) = &crate::engine::switches().data_dir {
        return d.clone();
    }
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("XDG_DATA_HOME").filter(|d| d.is_absolute()) {
        return d.join("dualscope");
    }
    match var("HOME") {
        Some(home) => home.join(".local/share/dualscope"),
        // No home: the working directory, as before.
        None => PathBuf::from("dualscope-data"),
    }
}

/// The folder default sessions are saved in: `<data>/sessions`.
pub fn sessions_dir(data: &Path) -> PathBuf {
    data.join("sessions")
}

/// The default session file: `<data>/sessions/session.ron`.
pub fn default_session(data: &Path) -> PathBuf {
    sessions_dir(data).join("session.ron")
}

/// `path` made absolute against the working directory (not resolved further:
/// the file may not exist yet).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Creates the folder `path` will be written in, if it is missing, so that a
/// session's first save in a fresh data folder works.
pub fn ensure_parent(path: &Path) -> Result<(), String> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the folder {} for {}: {e}", dir.display(), path.display())),
        _ => Ok(()),
    }
}

/// The recent-sessions list, most recent first, as kept in `<data>/recent.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recent {
    pub sessions: Vec<PathBuf>,
}

impl Recent {
    /// The list's file in the data folder.
    pub fn file(data: &Path) -> PathBuf {
        data.join("recent.json")
    }

    /// Reads the list (an absent or unreadable file is an empty list: the
    /// list is a convenience, never a reason to fail), dropping files that
    /// no longer exist.
    pub fn load(data: &Path) -> Recent {
        let mut r: Recent =
            std::fs::read(Self::file(data)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        r.sessions.retain(|p| p.is_file());
        r.sessions.truncate(RECENT_MAX);
        r
    }

    /// Puts `session` (made absolute) first, once, and drops the oldest past [`RECENT_MAX`].
    pub fn push(&mut self, session: &Path) {
        let p = absolute(session);
        self.sessions.retain(|q| *q != p);
        self.sessions.insert(0, p);
        self.sessions.truncate(RECENT_MAX);
    }

    /// Writes the list atomically, creating the data folder on first use.
    pub fn save(&self, data: &Path) -> Result<(), String> {
        let file = Self::file(data);
        ensure_parent(&file)?;
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        crate::checkpoint::write_atomic(&file, text.as_bytes()).map_err(|e| format!("{}: {e}", file.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_list_is_most_recent_first_without_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        assert_eq!(Recent::load(&data), Recent::default(), "no file yet: an empty list");
        let (a, b, c) = (dir.path().join("a.ron"), dir.path().join("b.ron"), dir.path().join("c.ron"));
        for p in [&a, &b, &c] {
            std::fs::write(p, "x").unwrap();
        }
        let mut r = Recent::default();
        r.push(&a);
        r.push(&b);
        r.push(&c);
        r.push(&a); // again: moves to the front, once
        r.save(&data).unwrap();
        assert_eq!(Recent::load(&data).sessions, [a.clone(), c.clone(), b.clone()]);
        std::fs::remove_file(&c).unwrap();
        assert_eq!(Recent::load(&data).sessions, [a.clone(), b.clone()], "a missing file is dropped");
        // A corrupt list is an empty one.
        std::fs::write(Recent::file(&data), "{ not json").unwrap();
        assert!(Recent::load(&data).sessions.is_empty());
        // The list keeps at most RECENT_MAX.
        let mut r = Recent::default();
        for i in 0..RECENT_MAX + 3 {
            r.push(&dir.path().join(format!("{i}.ron")));
        }
        assert_eq!(r.sessions.len(), RECENT_MAX);
        assert!(r.sessions[0].ends_with(format!("{}.ron", RECENT_MAX + 2)));
    }

    #[test]
    fn ensure_parent_creates_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let p = default_session(&dir.path().join("fresh"));
        ensure_parent(&p).unwrap();
        assert!(p.parent().unwrap().is_dir());
        ensure_parent(Path::new("plain.ron")).unwrap();
        // A file where the folder should be: one line naming both.
        let f = dir.path().join("file");
        std::fs::write(&f, "x").unwrap();
        let e = ensure_parent(&f.join("sub/s.ron")).unwrap_err();
        assert!(e.contains("cannot create the folder"), "{e}");
    }
}
