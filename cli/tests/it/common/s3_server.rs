//! A moto S3 server on loopback (installed on first use by `scripts/install-s3-test-server.sh`)
//! and what the tests do with it: put, list and read objects, and run `pipeline` against it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use arrow::array::RecordBatch;
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::{read, tiny_model};

/// Runs `work` on the object-storage runtime (which starts in a test process, or the test
/// cannot run at all).
pub fn block_on<F: std::future::Future>(work: F) -> F::Output {
    batch_io::object_storage::block_on(work).expect("the object-storage runtime starts")
}

pub const BUCKET: &str = "corpus";

/// A moto S3 server on a free loopback port, stopped when dropped.
pub struct S3Server {
    child: Child,
    port: u16,
}

impl S3Server {
    /// `None` (with a loud note) where no server is installed, outside CI.
    pub fn start(test: &str) -> Option<Self> {
        Self::start_with(test, false)
    }

    /// With `checks_credentials`, the server makes bucket `corpus` and then refuses every
    /// request not signed by one of its IAM users (it has none).
    pub fn start_with(test: &str, checks_credentials: bool) -> Option<Self> {
        let python = test_support::or_skip(test, test_support::s3_test_server_python().context("no S3 test server"))?;
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
        let mut command = Command::new(python);
        if checks_credentials {
            // Only the first request (making the bucket) goes unchecked.
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", "1");
        }
        let child = command
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .env("S3_UPLOAD_PART_MIN_SIZE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let server = S3Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start listening");
            std::thread::sleep(Duration::from_millis(50));
        }
        server.create_bucket(BUCKET);
        Some(server)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What a user sets: the endpoint, plain HTTP allowed, and credentials.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    }

    /// Buckets are made by the S3 API itself (object_store has no call for it).
    pub fn create_bucket(&self, bucket: &str) {
        let reply = self.request("PUT", &format!("/{bucket}"));
        assert!(reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200"), "{reply}");
    }

    /// Keys of the multipart uploads in progress: parts being written (object_store cannot
    /// list them).
    pub fn uploads_in_progress(&self) -> String {
        self.request("GET", &format!("/{BUCKET}?uploads"))
    }

    /// One plain S3 API request (moto does not check signatures), answered whole.
    pub fn request(&self, method: &str, target: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let request = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).expect("reply");
        reply
    }

    pub fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_endpoint(self.endpoint())
                .with_allow_http(true)
                .with_bucket_name(BUCKET)
                .with_access_key_id("test")
                .with_secret_access_key("test")
                .with_region("us-east-1")
                .build()
                .expect("store"),
        )
    }

    pub fn put(&self, key: &str, file: &Path) {
        let bytes = std::fs::read(file).expect("read");
        block_on(self.store().put(&ObjectPath::from(key), PutPayload::from(bytes))).expect("put");
    }

    /// Keys under `prefix`, sorted: what a LIST shows.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let store = self.store();
        let metas: Vec<_> = block_on(store.list(Some(&ObjectPath::from(prefix))).try_collect()).expect("list");
        let mut keys: Vec<String> = metas.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        keys
    }

    /// The bytes of the object at `key`.
    pub fn get(&self, key: &str) -> Vec<u8> {
        block_on(async { self.store().get(&ObjectPath::from(key)).await?.bytes().await }).expect("get").to_vec()
    }

    /// Every part under `prefix`, downloaded and read, in part order.
    pub fn read_parts(&self, prefix: &str) -> RecordBatch {
        let dir = tempfile::tempdir().expect("tempdir");
        let batches: Vec<RecordBatch> = self
            .list(prefix)
            .iter()
            .filter(|k| k.contains("/part-"))
            .map(|key| {
                let local = dir.path().join(key.replace('/', "_"));
                std::fs::write(&local, self.get(key)).expect("write");
                read(&local)
            })
            .collect();
        arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("concat")
    }

    pub fn pipeline(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pipeline"));
        command.args(args).arg("--model").arg(tiny_model()).envs(self.env());
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.pipeline(args).output().expect("run pipeline")
    }

    /// `pipeline report ARGS` with the server's environment.
    pub fn report(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .arg("report")
            .args(args)
            .envs(self.env())
            .output()
            .expect("run report")
    }

    /// `pipeline sql ARGS` with the server's environment.
    pub fn sql(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_pipeline")).arg("sql").args(args).envs(self.env()).output().expect("run sql")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
