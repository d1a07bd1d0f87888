//! Writing a file readable by its owner only (the local issuer's key, the stored sign-in):
//! created with mode 0600 under a temporary name and renamed over the old one, so the file is
//! never readable by others and never half-written.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` (creating its directory), readable by its owner only.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        opts.open(&tmp)?.write_all(bytes)?;
    }
    std::fs::rename(&tmp, path)
}
