//! The `sheetlog dev` process the CLI's black-box tests drive: on the emulator, on a free port,
//! under a fresh resource prefix, killed on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sheetlog_tests::Emulator;

pub struct DevProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    _emulator: Emulator,
}

impl Drop for DevProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DevProcess {
    /// Starts `sheetlog dev ARGS` (plus its port and a prefix starting with `label`) with the
    /// extra environment `envs`, and waits until `GET ready.0` answers `ready.1`.
    pub async fn start(
        label: &str,
        args: &[&str],
        envs: &[(&str, &Path)],
        ready: (&str, StatusCode),
    ) -> anyhow::Result<Self> {
        let emulator = Emulator::start()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let prefix = format!(
            "{label}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let value = |flag: &str| {
            args.windows(2)
                .find(|w| w[0] == flag)
                .map(|w| w[1].to_owned())
        };
        let given: Vec<String> = args
            .windows(2)
            .filter(|w| w[0] == "-c")
            .map(|w| w[1].to_owned())
            .collect();
        let context = sheetlog_local::dev::template_context(
            &value("--auth").unwrap_or_else(|| "none".into()),
            &value("--access-claim")
                .unwrap_or_else(|| sheetlog_api::access::DEFAULT_ACCESS_CLAIM.into()),
            &given,
        );
        let resources = description_file(context).await?;
        let args: Vec<&str> = {
            // `-c` is for the description, made here once per context.
            let mut kept = Vec::new();
            let mut skip = false;
            for a in args {
                if skip {
                    skip = false;
                } else if *a == "-c" {
                    skip = true;
                } else {
                    kept.push(*a);
                }
            }
            kept
        };
        let child = Command::new(env!("CARGO_BIN_EXE_sheetlog"))
            .arg("dev")
            .env("SHEETLOG_LOCAL_RESOURCES", resources)
            .args(args)
            .args(["--port", &port.to_string(), "--prefix", &prefix])
            .env("AWS_ENDPOINT_URL", emulator.endpoint())
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_REGION", "us-east-1")
            .envs(envs.iter().copied())
            .env_remove("AWS_PROFILE")
            .env_remove("SHEETLOG_SYNC_WRITES")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stack = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _emulator: emulator,
        };
        let (path, status) = ready;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(exit) = stack.child.try_wait()? {
                anyhow::bail!("sheetlog dev exited: {exit}");
            }
            if let Ok(r) = reqwest::get(format!("{}{path}", stack.base)).await
                && r.status() == status
            {
                return Ok(stack);
            }
            anyhow::ensure!(Instant::now() < deadline, "sheetlog dev did not start");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The template's description for `sheetlog dev --resources` with `context` (as `-c`), made
/// once per context and test process (it takes about 15 s) and kept in a temporary file.
async fn description_file(context: Vec<String>) -> anyhow::Result<std::path::PathBuf> {
    use std::collections::HashMap;
    static FILES: tokio::sync::Mutex<Option<HashMap<Vec<String>, tempfile::TempPath>>> =
        tokio::sync::Mutex::const_new(None);
    let mut files = FILES.lock().await;
    let files = files.get_or_insert_with(HashMap::new);
    if let Some(path) = files.get(&context) {
        return Ok(path.to_path_buf());
    }
    use std::io::Write;
    let json = sheetlog_local::dev::describe_template(&context).await?;
    let mut file = tempfile::NamedTempFile::new()?;
    file.write_all(&json)?;
    let path = file.into_temp_path();
    let out = path.to_path_buf();
    files.insert(context, path);
    Ok(out)
}
