//! Running the real `git` CLI: what users run, honouring the job's own
//! credential configuration.
//!
//! Every invocation gets `GIT_TERMINAL_PROMPT=0`, no askpass, no system or
//! global config (the job's credential settings are passed explicitly, as
//! `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` in the environment: never on a
//! command line other processes can read, never in a file), no hooks, the C
//! locale, and a hard timeout. Output is streamed line by line. Anything
//! that could be printed passes through [`Git::redact`], which removes
//! every credential value and URL userinfo.

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
    secrets: Vec<String>,
    /// Isolated from the operator's config (runs A, B, cleanup); the
    /// operator's own view is used only to read a checkout's settings.
    isolated: bool,
}

impl Git {
    pub fn new(
        config: Vec<(String, String)>,
        credential_home: Option<String>,
        timeout: Duration,
        url: &str,
    ) -> Git {
        let mut secrets: Vec<String> = config
            .iter()
            .filter(|(k, _)| {
                k.to_ascii_lowercase().ends_with("extraheader") || k.starts_with("credential")
            })
            .flat_map(|(_, v)| {
                // The header value, and each word of it (a bare token or
                // base64 credentials after "basic").
                let mut parts: Vec<String> = v.split_whitespace().map(String::from).collect();
                parts.push(v.clone());
                parts
            })
            .filter(|s| s.len() >= 8)
            .collect();
        if let Some(info) = userinfo(url) {
            secrets.push(info.to_string());
            if let Some((_, pass)) = info.split_once(':') {
                secrets.push(pass.to_string());
            }
        }
        let mut config = config;
        if userinfo(url).is_some() {
            // Send the URL's credentials with the first request instead of
            // after a 401 challenge: one round trip less per command
            // (git 2.46+; older versions ignore the key).
            config.push(("http.proactiveAuth".into(), "basic".into()));
        }
        // Longest first, so a secret containing another is removed whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Git {
            config,
            credential_home,
            timeout,
            secrets,
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
            secrets: vec![],
            isolated: false,
        }
    }

    /// Removes every known secret and any URL userinfo from `text`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if !s.is_empty() {
                out = out.replace(s.as_str(), "***");
            }
        }
        redact_userinfo(&out)
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
        let pid = child.id() as i32;
        let timed_out = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let watchdog = {
            let timed_out = timed_out.clone();
            let timeout = self.timeout;
            std::thread::spawn(move || {
                if done_rx.recv_timeout(timeout).is_err() {
                    timed_out.store(true, Ordering::SeqCst);
                    unsafe { libc::kill(pid, libc::SIGKILL) };
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
            stderr: self.redact(&String::from_utf8_lossy(&err)),
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

/// The `user:password` part of a URL, if any.
pub fn userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    authority.rsplit_once('@').map(|(info, _)| info)
}

/// Replaces the userinfo of every URL in `text` with `***`.
pub fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted() {
        assert_eq!(userinfo("https://u:p@h/x"), Some("u:p"));
        assert_eq!(userinfo("https://h/x@y"), None);
        assert_eq!(
            redact_userinfo("fatal: unable to access 'https://user:tok@host:8080/r.git/': 403"),
            "fatal: unable to access 'https://***@host:8080/r.git/': 403"
        );
        assert_eq!(redact_userinfo("file:///a/b c"), "file:///a/b c");
    }

    #[test]
    fn secrets_are_redacted() {
        let cfg = vec![(
            "http.https://github.com/.extraheader".to_string(),
            "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==".to_string(),
        )];
        let g = Git::new(
            cfg,
            None,
            Duration::from_secs(1),
            "https://x:hunter2hunter2@h/r",
        );
        let out = g.redact("header eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA== and hunter2hunter2 and https://x:hunter2hunter2@h/r");
        assert!(
            !out.contains("eC1hY2Nl") && !out.contains("hunter2"),
            "{out}"
        );
    }
}
