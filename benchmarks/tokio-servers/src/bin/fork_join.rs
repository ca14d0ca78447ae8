//! fork_join on Tokio: the twin of eddy's benchmarks/fork_join.cpp, in the one style Tokio
//! offers without the "macros" feature (no join!): tokio::spawn of every child and .await
//! of the JoinHandles, as Tokio users write it. Recursion through boxed futures
//! (Pin<Box<dyn Future<Output = u64> + Send>>), since an async fn cannot call itself.
//!
//!   --shape fib   binary fib(n) (default 30); checks fib(30) = 832040.
//!   --shape tree  an --arity-ary tree of --depth levels (default 10 and 6: 1,000,000 leaves);
//!                 checks the leaf count.
//!   --style spawn the only style (when_all: exit 2, "unknown style").
//! Bench names fork_join_fib_spawn and fork_join_tree_spawn; ops = nodes (calls, leaves
//! included); timed from inside the root task.
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;
use tokio_servers::bench;

type BoxedU64 = Pin<Box<dyn Future<Output = u64> + Send>>;

fn fib(n: u32) -> BoxedU64 {
    Box::pin(async move {
        if n < 2 {
            return n as u64;
        }
        let a = tokio::spawn(fib(n - 1));
        let b = tokio::spawn(fib(n - 2));
        a.await.expect("child panicked") + b.await.expect("child panicked")
    })
}

fn tree(depth: u32, arity: u32) -> BoxedU64 {
    Box::pin(async move {
        if depth == 0 {
            return 1;
        }
        let children: Vec<_> = (0..arity).map(|_| tokio::spawn(tree(depth - 1, arity))).collect();
        let mut leaves = 0;
        for h in children {
            leaves += h.await.expect("child panicked");
        }
        leaves
    })
}

/// fib(n) and the number of calls computing it takes (calls(n) = 1 + calls(n-1) + calls(n-2)).
fn fib_and_calls(n: u32) -> (u64, u64) {
    let (mut f0, mut f1, mut c0, mut c1) = (0u64, 1u64, 1u64, 1u64);
    if n == 0 {
        return (0, 1);
    }
    for _ in 2..=n {
        let (f2, c2) = (f0 + f1, 1 + c0 + c1);
        f0 = f1;
        f1 = f2;
        c0 = c1;
        c1 = c2;
    }
    (f1, c1)
}

fn main() {
    let mut args = bench::Args::parse("fork_join");
    let workers = args.workers();
    let shape = args.word("shape", &["fib", "tree"]);
    let style = args.word("style", &["spawn", "when_all"]);
    let n = args.num("n", 30) as u32;
    let depth = args.num("depth", 6) as u32;
    let arity = args.num("arity", 10) as u32;
    args.check_all_used();
    let name = format!("fork_join_{shape}_spawn");
    if style != "spawn" {
        eprintln!("fork_join: unknown style '{style}' for Tokio (spawn only: join! needs the macros feature)");
        std::process::exit(2);
    }
    if shape == "fib" && n > 60 {
        bench::fail(&name, "--n above 60 would run for days".to_string());
    }
    let (expected, nodes) = if shape == "fib" {
        fib_and_calls(n)
    } else {
        let mut leaves = 1u64;
        let mut nodes = 0u64;
        for _ in 0..depth {
            nodes += leaves;
            leaves *= arity as u64;
        }
        (leaves, nodes + leaves)
    };
    let rt = bench::runtime(workers);
    let is_fib = shape == "fib";
    let (result, elapsed) = bench::run_in_task(&rt, async move {
        let start = Instant::now();
        let result = if is_fib { fib(n).await } else { tree(depth, arity).await };
        (result, start.elapsed())
    });
    drop(rt);
    if result != expected {
        bench::fail(&name, format!("result {result}, expected {expected}"));
    }
    bench::report(&name, workers, nodes, elapsed);
}
