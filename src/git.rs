//! Running the real `git` CLI: what users run, honouring the job's own
//! credential configuration.
//!
//! Every invocation gets `GIT_TERMINAL_PROMPT=0`, no askpass, no system or
//! global config (the job's credential settings are passed explicitly, as
//! `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` in the environment: never on a
//! command line other processes can read, never in a file), no hooks, the C
//! locale, and a hard timeout. Output is streamed line by line. git's
//! messages (stderr) pass through [`crate::redact`] at once; its stdout is
//! data (a URL, a config value, object contents), redacted wherever it
//! becomes text.

use crate::redact;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How one git invocation ended.
#[derive(Debug)]
pub struct Outcome {
    pub success: bool,
    pub code: Option<i32>,
    /// Already redacted.
    pub stderr: String,
    pub timed_out: bool,
}

impl Outcome {
    /// The last meaningful stderr line, for details.
    pub fn reason(&self) -> String {
        if self.timed_out {
            return "git timed out".into();
        }
        // git's first fatal or error line says what went wrong; the lines
        // after it are advice.
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines
            .iter()
            .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
            .or(lines.last())
            .copied()
            .unwrap_or("git failed without a message")
            .to_string()
    }
}

#[derive(Debug, Clone)]
pub struct Git {
    /// Config passed to every invocation (credential settings).
    config: Vec<(String, String)>,
    /// Where credential helpers find their files (the operator's HOME): the
    /// runs' own HOME is a fresh directory.
    credential_home: Option<String>,
    timeout: Duration,
    /// Isolated from the operator's config (runs A, B, cleanup); the
    /// operator's own view is used only to read a checkout's settings.
    isolated: bool,
}

impl Git {
    /// `config` holds the checkout's credential settings: every
    /// `extraheader` and `credential.*` value is registered with
    /// [`crate::redact`] (its words and decoded basic credentials too), so
    /// nothing git prints can carry them. `url` never holds userinfo by the
    /// time it gets here (the git-remote surface moves it into an
    /// extraheader); any that does is registered as well.
    pub fn new(
        config: Vec<(String, String)>,
        credential_home: Option<String>,
        timeout: Duration,
        url: &str,
    ) -> Git {
        for (k, v) in &config {
            let k = k.to_ascii_lowercase();
            if k.ends_with("extraheader") {
                redact::add_header(v);
            } else if k.starts_with("credential") {
                redact::add(v);
            }
        }
        if let Some(info) = redact::url_userinfo(url) {
            match info.split_once(':') {
                Some((u, p)) => redact::add_basic(u, p),
                None => redact::add(info),
            }
        }
        Git {
            config,
            credential_home,
            timeout,
            isolated: true,
        }
    }

    /// Git as the operator's own config sees it, to read a checkout's
    /// remote and credential settings (prompts still off).
    pub fn operator(timeout: Duration) -> Git {
        Git {
            config: vec![],
            credential_home: None,
            timeout,
            isolated: false,
        }
    }

    fn command(&self, dir: &Path, args: &[&OsStr], envs: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(args)
            .current_dir(dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env_remove("SSH_ASKPASS")
            .env(
                "GIT_SSH_COMMAND",
                "ssh -o BatchMode=yes -o ConnectTimeout=20",
            )
            .env("LC_ALL", "C")
            .env("GIT_OPTIONAL_LOCKS", "0");
        if !self.isolated {
            cmd.envs(envs.iter().copied());
            return cmd;
        }
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
        let mut config: Vec<(&str, &str)> = vec![
            // Only the transports runwarden supports; never `ext::` (runs a
            // command) or `fd::`, whatever a checkout's config says.
            ("protocol.allow", "never"),
            ("protocol.file.allow", "always"),
            ("protocol.http.allow", "always"),
            ("protocol.https.allow", "always"),
            ("protocol.ssh.allow", "always"),
            ("protocol.git.allow", "always"),
            ("core.hooksPath", "/dev/null"),
            ("core.fsmonitor", "false"),
            ("advice.detachedHead", "false"),
            // Scratch repositories live for one run: no `git maintenance`
            // or `gc --auto` process after each fetch and push.
            ("maintenance.auto", "false"),
            ("gc.auto", "0"),
            // Nor an fsync of every pack and ref they write (git's default
            // since 2.36): nothing in them outlives the run. (Git drops
            // this config when it starts a local remote's side, so a
            // remote keeps its own.)
            ("core.fsync", "none"),
            // A fetch keeps its pack too: index-pack then finds it
            // self-contained (run A's plants are root commits) and git
            // skips the separate connectivity walk, one process fewer.
            ("fetch.unpackLimit", "1"),
            // A stalled transfer fails well before the hard timeout.
            ("http.lowSpeedLimit", "1"),
            ("http.lowSpeedTime", "30"),
        ];
        config.extend(self.config.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
        for (i, (k, v)) in config.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), k)
                .env(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
        if let Some(home) = &self.credential_home {
            cmd.env("HOME", home);
        }
        // The caller's variables last: they may override the defaults
        // (e.g. a global config that trusts a local remote).
        cmd.envs(envs.iter().copied());
        cmd
    }

    /// Runs git in `dir`, feeding `input` on stdin and every stdout line to
    /// `line`, within the timeout.
    pub fn stream(
        &self,
        dir: &Path,
        args: &[&OsStr],
        envs: &[(&str, &str)],
        input: &[u8],
        mut line: impl FnMut(&[u8]),
    ) -> Outcome {
        let mut cmd = self.command(dir, args, envs);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::sys::die_with_parent(&mut cmd);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Outcome {
                    success: false,
                    code: None,
                    stderr: format!("cannot run git: {e}"),
                    timed_out: false,
                };
            }
        };
        // A watchdog kills git at the deadline; reading stops when its
        // pipes close.
        let pid = child.id();
        let timed_out = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let watchdog = {
            let timed_out = timed_out.clone();
            let timeout = self.timeout;
            std::thread::spawn(move || {
                if done_rx.recv_timeout(timeout).is_err() {
                    timed_out.store(true, Ordering::SeqCst);
                    crate::sys::send_signal(pid, libc::SIGKILL);
                }
            })
        };
        let mut stdin = child.stdin.take().expect("piped");
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let mut stderr = child.stderr.take().expect("piped");
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            // Bounded: git's own messages, not data.
            let _ = (&mut stderr).take(1 << 20).read_to_end(&mut buf);
            buf
        });
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match out.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    // Data, not a message: a checkout's URL and
                    // extraheader must come through as they are (the job's
                    // own token is a registered secret). Whatever of it
                    // becomes text (a push's `ng` reason, a ref name in a
                    // detail) is redacted where it does: `porcelain`, and
                    // the orchestrator's layer over every event.
                    line(&buf);
                }
            }
        }
        let status = child.wait();
        let _ = done_tx.send(());
        let _ = watchdog.join();
        let _ = writer.join();
        let err = err_reader.join().unwrap_or_default();
        let status = status.ok();
        Outcome {
            success: status.map(|s| s.success()).unwrap_or(false)
                && !timed_out.load(Ordering::SeqCst),
            code: status.and_then(|s| s.code()),
            stderr: redact::text(&String::from_utf8_lossy(&err)),
            timed_out: timed_out.load(Ordering::SeqCst),
        }
    }

    /// Runs git and collects stdout (for small outputs: object contents,
    /// single values).
    pub fn run(
        &self,
        dir: &Path,
        args: &[&OsStr],
        envs: &[(&str, &str)],
        input: &[u8],
    ) -> (Outcome, Vec<u8>) {
        let mut stdout = Vec::new();
        let o = self.stream(dir, args, envs, input, |l| {
            stdout.extend_from_slice(l);
            stdout.push(b'\n');
        });
        (o, stdout)
    }
}
