//! The registries this machine is configured for, as discovery proposes
//! them (commented out: a probe publishes to them): npm's (`.npmrc`,
//! `NPM_CONFIG_REGISTRY`), pip's (`pip.conf`, `PIP_INDEX_URL`) and the
//! container registries `docker login` stored credentials for. Only
//! origins are read; credentials beside them never are.

use super::{Candidate, Var};
use std::path::{Path, PathBuf};

/// The npm registry this machine is configured for, unless it is the
/// public one (commented out).
pub(super) fn npm_registry(var: Var<'_>, workspace: Option<&Path>, home: Option<&Path>) -> Option<Candidate> {
    let npm_registry = var("NPM_CONFIG_REGISTRY")
        .or_else(|| var("npm_config_registry"))
        .or_else(|| {
            let mut files: Vec<PathBuf> = workspace.iter().map(|w| w.join(".npmrc")).collect();
            files.extend(home.iter().map(|h| h.join(".npmrc")));
            files.iter().find_map(|f| ini_value(f, "registry"))
        });
    let url = npm_registry.and_then(|u| private_url(&u, "registry.npmjs.org"))?;
    Some(Candidate {
        why: format!("the npm registry this machine is configured for ({url}): package names, versions, readmes, dist-tags and tarballs carry messages"),
        entry: format!(
            "  - name: npm-registry\n    type: npm-registry\n    url: {}\n    token-env: NPM_TOKEN\n",
            serde_json::to_string(&url).expect("string serializes")
        ),
        skipped: Some("probing publishes packages: name it in a config (uncomment this entry in `runwarden discover`'s output) and give the job's registry token as NPM_TOKEN".into()),
        exposure: crate::http::origin(&url).map(|o| format!("registry:{o}")),
    })
}

/// The Python package index this machine is configured for, unless it is
/// the public one (commented out).
pub(super) fn pypi_index(var: Var<'_>, home: Option<&Path>) -> Option<Candidate> {
    let pip_index = var("PIP_INDEX_URL").or_else(|| {
        let mut files: Vec<PathBuf> = home
            .iter()
            .flat_map(|h| [h.join(".config/pip/pip.conf"), h.join(".pip/pip.conf")])
            .collect();
        files.push(PathBuf::from("/etc/pip.conf"));
        files.iter().find_map(|f| ini_value(f, "index-url"))
    });
    let url = pip_index.and_then(|u| private_url(&u, "pypi.org"))?;
    let simple = if url.ends_with('/') {
        url.clone()
    } else {
        format!("{url}/")
    };
    // devpi serves the simple index under `+simple/` of the index it
    // uploads to; other servers name their upload URL themselves.
    let upload = simple
        .strip_suffix("+simple/")
        .map(String::from)
        .unwrap_or_else(|| "https://<the index's upload URL>/".into());
    Some(Candidate {
        why: format!("the Python package index this machine is configured for ({url}): project names, versions, descriptions and file names carry messages"),
        entry: format!(
            "  - name: pypi-index\n    type: pypi-index\n    upload-url: {}\n    simple-url: {}\n    username-env: PYPI_USER\n    password-env: PYPI_PASSWORD\n",
            serde_json::to_string(&upload).expect("string serializes"),
            serde_json::to_string(&simple).expect("string serializes")
        ),
        skipped: Some("probing uploads projects: name it in a config (uncomment this entry in `runwarden discover`'s output), check upload-url, and give the job's index credentials as PYPI_USER and PYPI_PASSWORD".into()),
        exposure: crate::http::origin(&simple).map(|o| format!("registry:{o}")),
    })
}

/// The container registries `docker login` stored credentials for
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`): one
/// commented `oci-registry` entry for each key of `auths`. Only the keys
/// are read, reduced to an origin (no userinfo, no path); the credentials
/// beside them are never copied.
pub(super) fn oci_registries(var: Var<'_>, home: Option<&Path>) -> Vec<Candidate> {
    let file = match var("DOCKER_CONFIG") {
        Some(d) => PathBuf::from(d).join("config.json"),
        None => match home {
            Some(h) => h.join(".docker/config.json"),
            None => return vec![],
        },
    };
    // A config.json is small; a huge one is not docker's.
    let text = match std::fs::metadata(&file) {
        Ok(m) if m.len() <= 1 << 20 => std::fs::read_to_string(&file).unwrap_or_default(),
        _ => return vec![],
    };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        return vec![];
    };
    let mut origins: Vec<String> = vec![];
    for key in doc["auths"].as_object().into_iter().flat_map(|m| m.keys()) {
        let url = if key.contains("://") {
            key.clone()
        } else {
            format!("https://{key}")
        };
        let Some(o) = crate::http::origin(&url) else {
            continue;
        };
        // Docker Hub's login key names its old index; its registry API
        // is registry-1.docker.io.
        let o = match o.as_str() {
            "https://index.docker.io" | "https://docker.io" => {
                "https://registry-1.docker.io".into()
            }
            _ => o,
        };
        if crate::http::check_url(&o).is_ok() && !origins.contains(&o) {
            origins.push(o);
        }
    }
    origins
        .into_iter()
        .enumerate()
        .map(|(i, o)| Candidate {
            why: format!("a container registry `docker login` stored credentials for ({o}): repository names, tags, manifest annotations and layer blobs carry messages"),
            entry: format!(
                "  - name: {}\n    type: oci-registry\n    registry: {}\n    repository: ci/runwarden\n    token-env: REGISTRY_TOKEN\n",
                if i == 0 { "oci-registry".to_string() } else { format!("oci-registry-{}", i + 1) },
                serde_json::to_string(&o).expect("string serializes")
            ),
            skipped: Some("probing pushes manifests: name it in a config (uncomment this entry in `runwarden discover`'s output), set `repository` to a namespace the job may push to, `username` if the registry wants one, and give the job's registry password or token as REGISTRY_TOKEN".into()),
            exposure: Some(format!("registry:{o}")),
        })
        .collect()
}

/// The value of `key` in an npmrc or pip.conf style file (`key = value`
/// or `key=value`; the first one).
fn ini_value(file: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// `url` without userinfo (credentials are never copied into a config),
/// unless it is on the public host `public`.
fn private_url(url: &str, public: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(i) => &rest[i + 1..],
        None => rest,
    };
    let host = rest.split(['/', ':']).next().unwrap_or("");
    (!host.is_empty() && host != public && !host.ends_with(&format!(".{public}")))
        .then(|| format!("{scheme}://{rest}"))
}

