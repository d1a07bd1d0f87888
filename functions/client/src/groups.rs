//! The CLI's own sync client group, one per API: the edits `sheetlog set` and the row and column
//! commands append name it (`clientGroupId`), so they are steps of its undo stack and
//! `sheetlog undo LOG` takes back this person's last one (docs/cli.md). Kept beside the stored
//! sign-in, `$XDG_CONFIG_HOME/sheetlog/groups/<hash of the API URL>` (else under
//! `~/.config`), one file per API made with `create_new`, so two commands that start at once agree
//! on one group.

use std::io::Write;
use std::path::PathBuf;

use crate::api::CliError;

fn path_for(api_url: &str) -> Option<PathBuf> {
    let dir = crate::login::credentials_path()?.parent()?.join("groups");
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, api_url.as_bytes());
    let name: String = digest.as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(dir.join(name))
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> CliError {
    move |source| CliError::Io { context, source }
}

/// The CLI's group for `api_url`, made and kept the first time; `None` where there is nowhere to
/// keep it (neither XDG_CONFIG_HOME nor HOME): the edits are then appended without a group.
pub fn group_for(api_url: &str) -> Result<Option<String>, CliError> {
    let Some(path) = path_for(api_url) else {
        return Ok(None);
    };
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if !id.is_empty() {
            return Ok(Some(id.to_owned()));
        }
    }
    make(&path).map(Some)
}

/// A new group for `api_url` in place of the one kept (which belongs to another user of the API:
/// a group is its first user's, docs/sync.md).
pub fn renew(api_url: &str) -> Result<String, CliError> {
    let path = path_for(api_url)
        .ok_or_else(|| CliError::Other("neither XDG_CONFIG_HOME nor HOME is set".into()))?;
    let _ = std::fs::remove_file(&path);
    make(&path)
}

/// Makes the group file at `path`, or reads the one another command made first.
fn make(path: &std::path::Path) -> Result<String, CliError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    let id = format!("cli-{}", uuid::Uuid::new_v4());
    // Written whole beside it, then linked in only if no file is there: a reader never sees a
    // half-written id, and of two commands at once the first one's group stands.
    let mut tmp =
        tempfile::NamedTempFile::new_in(path.parent().unwrap_or(std::path::Path::new(".")))
            .map_err(io(format!("creating a file beside {}", path.display())))?;
    tmp.write_all(id.as_bytes())
        .map_err(io(format!("writing beside {}", path.display())))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(id),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            let text =
                std::fs::read_to_string(path).map_err(io(format!("reading {}", path.display())))?;
            Ok(text.trim().to_owned())
        }
        Err(e) => Err(io(format!("creating {}", path.display()))(e.error)),
    }
}
