//! What `validate` takes apart: a remote that git could read as an option
//! or a command, scp-like and ssh remotes, a URL's credentials moved off
//! git's command line, and a checkout's own credential settings.

use crate::fault::Fault;
use crate::git::Git;
use std::ffi::OsStr;
use std::path::Path;

/// Config values reach git's command line (a pull request can change the
/// config): a remote that git could read as an option, or a transport
/// helper (`ext::<command>` runs a command), is refused outright
/// (`Invalid`).
pub(super) fn check_remote(remote: &str) -> Result<(), Fault> {
    if remote.starts_with('-') {
        return Err(Fault::invalid(
            "must not start with `-` (git would read it as an option)",
        ));
    }
    if remote.contains("::") {
        return Err(Fault::invalid(
            "uses a transport helper (`<transport>::<address>`), which runwarden does not allow",
        ));
    }
    if remote.chars().any(|c| c.is_control()) {
        return Err(Fault::invalid("contains control characters"));
    }
    Ok(())
}

/// Takes credentials out of an http(s) URL (`https://user:token@host/…`,
/// as some checkouts and configs hold it) and into an `extraheader` that
/// git reads from its environment: git's command line is readable in
/// `/proc/<pid>/cmdline` by every user of the machine, the environment
/// only by the same user. A token alone (`https://token@host`) is sent as
/// the user name with an empty password. ssh names a user, never a
/// password. `Invalid` for credentials that cannot be moved.
pub(super) fn move_userinfo(
    url: String,
    credentials: &mut Vec<(String, String)>,
) -> Result<String, Fault> {
    use base64::Engine as _;
    let (bare, info) = crate::redact::split_userinfo(&url);
    let Some(info) = info else {
        return Ok(url);
    };
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    match scheme {
        "http" | "https" => {
            let (user, password) = info.split_once(':').unwrap_or((&info, ""));
            crate::redact::add_basic(user, password);
            crate::redact::add(&info);
            let origin = crate::http::origin(&bare).ok_or_else(|| {
                Fault::invalid("`remote`: the URL has no host to send its credentials to")
            })?;
            let b64 =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            credentials.push((
                format!("http.{origin}/.extraheader"),
                format!("Authorization: Basic {b64}"),
            ));
            Ok(bare)
        }
        _ if info.contains(':') => Err(Fault::invalid(
            "`remote`: a password in a non-HTTP URL is never used (ssh asks its agent or key): remove it",
        )),
        _ => Ok(url),
    }
}

/// `git@host:path` (scp-like ssh syntax): a colon before any slash, after
/// more than one character (not a drive letter).
pub(super) fn is_scp(remote: &str) -> bool {
    match remote.find(':') {
        Some(i) => i > 1 && !remote[..i].contains('/'),
        None => false,
    }
}

pub(super) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// The checkout's `http.*` (extraheader, CA settings, proxies) and
/// `credential.*` settings, with includes followed (actions/checkout v6 puts
/// its token in a file pulled in with `includeIf`).
pub(super) fn read_credentials(operator: &Git, repo: &Path) -> Vec<(String, String)> {
    let args: [&OsStr; 7] = [
        "-C".as_ref(),
        repo.as_os_str(),
        "config".as_ref(),
        "--includes".as_ref(),
        "--null".as_ref(),
        "--get-regexp".as_ref(),
        r"^(http\..*|credential\..*)$".as_ref(),
    ];
    let (out, stdout) = operator.run(Path::new("/"), &args, &[], b"");
    if !out.success {
        return vec![];
    }
    // `--null`: "key\nvalue\0" per entry (our line reader put a '\n' after
    // every line, so split on NUL and trim that).
    stdout
        .split(|b| *b == 0)
        .filter_map(|e| {
            let e = String::from_utf8_lossy(e);
            let e = e.trim_start_matches('\n');
            let (k, v) = e.split_once('\n')?;
            Some((k.to_string(), v.trim_end_matches('\n').to_string()))
        })
        .collect()
}
