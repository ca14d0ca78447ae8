//! What the servers share: the command line (--port N, --workers N), the runtime (the
//! multi_thread flavour with every driver, as the anchors build it), the accept loop (one
//! task per connection; an accept error backs off 10 ms) and the first line
//! "<name> runtime=tokio workers=N listening=127.0.0.1:PORT" that tools/eddy-bench waits for.
//! And what the benchmark programs share (`bench`): flags, the runtime, the result line of
//! shared/bench/SPEC.md and the failure path, as in the anchors' tokio-bench.
use std::future::Future;
use std::io::Write;
use std::process::exit;
use std::time::Duration;

/// The value given to `flag` on the command line (file_server's --root), if any.
pub fn flag_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1).cloned())
}

pub fn serve<F, Fut>(name: &str, handler: F) -> !
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
{
    serve_with(name, handler, || {})
}

/// `serve`, and `on_start` runs inside the runtime before the listener is bound (chat_server
/// starts its signal tasks there, so that they are ready once the first line is out).
pub fn serve_with<F, Fut, S>(name: &str, handler: F, on_start: S) -> !
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
    S: FnOnce() + Send + 'static,
{
    let mut port: u16 = 7878;
    let mut workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match (flag.as_str(), value.parse::<usize>()) {
            ("--port", Ok(p)) if p <= 65535 => port = p as u16,
            ("--workers", Ok(w)) if w >= 1 => workers = w,
            ("--root", _) if !value.is_empty() => {} // file_server's own: flag_value("--root")
            _ => {
                eprintln!("usage: {name} [--port N] [--workers N]");
                exit(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("{name}: failed to build runtime: {e}");
            exit(1)
        });
    let name = name.to_string();
    let res: std::io::Result<()> = rt.block_on(async move {
        tokio::spawn(async move {
            on_start();
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("{name} runtime=tokio workers={workers} listening=127.0.0.1:{}", listener.local_addr()?.port());
            let _ = std::io::stdout().flush();
            loop {
                match listener.accept().await {
                    Ok((s, _)) => {
                        let _ = s.set_nodelay(true);
                        let conn = handler(s);
                        tokio::spawn(async move {
                            let _ = conn.await;
                        });
                    }
                    Err(e) => {
                        eprintln!("{name}: accept error: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        })
        .await
        .expect("accept task panicked")
    });
    if let Err(e) = res {
        eprintln!("{e}");
        exit(1);
    }
    exit(0)
}

/// The benchmark programs' side (fork_join, task_memory): the same flags, result line and
/// exit statuses as eddy's benchmarks/bench_main.hpp (0 passed its self-check, 1 wrong
/// result, 2 usage error).
pub mod bench {
    use std::collections::BTreeMap;
    use std::io::Write;
    use std::process::exit;
    use std::time::Duration;

    /// `--name value` or `--name=value` flags; `--workers N` defaults to the CPUs available.
    pub struct Args {
        program: &'static str,
        given: BTreeMap<String, String>,
        usage: Vec<String>,
    }

    impl Args {
        pub fn parse(program: &'static str) -> Args {
            let mut given = BTreeMap::new();
            let mut it = std::env::args().skip(1);
            let args = Args { program, given: BTreeMap::new(), usage: Vec::new() };
            while let Some(flag) = it.next() {
                let name = match flag.strip_prefix("--") {
                    Some(name) => name,
                    None => args.fail_usage(&format!("unexpected argument '{flag}'")),
                };
                let (name, value) = match name.split_once('=') {
                    Some((n, v)) => (n.to_string(), v.to_string()),
                    None => match it.next() {
                        Some(v) => (name.to_string(), v),
                        None => args.fail_usage(&format!("flag --{name} needs a value")),
                    },
                };
                given.insert(name, value);
            }
            Args { given, ..args }
        }

        /// A whole-number flag.
        pub fn num(&mut self, name: &str, default: u64) -> u64 {
            self.usage.push(format!("[--{name} {default}]"));
            match self.given.remove(name) {
                None => default,
                Some(v) => v.parse().unwrap_or_else(|_| self.fail_usage(&format!("--{name}: not a whole number: '{v}'"))),
            }
        }

        /// A flag taking one of `words` (the first is the default).
        pub fn word(&mut self, name: &str, words: &[&str]) -> String {
            self.usage.push(format!("[--{name} {}]", words.join("|")));
            match self.given.remove(name) {
                None => words[0].to_string(),
                Some(v) if words.contains(&v.as_str()) => v,
                Some(v) => self.fail_usage(&format!("--{name}: unknown value '{v}'")),
            }
        }

        pub fn workers(&mut self) -> usize {
            let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as u64;
            let w = self.num("workers", cpus);
            if w == 0 {
                self.fail_usage("--workers must be at least 1");
            }
            w as usize
        }

        /// Every flag given was one this program reads.
        pub fn check_all_used(&self) {
            if let Some(name) = self.given.keys().next() {
                self.fail_usage(&format!("unknown option --{name}"));
            }
        }

        fn fail_usage(&self, why: &str) -> ! {
            eprintln!("{}: {why}", self.program);
            eprintln!("usage: {} {}", self.program, self.usage.join(" "));
            exit(2)
        }
    }

    /// The multi_thread flavour with every driver, even for one worker (as tokio-bench).
    pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .unwrap_or_else(|e| {
                eprintln!("failed to build runtime: {e}");
                exit(1)
            })
    }

    /// Runs `fut` as a spawned task (not on the block_on thread), as tokio-bench does.
    pub fn run_in_task<F, T>(rt: &tokio::runtime::Runtime, fut: F) -> T
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        rt.block_on(async move { tokio::spawn(fut).await.expect("driver task panicked") })
    }

    pub fn fail(bench: &str, msg: String) -> ! {
        eprintln!("bench={bench} FAILED: {msg}");
        exit(1)
    }

    /// The one result line of shared/bench/SPEC.md.
    pub fn report(bench: &str, workers: usize, ops: u64, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 { (ops as f64 / secs).round() as u64 } else { 0 };
        println!("bench={bench} runtime=tokio workers={workers} ops={ops} secs={secs:.4} rate={rate}");
        let _ = std::io::stdout().flush();
    }
}

/// What the HTTP servers share (http_hello, file_server): reading a request's line and headers
/// within bounds, as examples/support/http_request.hpp does for eddy's.
pub mod http {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};

    pub const MAX_LINE: usize = 8 * 1024;
    pub const MAX_HEADERS: usize = 100;
    pub const MAX_BODY: usize = 1024 * 1024;

    /// A request's line and what its headers said; its body (`length` bytes) is still unread.
    pub struct Request {
        pub method: String,
        pub target: String,
        pub close: bool,
        pub length: usize,
    }

    /// Reads one line without "\n" / "\r\n"; None at end of stream, Err(()) when too long.
    async fn read_line<R: AsyncBufReadExt + Unpin>(r: &mut R, line: &mut String) -> std::io::Result<Option<Result<(), ()>>> {
        line.clear();
        let n = (&mut *r).take(MAX_LINE as u64 + 1).read_line(line).await?;
        if n == 0 {
            return Ok(None);
        }
        if !line.ends_with('\n') {
            return Ok(Some(if n > MAX_LINE { Err(()) } else { Ok(()) }));
        }
        line.pop();
        if line.ends_with('\r') {
            line.pop();
        }
        Ok(Some(Ok(())))
    }

    /// Reads a request's line (empty lines before it skipped) and headers: None at end of
    /// stream (also in the middle of a request); else the request, or the status to refuse
    /// it with (400 malformed or ambiguous framing, 413 a Content-Length over 1 MiB, 431 a
    /// line too long or too many headers, 501 Transfer-Encoding).
    pub async fn read_request<R: AsyncBufReadExt + Unpin>(
        r: &mut R,
        line: &mut String,
    ) -> std::io::Result<Option<Result<Request, &'static str>>> {
        loop {
            match read_line(r, line).await? {
                None => return Ok(None),
                Some(Err(())) => return Ok(Some(Err("431 Request Header Fields Too Large"))),
                Some(Ok(())) if line.is_empty() => continue,
                Some(Ok(())) => break,
            }
        }
        let parts: Vec<&str> = line.splitn(3, ' ').collect();
        if parts.len() != 3 || parts[0].is_empty() || parts[1].is_empty() || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
            return Ok(Some(Err("400 Bad Request")));
        }
        let mut req = Request { method: parts[0].to_string(), target: parts[1].to_string(), close: parts[2] == "HTTP/1.0", length: 0 };
        let mut length: Option<usize> = None;
        let mut headers = 0;
        loop {
            match read_line(r, line).await? {
                None => return Ok(None),
                Some(Err(())) => return Ok(Some(Err("431 Request Header Fields Too Large"))),
                Some(Ok(())) if line.is_empty() => break,
                Some(Ok(())) => {}
            }
            if headers == MAX_HEADERS {
                return Ok(Some(Err("431 Request Header Fields Too Large")));
            }
            headers += 1;
            let (name, value) = match line.split_once(':') {
                Some(pair) => pair,
                None => return Ok(Some(Err("400 Bad Request"))),
            };
            let value = value.trim_matches(|c| c == ' ' || c == '\t');
            if name.contains([' ', '\t']) {
                return Ok(Some(Err("400 Bad Request")));
            }
            if name.eq_ignore_ascii_case("content-length") {
                // Digits only: usize's parse would take a '+'.
                let n = value.bytes().all(|c| c.is_ascii_digit()).then(|| value.parse::<usize>().ok()).flatten();
                match n {
                    Some(n) if length.map_or(true, |l| l == n) => {
                        if n > MAX_BODY {
                            return Ok(Some(Err("413 Content Too Large")));
                        }
                        length = Some(n);
                    }
                    _ => return Ok(Some(Err("400 Bad Request"))),
                }
            } else if name.eq_ignore_ascii_case("connection") {
                if value.eq_ignore_ascii_case("close") {
                    req.close = true;
                } else if value.eq_ignore_ascii_case("keep-alive") {
                    req.close = false;
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Ok(Some(Err("501 Not Implemented")));
            }
        }
        req.length = length.unwrap_or(0);
        Ok(Some(Ok(req)))
    }

    /// Reads and drops `length` bytes of body; false when the stream ends first.
    pub async fn skip_body<R: AsyncBufReadExt + Unpin>(r: &mut R, mut length: usize) -> std::io::Result<bool> {
        while length > 0 {
            let chunk = r.fill_buf().await?;
            if chunk.is_empty() {
                return Ok(false);
            }
            let n = length.min(chunk.len());
            r.consume(n);
            length -= n;
        }
        Ok(true)
    }
}
