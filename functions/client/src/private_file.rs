//! Writing a file readable by its owner only (the local issuer's key, the stored sign-in):
//! `tempfile` creates a new file with mode 0600 under a random name beside the target, and it is
//! renamed over the old one once written and synced, so the file is never readable by others,
//! never half-written, and never shares a temporary with another writer.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` (creating its directory), readable by its owner only.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    }

    #[test]
    fn the_file_is_its_owners_only_whatever_was_there() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("nested").join("credentials.json");
        std::fs::create_dir_all(dir.path().join("nested"))?;
        // A readable file and a readable temporary left by an older version or another writer.
        for stale in [path.clone(), path.with_extension("tmp")] {
            std::fs::write(&stale, b"old")?;
            std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644))?;
        }
        write_private(&path, b"secret")?;
        assert_eq!(std::fs::read(&path)?, b"secret");
        assert_eq!(mode(&path), 0o600);
        Ok(())
    }

    #[test]
    fn a_new_directory_is_made() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("a").join("b").join("key.pem");
        write_private(&path, b"k")?;
        assert_eq!(std::fs::read(&path)?, b"k");
        assert_eq!(mode(&path), 0o600);
        Ok(())
    }
}
