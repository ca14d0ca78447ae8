//! task_memory on Tokio: the twin of eddy's benchmarks/task_memory.cpp. From inside one task,
//! spawn N tasks (default 1,000,000; JoinHandles dropped: detached) that each wait on one
//! tokio::sync::Notify (`notified()`, enabled before the count so that `notify_waiters`
//! cannot miss a task that has not been polled again yet); once all of them wait, read
//! VmRSS from /proc/self/status and compare it with the reading taken before the first
//! spawn; then `notify_waiters()` and check that every task finished.
//!
//! Prints `bytes_per_task=<(after - before) / N>`, then
//! `bench=task_memory runtime=tokio workers=W ops=N secs=<spawning until the last task waits>
//! rate=<N / secs>`.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;
use tokio_servers::bench;

/// VmRSS of this process, in bytes (0 when /proc is not there).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("VmRSS:") {
            return rest.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) * 1024;
        }
    }
    0
}

/// N tasks count; the one that brings the count to N notifies `done` (a stored permit if
/// nobody waits yet).
struct Completion {
    count: AtomicU64,
    target: u64,
    done: Notify,
}

impl Completion {
    fn new(target: u64) -> Arc<Completion> {
        Arc::new(Completion { count: AtomicU64::new(0), target, done: Notify::new() })
    }
    fn done_one(&self) {
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.target {
            self.done.notify_one();
        }
    }
}

fn main() {
    let mut args = bench::Args::parse("task_memory");
    let workers = args.workers();
    let tasks = args.num("tasks", 1_000_000);
    args.check_all_used();
    if tasks == 0 {
        bench::fail("task_memory", "--tasks must be at least 1".to_string());
    }
    let rt = bench::runtime(workers);
    let waiting = Completion::new(tasks);
    let finished = Completion::new(tasks);
    let go = Arc::new(Notify::new());
    let (w, f) = (waiting.clone(), finished.clone());
    let (before, after, elapsed) = bench::run_in_task(&rt, async move {
        let before = resident_bytes();
        let start = Instant::now();
        for _ in 0..tasks {
            let (go, w, f) = (go.clone(), w.clone(), f.clone());
            tokio::spawn(async move {
                let notified = go.notified();
                tokio::pin!(notified);
                notified.as_mut().enable(); // registered: notify_waiters will wake it
                w.done_one();
                notified.await;
                f.done_one();
            });
        }
        w.done.notified().await;
        let elapsed = start.elapsed();
        let after = resident_bytes();
        go.notify_waiters();
        f.done.notified().await;
        (before, after, elapsed)
    });
    drop(rt);
    let n = finished.count.load(Ordering::Acquire);
    if n != tasks {
        bench::fail("task_memory", format!("finished={n}"));
    }
    if after == 0 {
        bench::fail("task_memory", "no VmRSS in /proc/self/status".to_string());
    }
    println!("bytes_per_task={}", after.saturating_sub(before) / tasks);
    bench::report("task_memory", workers, tasks, elapsed);
}
