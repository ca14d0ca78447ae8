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
