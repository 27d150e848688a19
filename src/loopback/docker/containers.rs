//! The control daemon's containers: created (never started) from an
//! image, with volumes mounted, and read and written through their
//! archive, as dockerd does for paths inside a mounted volume.

use super::routes::{find_image, get, labels_of, message};
use super::{Container, Daemon, Volume, id};
use crate::loopback::Reply;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(super) fn create_container(d: &mut Daemon, q: &[(String, String)], body: &[u8]) -> Reply {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let name = get(q, "name")
        .map(str::to_string)
        .unwrap_or_else(|| format!("c{}", &id()[..12]));
    if d.containers.iter().any(|c| c.name == name) {
        return message(
            409,
            format!("Conflict. The container name \"/{name}\" is already in use"),
        );
    }
    let image = v["Image"].as_str().unwrap_or_default();
    let Some(at) = find_image(d, image) else {
        return message(404, format!("No such image: {image}"));
    };
    let mut labels = d.images[at].labels.clone();
    labels.extend(labels_of(&v));
    let image = d.images[at].id.clone();
    let mut mounts = vec![];
    for m in v["HostConfig"]["Mounts"].as_array().into_iter().flatten() {
        let (Some(src), Some(target)) = (m["Source"].as_str(), m["Target"].as_str()) else {
            continue;
        };
        if !d.volumes.iter().any(|x| x.name == src) {
            let seq = d.next();
            d.volumes.push(Volume {
                name: src.to_string(),
                labels: BTreeMap::new(),
                files: BTreeMap::new(),
                seq,
            });
        }
        mounts.push((src.to_string(), target.trim_end_matches('/').to_string()));
    }
    let seq = d.next();
    let c = Container {
        id: id(),
        name,
        image,
        labels,
        mounts,
        seq,
    };
    let answer = json!({ "Id": c.id, "Warnings": [] });
    let mut attrs = json!(c.labels);
    attrs["name"] = json!(c.name);
    attrs["image"] = json!(c.image);
    d.event("container", "create", &c.id, attrs);
    d.containers.push(c);
    Reply::json(201, answer)
}

pub(super) fn container_summary(c: &Container) -> Value {
    json!({ "Id": c.id, "Names": [format!("/{}", c.name)], "ImageID": c.image, "Labels": c.labels, "State": "created", "Status": "Created" })
}

pub(super) fn container_route(
    d: &mut Daemon,
    method: &str,
    rest: &str,
    q: &[(String, String)],
    body: &[u8],
) -> Reply {
    let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(at) = d
        .containers
        .iter()
        .position(|c| c.name == name || c.id == name)
    else {
        return message(404, format!("No such container: {name}"));
    };
    match (method, tail) {
        ("GET", "json") => {
            let c = &d.containers[at];
            Reply::json(
                200,
                json!({ "Id": c.id, "Name": format!("/{}", c.name), "Image": c.image, "Config": { "Labels": c.labels }, "State": { "Status": "created" } }),
            )
        }
        ("DELETE", "") => {
            let c = d.containers.remove(at);
            let mut attrs = json!(c.labels);
            attrs["name"] = json!(c.name);
            d.event("container", "destroy", &c.id, attrs);
            Reply::empty(204)
        }
        ("PUT" | "GET", "archive") => archive(d, at, method, get(q, "path").unwrap_or("/"), body),
        _ => message(404, "page not found"),
    }
}

/// A container's archive, for paths inside a mounted volume (the control
/// keeps no container file system of its own).
fn archive(d: &mut Daemon, at: usize, method: &str, path: &str, body: &[u8]) -> Reply {
    let c = &d.containers[at];
    let path = path.trim_end_matches('/');
    let Some((vol, inner)) = c.mounts.iter().find_map(|(v, t)| {
        let inner = path.strip_prefix(t.as_str())?;
        (inner.is_empty() || inner.starts_with('/'))
            .then(|| (v.clone(), inner.trim_start_matches('/').to_string()))
    }) else {
        return message(
            404,
            format!("Could not find the file {path} in container {}", c.name),
        );
    };
    let Some(vol) = d.volumes.iter_mut().find(|v| v.name == vol) else {
        return message(404, "no such volume");
    };
    if method == "PUT" {
        for (name, data) in untar(body) {
            let at = if inner.is_empty() {
                name
            } else {
                format!("{inner}/{name}")
            };
            vol.files.insert(at, data);
        }
        return Reply::empty(200);
    }
    match vol.files.get(&inner) {
        Some(data) => {
            let base = inner.rsplit('/').next().unwrap_or(&inner).to_string();
            Reply::new(
                200,
                crate::archive::tar(&[(&base, data)]),
                &[("Content-Type", "application/x-tar")],
            )
        }
        None => message(404, format!("Could not find the file {path} in container")),
    }
}

/// The regular files of a ustar archive.
fn untar(mut t: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![];
    while t.len() >= 512 && t[..512].iter().any(|b| *b != 0) {
        let h = &t[..512];
        let text = |r: std::ops::Range<usize>| {
            let f = &h[r];
            String::from_utf8_lossy(&f[..f.iter().position(|b| *b == 0).unwrap_or(f.len())])
                .into_owned()
        };
        let size = u64::from_str_radix(text(124..136).trim(), 8).unwrap_or(0) as usize;
        let (prefix, name) = (text(345..500), text(0..100));
        let name = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let end = (512 + size).min(t.len());
        if matches!(h[156], b'0' | 0) && !name.contains("..") {
            out.push((
                name.trim_start_matches("./").to_string(),
                t[512..end].to_vec(),
            ));
        }
        t = &t[(512 + size.div_ceil(512) * 512).min(t.len())..];
    }
    out
}
