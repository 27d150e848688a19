//! `type: docker-daemon` against a real Docker Engine (Debian's dockerd
//! 20.10, API 1.41, on a private socket): every carrier open, with the
//! control recovered and every foreign object (a dangling image, a volume
//! with content, a container, a network, names of another probe) the same
//! before and after; a declared channel authorized; a socket this user may
//! not open is "refused" (PASS), a daemon that is not there an ERROR; a
//! journal naming foreign objects removes nothing; cleanup by probe id
//! removes a plant whose receipt is lost.

use crate::common::containers::Dockerd;
use crate::common::hostile::{Hostile, Reply, Req};
use crate::common::*;
use runwarden::marker::Key;
use runwarden::surface::{self, CleanupOutcome, RunCtx};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

const CARRIERS: [&str; 9] = [
    "image-tag",
    "image-label",
    "volume-name",
    "volume-label",
    "volume-content",
    "container-name",
    "container-label",
    "network-name",
    "event-history",
];

fn config(host: &str, extra: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: docker\n    type: docker-daemon\n    host: {}\n{extra}",
        serde_json::to_string(host).unwrap()
    )
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("docker:{c}")))
        .collect()
}

#[test]
fn every_carrier_is_open_on_a_shared_daemon_and_foreign_objects_stay() {
    let Some(d) = Dockerd::start() else { return };
    d.foreign();
    let before = d.state();
    let work = tempfile::tempdir().unwrap();
    let p = run_config(
        work.path(),
        &config(&d.host(), "declared:\n  - docker:network-name\n"),
        &[],
        &["probe"],
    );
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    let mut want = ["fail"; 9];
    want[7] = "authorized";
    assert_eq!(verdicts(&p), want, "{}", p.report);
    for c in CARRIERS {
        assert_control_sound(p.finding(&format!("docker:{c}")));
    }
    assert_eq!(
        p.report["cleanup"]["left"],
        json!([]),
        "{}",
        p.report["cleanup"]
    );
    assert_eq!(
        d.state(),
        before,
        "foreign objects changed, or a plant is left"
    );
    // No earlier probe left a beacon here.
    assert_eq!(
        p.verdict("docker:runner-persistence"),
        "pass",
        "{}",
        p.report
    );
}

#[test]
fn a_socket_this_user_may_not_open_is_refused_and_a_missing_daemon_is_an_error() {
    let Some(d) = Dockerd::start() else { return };
    d.foreign();
    let before = d.state();
    // The socket as the docker group has it: root's, 0660. The whole
    // probe runs as uid 65534, so root's right to open it plays no part.
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o660)).unwrap();
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let cfg = work.path().join("runwarden.yml");
    std::fs::write(&cfg, config(&d.host(), "")).unwrap();
    let report = work.path().join("report.json");
    use std::os::unix::process::CommandExt;
    let out = bin()
        .args(["probe", "--config"])
        .arg(&cfg)
        .arg("--report")
        .arg(&report)
        .arg("--work-dir")
        .arg(work.path())
        .env("HOME", work.path())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let p = finish(out, &report);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 9], "{}", p.report);
    for c in CARRIERS {
        let f = p.finding(&format!("docker:{c}"));
        assert_control_sound(f);
        assert!(
            f["detail"].as_str().unwrap().contains("permission denied"),
            "{c}: {f}"
        );
    }
    assert_eq!(d.state(), before);

    let gone = work.path().join("no-daemon.sock");
    let p = run_config(
        work.path(),
        &config(&format!("unix://{}", gone.display()), ""),
        &[],
        &["probe"],
    );
    assert_eq!(p.code, 1);
    assert_eq!(verdicts(&p), ["error"; 9], "{}", p.report);
}

#[test]
fn cleanup_by_probe_id_removes_the_plant_and_a_forged_journal_removes_nothing() {
    let Some(d) = Dockerd::start() else { return };
    d.foreign();
    let before = d.state();
    let work = tempfile::tempdir().unwrap();
    let cfg = config(&d.host(), "");
    let env = [("RUNWARDEN_KEY", "k-docker-123456")];
    let plant = run_config(work.path(), &cfg, &env, &["plant", "--probe-id", "dk-1"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    assert_ne!(d.state(), before);
    let recover = run_config(work.path(), &cfg, &env, &["recover", "--probe-id", "dk-1"]);
    assert_eq!(verdicts(&recover), ["fail"; 9], "{}", recover.report);

    // A journal naming foreign objects, and one of this probe's names on
    // an object someone else made: nothing of it goes.
    let key = Key::new(Some(b"k-docker-123456".to_vec()));
    let ctx = RunCtx {
        probe_id: "dk-1",
        key: &key,
        surface: "test",
    };
    let ty = surface::by_name("docker-daemon").unwrap();
    let settings = json!({ "host": { "unix": d.socket }, "control": false });
    let inst = ty.open(&settings).unwrap();
    let forged = vec![
        json!({ "kind": "image", "name": "foreign/app", "tags": ["1"] }),
        json!({ "kind": "volume", "name": "cache-vol" }),
        json!({ "kind": "container", "name": "foreign-c" }),
        json!({ "kind": "network", "name": "foreign-net" }),
        json!({ "kind": "image", "name": "runwarden-other-image-tag-0123456789abcdef", "tags": ["latest"] }),
        json!({ "kind": "volume", "name": "runwarden-other-volume-name-0123456789abcdef" }),
    ];
    for (e, o) in forged
        .iter()
        .zip(surface::cleanup_owned(&*inst, &ctx, &forged))
    {
        assert!(matches!(o, CleanupOutcome::Foreign { .. }), "{e} -> {o:?}");
    }

    let clean = run_config(work.path(), &cfg, &env, &["cleanup", "--probe-id", "dk-1"]);
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(
        d.state(),
        before,
        "cleanup by probe id left something, or took a foreign object"
    );

    // One of this probe's names on an object someone else made after the
    // plant was gone: the entry is of runwarden's form, the object is not
    // the plant's, and it stays.
    let name = surface::tagged_name(&ctx, "volume-label", None, "volume");
    d.json(
        "POST",
        "/volumes/create",
        &json!({ "Name": name, "Labels": { "someone": "else" } }),
    );
    let entry = vec![json!({ "kind": "volume", "name": name })];
    let o = surface::cleanup_owned(&*inst, &ctx, &entry);
    assert!(matches!(o[0], CleanupOutcome::Left { .. }), "{o:?}");
    assert_eq!(d.get(&format!("/volumes/{name}")).0, 200);
    d.call("DELETE", &format!("/volumes/{name}"), None);

    // What cleanup cannot remove: the daemon's event history still holds
    // the plant.
    let again = run_config(work.path(), &cfg, &env, &["recover", "--probe-id", "dk-1"]);
    let f = again.finding("docker:event-history");
    assert_eq!(f["verdict"], "fail", "{f}");
    assert!(
        f["detail"].as_str().unwrap().contains("event history"),
        "{f}"
    );

    // A beacon an earlier job left (`plant --beacon`): the daemon keeps
    // state between jobs, and the next probe says who left it.
    let beacon = run_config(
        work.path(),
        &cfg,
        &env,
        &["plant", "--beacon", "--probe-id", "nightly-7"],
    );
    assert_eq!(beacon.code, 0, "{}\n{}", beacon.stdout, beacon.stderr);
    let p = run_config(work.path(), &cfg, &env, &["probe"]);
    let f = p.finding("docker:runner-persistence");
    assert_eq!(f["verdict"], "fail", "{f}");
    assert!(f["detail"].as_str().unwrap().contains("nightly-7"), "{f}");
    let clean = run_config(
        work.path(),
        &cfg,
        &env,
        &["cleanup", "--probe-id", "nightly-7"],
    );
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(d.state(), before, "the beacon was not cleaned up");
}

#[test]
fn a_daemon_over_tls_is_probed_with_the_client_certificates_and_a_wrong_ca_is_an_error() {
    let Some((d, addr, certs)) = Dockerd::start_tls() else {
        return;
    };
    d.foreign();
    let before = d.state();
    let work = tempfile::tempdir().unwrap();
    let host = format!("tcp://{addr}");
    // As the docker CLI is told: DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.
    let cfg = "version: 1\nsurfaces:\n  - name: docker\n    type: docker-daemon\n";
    let certs_text = certs.display().to_string();
    let env = [
        ("DOCKER_HOST", host.as_str()),
        ("DOCKER_TLS_VERIFY", "1"),
        ("DOCKER_CERT_PATH", certs_text.as_str()),
    ];
    let p = run_config(work.path(), cfg, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["fail"; 9], "{}\n{}", p.report, p.stderr);
    assert_eq!(
        p.report["cleanup"]["left"],
        json!([]),
        "{}",
        p.report["cleanup"]
    );
    assert!(
        p.report["surfaces"][0]["facts"]["daemon"]
            .as_str()
            .unwrap()
            .contains("TLS")
    );
    assert_eq!(d.state(), before);
    let key = std::fs::read_to_string(certs.join("key.pem")).unwrap();
    let body: String = key.lines().nth(1).unwrap().to_string();
    assert!(!format!("{}{}{}", p.stdout, p.stderr, p.report).contains(&body));

    // A CA that did not sign the daemon's certificate: no connection is
    // made, and nothing reads as closed.
    let other = tempfile::tempdir().unwrap();
    crate::common::containers::ca_and_pair(other.path(), "ca");
    std::fs::copy(other.path().join("ca.pem"), certs.join("ca.pem")).unwrap();
    let p = run_config(
        work.path(),
        &config(
            &host,
            &format!(
                "    cert-path: {}\n",
                serde_json::to_string(&certs_text).unwrap()
            ),
        ),
        &[],
        &["probe"],
    );
    assert_eq!(p.code, 1);
    assert_eq!(verdicts(&p), ["error"; 9], "{}", p.report);
    assert!(
        p.stdout.contains("TLS") || p.report.to_string().contains("TLS"),
        "{}",
        p.report
    );
}

/// An authorization plugin's refusal, as dockerd relays it.
fn denied() -> Reply {
    Reply::json(
        403,
        json!({ "message": "authorization denied by plugin rw-authz: not for this job" }),
    )
}

/// Passes `r` on; the event history ends where the daemon's clock is now
/// (the front reads each answer whole, and the history never ends).
fn pass_ending(r: &Req, pass: &dyn Fn(&Req) -> Reply) -> Reply {
    if r.path().ends_with("/events") {
        let until = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 1;
        let mut r = r.clone();
        r.url = format!("{}&until={until}", r.url);
        return pass(&r);
    }
    pass(r)
}

fn listing(r: &Req) -> bool {
    r.method == "GET"
        && [
            "/images/json",
            "/volumes",
            "/containers/json",
            "/networks",
            "/events",
            "/system/df",
        ]
        .iter()
        .any(|p| r.path().ends_with(p))
}

#[test]
fn an_authorization_plugin_is_the_daemons_refusal_and_a_filtered_listing_is_an_error() {
    let Some((d, addr)) = Dockerd::start_tcp() else {
        return;
    };
    d.foreign();
    let before = d.state();
    let upstream = format!("http://{addr}");
    let work = tempfile::tempdir().unwrap();
    let probe = |front: &Hostile| {
        let host = format!("tcp://127.0.0.1:{}", front.port);
        run_config(work.path(), &config(&host, ""), &[], &["probe"])
    };

    // Every write refused: every carrier is closed (PASS, refused).
    let front = Hostile::start(&upstream, |r, pass| {
        if r.method == "POST" || r.method == "PUT" {
            denied()
        } else {
            pass_ending(r, pass)
        }
    });
    let p = probe(&front);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 9], "{}", p.report);
    assert!(
        p.finding("docker:volume-name")["detail"]
            .as_str()
            .unwrap()
            .contains("authorization denied")
    );
    assert_eq!(d.state(), before);

    // Listings and the history refused to everyone: the name carriers are
    // closed (their only routes are refused), the agreed names open
    // (image-tag's nonce tag shows on its agreed image too).
    let front = Hostile::start(&upstream, |r, pass| {
        if listing(r) {
            denied()
        } else {
            pass_ending(r, pass)
        }
    });
    let p = probe(&front);
    let v: Vec<(String, String)> = CARRIERS
        .iter()
        .map(|c| (c.to_string(), p.verdict(&format!("docker:{c}"))))
        .collect();
    for (c, verdict) in &v {
        let want = match c.as_str() {
            "volume-name" | "container-name" | "network-name" | "event-history" => "pass",
            _ => "fail",
        };
        assert_eq!(verdict, want, "{c}: {}", p.report);
    }
    assert_eq!(d.state(), before);

    // Listings that leave out every runwarden object (a filter, a lag):
    // the name carriers are ERROR, never PASS; where the event history is
    // open, it shows them (FAIL).
    for history in [true, false] {
        let front = Hostile::start(&upstream, move |r, pass| {
            if r.path().ends_with("/events") && !history {
                return denied();
            }
            let mut reply = pass_ending(r, pass);
            if listing(r) && !r.path().ends_with("/events") {
                let mut v = reply.json_body();
                let keep = |o: &serde_json::Value| !o.to_string().contains("runwarden-");
                match v.as_array_mut() {
                    Some(a) => a.retain(keep),
                    None => {
                        for k in ["Volumes", "Images", "Containers"] {
                            if let Some(a) = v[k].as_array_mut() {
                                a.retain(keep)
                            }
                        }
                    }
                }
                reply.body = v.to_string().into_bytes();
            }
            reply
        });
        let p = probe(&front);
        for c in ["volume-name", "container-name", "network-name"] {
            let f = p.finding(&format!("docker:{c}"));
            let want = if history { "fail" } else { "error" };
            assert_eq!(f["verdict"], want, "{c}: {f}");
            if !history {
                assert!(
                    f["detail"].as_str().unwrap().contains("not yet consistent"),
                    "{c}: {f}"
                );
            }
        }
        assert_eq!(
            p.verdict("docker:event-history"),
            if history { "fail" } else { "pass" }
        );
        assert_eq!(d.state(), before);
    }
}

#[test]
fn watch_mode_names_what_a_command_made_on_the_daemon() {
    let Some(d) = Dockerd::start() else { return };
    d.foreign();
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("runwarden.yml");
    std::fs::write(&cfg, config(&d.host(), "")).unwrap();
    let report = work.path().join("report.json");
    // What an agent's step would do: a network whose name is the message.
    let out = bin()
        .args(["watch", "--config"])
        .arg(&cfg)
        .arg("--report")
        .arg(&report)
        .args([
            "--",
            "curl",
            "-s",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
        ])
        .arg(r#"{"Name":"agent-says-hello","Internal":true}"#)
        .arg("--unix-socket")
        .arg(&d.socket)
        .arg("http://d/v1.41/networks/create")
        .output()
        .unwrap();
    let p = finish(out, &report);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(p.verdict("docker:network-name"), "fail", "{}", p.report);
    assert_eq!(p.verdict("docker:volume-name"), "pass", "{}", p.report);
    assert_eq!(
        p.verdict("docker:volume-content"),
        "skipped",
        "{}",
        p.report
    );
}

/// One request: method, path, and a body with its content type.
type Step = (&'static str, &'static str, Option<(&'static str, Vec<u8>)>);

/// The same requests to the control daemon and to a real dockerd: the same
/// statuses, for everything the surface relies on (a volume create that
/// exists is a 201 that changes nothing, a name taken is 409, an image or
/// volume in use is 409, a missing one 404, a version too new 400).
#[test]
fn the_control_answers_as_dockerd_does() {
    let Some(d) = Dockerd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let control = runwarden::loopback::docker::DockerServer::start(dir.path()).unwrap();
    let tar = runwarden::archive::tar(&[]);
    let note = runwarden::archive::tar(&[("n.txt", b"hello\n")]);
    let json = "application/json";
    let steps: Vec<Step> = vec![
        ("POST", "/images/create?fromSrc=-&repo=fid&tag=latest&changes=LABEL%20a%3Db", Some(("application/x-tar", tar))),
        ("GET", "/images/fid:latest/json", None),
        ("POST", "/images/fid:latest/tag?repo=fid&tag=two", None),
        ("GET", "/images/nope:latest/json", None),
        ("POST", "/volumes/create", Some((json, br#"{"Name":"fid-v","Labels":{"k":"v"}}"#.to_vec()))),
        ("POST", "/volumes/create", Some((json, br#"{"Name":"fid-v"}"#.to_vec()))),
        ("POST", "/containers/create?name=fid-c", Some((json, br#"{"Image":"fid:latest","Cmd":["/x"],"HostConfig":{"Mounts":[{"Type":"volume","Source":"fid-v","Target":"/m"}]}}"#.to_vec()))),
        ("POST", "/containers/create?name=fid-c", Some((json, br#"{"Image":"fid:latest","Cmd":["/x"]}"#.to_vec()))),
        ("POST", "/containers/create?name=fid-d", Some((json, br#"{"Image":"nope:latest","Cmd":["/x"]}"#.to_vec()))),
        ("PUT", "/containers/fid-c/archive?path=/m", Some(("application/x-tar", note))),
        ("GET", "/containers/fid-c/archive?path=/m/n.txt", None),
        ("GET", "/containers/fid-c/archive?path=/m/none.txt", None),
        ("DELETE", "/volumes/fid-v", None),
        ("DELETE", "/images/fid:two", None),
        ("DELETE", "/images/fid:latest", None),
        ("POST", "/networks/create", Some((json, br#"{"Name":"fid-n","Internal":true,"CheckDuplicate":true}"#.to_vec()))),
        ("POST", "/networks/create", Some((json, br#"{"Name":"fid-n","Internal":true,"CheckDuplicate":true}"#.to_vec()))),
        ("GET", "/networks/fid-n", None),
        ("DELETE", "/networks/fid-n", None),
        ("DELETE", "/containers/fid-c", None),
        ("DELETE", "/volumes/fid-v", None),
        ("DELETE", "/images/fid:latest", None),
        ("GET", "/volumes/fid-v", None),
    ];
    let socket = control.socket().to_path_buf();
    for (method, path, body) in &steps {
        let b = body.as_ref().map(|(t, d)| (*t, d.as_slice()));
        let real = crate::common::containers::call_on(&d.socket, method, path, b).0;
        let ours = crate::common::containers::call_on(&socket, method, path, b).0;
        assert_eq!(
            ours, real,
            "{method} {path}: the control answers {ours}, dockerd {real}"
        );
    }
    // A version newer than the daemon's is refused by both.
    let too_new = |socket: &std::path::Path| {
        let out = std::process::Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--unix-socket",
            ])
            .arg(socket)
            .arg("http://d/v9.99/version")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(too_new(&socket), too_new(&d.socket));
}
