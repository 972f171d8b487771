//! `Dataset`: a byte file or a JSON-lines file, memory-mapped or in memory.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;

use super::error::{DatasetError, io_error};
use super::jsonl::{self, Doc, Index};

/// Files at least this large are memory-mapped; smaller ones are read into memory.
const MMAP_THRESHOLD: u64 = 64 * 1024;

/// How a dataset's bytes are cut into documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DatasetKind {
    /// Any file: one document, the whole file, byte for byte.
    Bytes,
    /// A `.jsonl` file: each non-blank line is `{"text": "..."}`, one document;
    /// a document's tokens are the UTF-8 bytes of its `text`.
    Jsonl,
}

enum Storage {
    Owned(Vec<u8>),
    Mapped(Mmap),
}

impl Storage {
    fn as_slice(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::Mapped(m) => m,
        }
    }
}

/// A byte-level dataset: tokens are bytes (vocabulary 256).
///
/// A file whose name ends in `.jsonl` (any case) is a JSON-lines dataset;
/// every other file is a byte dataset whose single document is the whole file.
/// Files of 64 KiB and more are memory-mapped rather than read.
pub struct Dataset {
    name: String,
    path: Option<PathBuf>,
    storage: Storage,
    kind: DatasetKind,
    /// Empty for byte datasets.
    index: Index,
    hash: OnceLock<u64>,
}

/// Opens `path` for reading if it is a regular file; returns it and its length.
fn open_regular_file(path: &Path) -> Result<(File, u64), DatasetError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if meta.is_dir() {
        return Err(DatasetError::IsDirectory { path: path.to_path_buf() });
    }
    if !meta.is_file() {
        return Err(DatasetError::NotAFile { path: path.to_path_buf() });
    }
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    Ok((file, meta.len()))
}

/// Why an input file (a config, a checkpoint) will not be read.
#[derive(Debug)]
pub enum FileProblem {
    NotFound,
    IsDirectory,
    /// A FIFO, device or socket: reading it could block or never end.
    Special(&'static str),
    /// Larger than the reader accepts.
    TooLarge {
        len: u64,
        max: u64,
    },
    Io(std::io::Error),
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::NotFound => write!(f, "no such file"),
            FileProblem::IsDirectory => write!(f, "is a directory"),
            FileProblem::Special(kind) => write!(f, "is {kind}, not a regular file"),
            FileProblem::TooLarge { len, max } => write!(f, "is {len} bytes, more than the {max} bytes accepted"),
            FileProblem::Io(e) => write!(f, "cannot read: {e}"),
        }
    }
}

/// What a file that is neither a regular file nor a directory is, in words
/// (inputs refuse to read it, outputs to replace it).
pub fn special_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Opens the input file `path` if it is a regular file of at most `max`
/// bytes, before a byte is read: a FIFO or a device (`/dev/zero`) would block
/// or never end, and a huge file would be read in full only to be refused.
/// The one check every config and checkpoint read goes through (datasets:
/// [`Dataset::open`], which maps rather than reads).
pub fn open_input_file(path: &Path, max: u64) -> Result<(File, u64), FileProblem> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => FileProblem::NotFound,
        _ => FileProblem::Io(e),
    })?;
    let t = meta.file_type();
    if t.is_dir() {
        return Err(FileProblem::IsDirectory);
    }
    if !t.is_file() {
        return Err(FileProblem::Special(special_kind(&t)));
    }
    if meta.len() > max {
        return Err(FileProblem::TooLarge { len: meta.len(), max });
    }
    let file = File::open(path).map_err(FileProblem::Io)?;
    Ok((file, meta.len()))
}

/// All the bytes of the file at `path` as one row, whatever its name (a
/// `.jsonl` file is not parsed). Errors as [`Dataset::open`] does for a byte
/// dataset: missing, a directory, unreadable, empty, or shorter than 2 bytes.
pub fn read_row_file(path: &Path) -> Result<Vec<u8>, DatasetError> {
    let (mut file, len) = open_regular_file(path)?;
    let mut bytes = Vec::with_capacity(len.min(1 << 30) as usize);
    file.read_to_end(&mut bytes).map_err(|e| io_error(path, e))?;
    match bytes.len() {
        0 => Err(DatasetError::Empty { path: path.to_path_buf() }),
        1 => Err(DatasetError::TooShort { path: path.to_path_buf(), len: 1 }),
        _ => Ok(bytes),
    }
}

fn is_jsonl_name(name: &str) -> bool {
    name.len() >= 6 && name.as_bytes()[name.len() - 6..].eq_ignore_ascii_case(b".jsonl")
}

impl Dataset {
    /// Opens the file at `path`: maps (or reads) it, and for `.jsonl` files
    /// parses and indexes every line, so that any bad line is reported here.
    pub fn open(path: &Path) -> Result<Dataset, DatasetError> {
        let (mut file, len) = open_regular_file(path)?;
        let storage = if len < MMAP_THRESHOLD {
            let mut bytes = Vec::with_capacity(len as usize);
            file.read_to_end(&mut bytes).map_err(|e| io_error(path, e))?;
            Storage::Owned(bytes)
        } else {
            // SAFETY: `Mmap::map` is unsafe because the mapped pages belong to
            // a file that other processes may change while we hold `&[u8]`s into
            // it, which breaks the immutability those references promise. We
            // treat dataset files as read-only inputs and accept that risk:
            // - if the file is rewritten in place, we read whatever bytes are
            //   there; nothing trusts them blindly (documents are re-parsed on
            //   decode and every slice is bounds-checked against the decoded
            //   text), so the outcome is wrong data or `DatasetError::Changed`;
            // - if the file is truncated, touching pages past its new end raises
            //   SIGBUS and kills the process. That cannot be caught here; it is
            //   the price of not reading hundreds of MB up front, and the reason
            //   small files are read instead of mapped.
            let map = unsafe { Mmap::map(&file) }.map_err(|e| io_error(path, e))?;
            Storage::Mapped(map)
        };
        let name = match path.file_name() {
            Some(n) => n.to_string_lossy().into_owned(),
            None => path.display().to_string(),
        };
        Self::build(name, path, Some(path.to_path_buf()), storage)
    }

    /// A dataset over bytes in memory, named `name` (which its errors and
    /// summary use in place of a path). Like a file, it is a JSON-lines dataset
    /// when `name` ends in `.jsonl`, and a byte dataset otherwise.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Dataset, DatasetError> {
        Self::build(name.to_string(), Path::new(name), None, Storage::Owned(bytes))
    }

    fn build(name: String, err_path: &Path, path: Option<PathBuf>, storage: Storage) -> Result<Dataset, DatasetError> {
        let bytes = storage.as_slice();
        if bytes.is_empty() {
            return Err(DatasetError::Empty { path: err_path.to_path_buf() });
        }
        let (kind, index) = if is_jsonl_name(&name) {
            (DatasetKind::Jsonl, jsonl::build_index(err_path, bytes)?)
        } else if bytes.len() < 2 {
            return Err(DatasetError::TooShort { path: err_path.to_path_buf(), len: bytes.len() });
        } else {
            (DatasetKind::Bytes, Index::default())
        };
        Ok(Dataset { name, path, storage, kind, index, hash: OnceLock::new() })
    }

    /// The file name (or the name given to [`Dataset::from_bytes`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path it was opened from; `None` for in-memory datasets.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn kind(&self) -> DatasetKind {
        self.kind
    }

    /// The raw content: the whole file, JSON syntax included for `.jsonl`.
    pub fn bytes(&self) -> &[u8] {
        self.storage.as_slice()
    }

    /// Whether the content is memory-mapped (files of 64 KiB and more) rather
    /// than held in memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// Length of [`Dataset::bytes`], the raw content.
    pub fn len_bytes(&self) -> usize {
        self.bytes().len()
    }

    /// Number of tokens that windows address: the file's length for a byte
    /// dataset; for JSON lines, the decoded documents joined by `\n`.
    pub fn len_tokens(&self) -> usize {
        match self.kind {
            DatasetKind::Bytes => self.len_bytes(),
            DatasetKind::Jsonl => self.index.stream_len,
        }
    }

    /// Number of documents: 1 for a byte dataset.
    pub fn num_documents(&self) -> usize {
        match self.kind {
            DatasetKind::Bytes => 1,
            DatasetKind::Jsonl => self.index.docs.len(),
        }
    }

    /// Document `i`'s tokens: the whole file for a byte dataset; the UTF-8 of
    /// line `i`'s `text` (blank lines not counted) for JSON lines, decoded now
    /// and borrowed from the file when it has no escapes.
    pub fn document(&self, i: usize) -> Result<Cow<'_, [u8]>, DatasetError> {
        match self.kind {
            DatasetKind::Bytes if i == 0 => Ok(Cow::Borrowed(self.bytes())),
            DatasetKind::Jsonl if i < self.index.docs.len() => self.decode(i),
            _ => Err(DatasetError::NoSuchDocument { name: self.name.clone(), index: i, count: self.num_documents() }),
        }
    }

    /// Document `i`'s length in tokens, without decoding it.
    pub fn document_len(&self, i: usize) -> Result<usize, DatasetError> {
        match self.kind {
            DatasetKind::Bytes if i == 0 => Ok(self.len_bytes()),
            DatasetKind::Jsonl if i < self.index.docs.len() => Ok(self.index.docs[i].text_len),
            _ => Err(DatasetError::NoSuchDocument { name: self.name.clone(), index: i, count: self.num_documents() }),
        }
    }

    /// Where document `i` starts in the raw file: 0 for a byte dataset's one
    /// document; for JSON lines the byte offset of its line (`scan --shard`
    /// splits a file by these positions).
    pub fn document_file_offset(&self, i: usize) -> Option<usize> {
        match self.kind {
            DatasetKind::Bytes => (i == 0).then_some(0),
            DatasetKind::Jsonl => self.index.docs.get(i).map(|d| d.start),
        }
    }

    /// Decodes JSON-lines document `i` (which must exist).
    fn decode(&self, i: usize) -> Result<Cow<'_, [u8]>, DatasetError> {
        let Doc { start, end, .. } = self.index.docs[i];
        let line = self.bytes().get(start..end).unwrap_or_default();
        jsonl::decode(line).map_err(|e| self.changed(format!("document {i} no longer parses: {e}")))
    }

    pub(super) fn changed(&self, detail: String) -> DatasetError {
        DatasetError::Changed { name: self.name.clone(), detail }
    }

    pub(super) fn jsonl_index(&self) -> &Index {
        &self.index
    }

    /// FNV-1a (64-bit) of the raw content, as 16 hex digits. Computed on the
    /// first call (about a second per GB) and remembered.
    pub fn content_hash(&self) -> String {
        format!("{:016x}", self.content_hash_u64())
    }

    /// [`Dataset::content_hash`] as a number.
    pub fn content_hash_u64(&self) -> u64 {
        *self.hash.get_or_init(|| fnv1a64(self.bytes()))
    }
}

/// 64-bit FNV-1a: stable across machines and versions.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |h, &b| (h ^ b as u64).wrapping_mul(PRIME))
}

/// `1234567` → `"1.2 MB"` (decimal units).
pub fn human_size(n: usize) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut x = n as f64 / 1000.0;
    let mut unit = 0;
    while x >= 999.95 && unit + 1 < UNITS.len() {
        x /= 1000.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

/// One line for the CLI: `corpus.txt: 1.2 MB of bytes` or
/// `x.jsonl: 300 documents, 4.1 MB`.
impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = human_size(self.len_bytes());
        match self.kind {
            DatasetKind::Bytes => write!(f, "{}: {size} of bytes", self.name),
            DatasetKind::Jsonl => {
                let n = self.num_documents();
                let s = if n == 1 { "" } else { "s" };
                write!(f, "{}: {n} document{s}, {size}", self.name)
            }
        }
    }
}

impl fmt::Debug for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dataset")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("len_bytes", &self.len_bytes())
            .field("num_documents", &self.num_documents())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}
