//! What the two servers share: the command line (--port N, --workers N), the runtime (the
//! multi_thread flavour with every driver, as the anchors build it), the accept loop (one
//! task per connection; an accept error backs off 10 ms) and the first line
//! "<name> runtime=tokio workers=N listening=127.0.0.1:PORT" that tools/eddy-bench waits for.
use std::future::Future;
use std::io::Write;
use std::process::exit;
use std::time::Duration;

pub fn serve<F, Fut>(name: &str, handler: F) -> !
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
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
