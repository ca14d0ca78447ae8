//! chat_server on Tokio: the same line chat with rooms as examples/chat_server.cpp (its header
//! has the protocol: "JOIN <room>", "JOINED <room>", every line to every member of the room,
//! the sender included, "ERR ..." and a close for bad input, lines of at most 4 KiB, too slow
//! clients dropped), with the same capacities, written as a Tokio user would:
//!   * a tokio::sync::broadcast channel of 4096 lines per room (an Arc per line: its bytes are
//!     held once however many members it goes to);
//!   * per client: a reader (tokio::io::BufReader, lines bounded to 4 KiB) sending into the
//!     room, a pump task moving the room's lines into the client's outbox (a bounded
//!     tokio::sync::mpsc of 1024 lines) with try_send, and a writer task draining the outbox
//!     through a BufWriter (what is queued goes out in one write);
//!   * a client whose outbox is full, or who lagged behind the room's ring
//!     (RecvError::Lagged), is dropped as too slow: its tasks are aborted and it is closed.
//!
//! Tokio 1.24 has no `select!` without the "macros" feature, so the three tasks of a client
//! report their end on a small channel and the connection's task stops the others: at the
//! end of the client's input the writer first drains what is queued (as eddy's closes the
//! outbox), on a drop or a failure all three stop at once.
//!
//! Stats (the same counters and line as eddy's): SIGUSR1 prints
//!     chat_server stats: clients=N dropped=N lines_in=N lines_out=N lagged=N
//! and SIGINT or SIGTERM prints it and exits 0 (Tokio's "signal" feature). Tokio 1.24 has no
//! stable runtime metrics, so the line stops after the counters.
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{broadcast, mpsc};

const MAX_LINE: usize = 4096; // a line, its "\n" included
const ROOM_CAPACITY: usize = 4096; // lines in a room's broadcast ring
const OUTBOX_CAPACITY: usize = 1024; // lines queued for one client
const MAX_ROOM_NAME: usize = 64;

/// A line as it goes out, "\n" included; shared by every outbox it is queued in.
type Line = Arc<Vec<u8>>;

#[derive(Default)]
struct Stats {
    clients: AtomicU64,   // connections accepted
    dropped: AtomicU64,   // clients dropped as too slow
    lagged: AtomicU64,    // of those, dropped for lagging behind the room's ring
    lines_in: AtomicU64,  // lines sent into a room
    lines_out: AtomicU64, // lines written to clients
}

impl Stats {
    fn print(&self) {
        println!(
            "chat_server stats: clients={} dropped={} lines_in={} lines_out={} lagged={}",
            self.clients.load(Relaxed),
            self.dropped.load(Relaxed),
            self.lines_in.load(Relaxed),
            self.lines_out.load(Relaxed),
            self.lagged.load(Relaxed)
        );
        let _ = std::io::stdout().flush();
    }
}

struct Room {
    tx: broadcast::Sender<Line>,
    members: usize,
}

/// The rooms that have members, by name: a room is made by its first JOIN and forgotten when
/// its last member leaves.
#[derive(Default)]
struct Chat {
    stats: Stats,
    rooms: Mutex<HashMap<String, Room>>,
}

/// A client's place in a room; leaves on drop.
struct Membership {
    chat: Arc<Chat>,
    room: String,
}

impl Membership {
    fn join(chat: &Arc<Chat>, room: &str) -> (Membership, broadcast::Sender<Line>, broadcast::Receiver<Line>) {
        let mut rooms = chat.rooms.lock().unwrap();
        let r = rooms
            .entry(room.to_string())
            .or_insert_with(|| Room { tx: broadcast::channel(ROOM_CAPACITY).0, members: 0 });
        r.members += 1;
        let (tx, rx) = (r.tx.clone(), r.tx.subscribe());
        (Membership { chat: chat.clone(), room: room.to_string() }, tx, rx)
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut rooms = self.chat.rooms.lock().unwrap();
        if let Some(r) = rooms.get_mut(&self.room) {
            r.members -= 1;
            if r.members == 0 {
                rooms.remove(&self.room);
            }
        }
    }
}

/// The room of a "JOIN <room>" line, or None when it is not one.
fn parse_join(line: &[u8]) -> Option<&str> {
    let room = line.strip_prefix(b"JOIN ")?;
    let ok = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-';
    if room.is_empty() || room.len() > MAX_ROOM_NAME || !room.iter().all(ok) {
        return None;
    }
    std::str::from_utf8(room).ok()
}

/// One line without "\n" / "\r\n"; None at end of stream; Err(()) when longer than MAX_LINE
/// with its "\n". A last line without "\n" is still a line (as eddy's BufReader).
async fn read_line<R: AsyncBufReadExt + Unpin>(r: &mut R, line: &mut Vec<u8>) -> std::io::Result<Option<Result<(), ()>>> {
    line.clear();
    let n = (&mut *r).take(MAX_LINE as u64).read_until(b'\n', line).await?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Ok(Some(if n == MAX_LINE { Err(()) } else { Ok(()) }));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(Ok(())))
}

/// How one of a client's tasks ended.
enum End {
    Input, // the client's input ended (or broke the protocol): drain the outbox, then close
    Stop,  // dropped as too slow, or the socket failed: close now
}

/// Sends the client's lines into its room until its input ends or breaks the protocol (then
/// the answer is queued).
async fn read_lines(mut rd: BufReader<OwnedReadHalf>, tx: broadcast::Sender<Line>, outbox: mpsc::Sender<Line>, chat: Arc<Chat>) -> End {
    let mut line = Vec::new();
    loop {
        match read_line(&mut rd, &mut line).await {
            Ok(None) => return End::Input,
            Ok(Some(Ok(()))) if line.is_empty() => {}
            Ok(Some(Ok(()))) => {
                let mut text = Vec::with_capacity(line.len() + 1);
                text.extend_from_slice(&line);
                text.push(b'\n');
                let _ = tx.send(Arc::new(text));
                chat.stats.lines_in.fetch_add(1, Relaxed);
            }
            Ok(Some(Err(()))) => {
                // A full outbox cannot take the answer: the pump drops that client anyway.
                let _ = outbox.try_send(Arc::new(b"ERR line too long\n".to_vec()));
                return End::Input;
            }
            Err(_) => return End::Stop,
        }
    }
}

/// Moves the room's lines into the outbox without ever waiting for the client; a client whose
/// outbox is full, or who fell behind the room's ring, is dropped.
async fn pump(mut rx: broadcast::Receiver<Line>, outbox: mpsc::Sender<Line>, chat: Arc<Chat>) -> End {
    loop {
        let queued = match rx.recv().await {
            Ok(line) => match outbox.try_send(line) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => false,
                Err(mpsc::error::TrySendError::Closed(_)) => return End::Stop, // the writer is gone
            },
            Err(broadcast::error::RecvError::Lagged(_)) => {
                chat.stats.lagged.fetch_add(1, Relaxed);
                false
            }
            Err(broadcast::error::RecvError::Closed) => return End::Stop, // not while a member
        };
        if !queued {
            chat.stats.dropped.fetch_add(1, Relaxed);
            return End::Stop;
        }
    }
}

/// Writes the outbox to the socket until every sender is gone and it is drained; what is
/// queued together goes out in one write.
async fn write_lines(w: OwnedWriteHalf, mut outbox: mpsc::Receiver<Line>, chat: Arc<Chat>) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(16384, w);
    while let Some(mut line) = outbox.recv().await {
        let mut n = 0u64;
        loop {
            out.write_all(&line).await?;
            n += 1;
            match outbox.try_recv() {
                Ok(next) => line = next,
                Err(_) => break,
            }
        }
        out.flush().await?;
        chat.stats.lines_out.fetch_add(n, Relaxed);
    }
    Ok(())
}

async fn serve(chat: Arc<Chat>, s: tokio::net::TcpStream) -> std::io::Result<()> {
    chat.stats.clients.fetch_add(1, Relaxed);
    let (r, mut w) = s.into_split();
    let mut rd = BufReader::with_capacity(8192, r);
    let mut line = Vec::new();
    let refusal: &[u8] = match read_line(&mut rd, &mut line).await? {
        None => return Ok(()),
        Some(Err(())) => b"ERR line too long\n",
        Some(Ok(())) if parse_join(&line).is_none() => b"ERR expected JOIN <room>\n",
        Some(Ok(())) => b"",
    };
    if !refusal.is_empty() {
        return w.write_all(refusal).await;
    }
    let room = parse_join(&line).unwrap_or_default().to_string();
    let (_member, tx, rx) = Membership::join(&chat, &room);
    // The answer goes out before the writer starts; the room's lines from here on wait in rx.
    w.write_all(format!("JOINED {room}\n").as_bytes()).await?;
    let (outbox_tx, outbox_rx) = mpsc::channel::<Line>(OUTBOX_CAPACITY);
    // Each task says how it ended; the first to end decides what happens to the others.
    let (ended_tx, mut ended) = mpsc::channel::<End>(3);
    let reader = tokio::spawn({
        let (outbox, chat, ended) = (outbox_tx.clone(), chat.clone(), ended_tx.clone());
        async move {
            let _ = ended.try_send(read_lines(rd, tx, outbox, chat).await);
        }
    });
    let pump = tokio::spawn({
        let (chat, ended) = (chat.clone(), ended_tx.clone());
        async move {
            let _ = ended.try_send(pump(rx, outbox_tx, chat).await);
        }
    });
    let writer = tokio::spawn(async move {
        let _ = write_lines(w, outbox_rx, chat).await;
        let _ = ended_tx.try_send(End::Stop);
    });
    match ended.recv().await {
        Some(End::Input) => {
            // The reader's outbox sender is gone; the pump's goes with the pump, and the
            // writer ends once it has written what is queued.
            pump.abort();
            let _ = writer.await;
        }
        _ => {
            reader.abort();
            pump.abort();
            writer.abort();
        }
    }
    Ok(())
}

/// SIGUSR1 prints the stats line; SIGINT and SIGTERM print it and exit 0.
fn watch_signals(chat: Arc<Chat>) {
    let mut usr1 = signal(SignalKind::user_defined1()).expect("SIGUSR1 handler");
    let c = chat.clone();
    tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            c.stats.print();
        }
    });
    for kind in [SignalKind::interrupt(), SignalKind::terminate()] {
        let mut stop = signal(kind).expect("SIGINT/SIGTERM handler");
        let c = chat.clone();
        tokio::spawn(async move {
            stop.recv().await;
            c.stats.print();
            std::process::exit(0);
        });
    }
}

fn main() {
    let chat = Arc::new(Chat::default());
    let signals = chat.clone();
    tokio_servers::serve_with("chat_server", move |s| serve(chat.clone(), s), move || watch_signals(signals))
}
