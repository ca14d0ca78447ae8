//! kv_server on Tokio: the same Redis-protocol subset as examples/kv_server.cpp (PING, ECHO,
//! SET, GET, DEL, CONFIG GET with an empty value, COMMAND as an empty list; arrays of bulk strings or inline lines;
//! pipelined answers flushed when no further request is buffered; protocol errors answered
//! and the connection closed), with tokio::io::BufReader/BufWriter and 16 std::sync::Mutex
//! shards, as a Tokio user would write it. The same bounds on what a peer can make it hold:
//! a bulk string grows with the bytes received (never to its announced length up front), at
//! most 1 MiB, and the bulk strings of one request at most 2 MiB together.
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};

const MAX_LINE: usize = 64 * 1024;
const MAX_BULK: usize = 1024 * 1024;
const MAX_REQUEST: usize = 2 * MAX_BULK;
const MAX_ARGS: i64 = 1024;

struct Store {
    shards: Vec<Mutex<HashMap<Vec<u8>, Vec<u8>>>>,
}

impl Store {
    fn shard(&self, key: &[u8]) -> &Mutex<HashMap<Vec<u8>, Vec<u8>>> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }
}

fn bulk(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(s.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

fn execute(store: &Store, args: &mut Vec<Vec<u8>>, out: &mut Vec<u8>) {
    let cmd = args[0].to_ascii_uppercase();
    let n = args.len();
    let arity = |out: &mut Vec<u8>| {
        out.extend_from_slice(b"-ERR wrong number of arguments for '");
        out.extend_from_slice(&args[0]);
        out.extend_from_slice(b"' command\r\n");
    };
    match cmd.as_slice() {
        b"PING" if n == 1 => out.extend_from_slice(b"+PONG\r\n"),
        b"PING" | b"ECHO" if n == 2 => bulk(out, &args[1]),
        b"SET" if n == 3 => {
            let value = std::mem::take(&mut args[2]);
            let key = std::mem::take(&mut args[1]);
            store.shard(&key).lock().unwrap().insert(key, value);
            out.extend_from_slice(b"+OK\r\n");
        }
        b"GET" if n == 2 => match store.shard(&args[1]).lock().unwrap().get(&args[1]) {
            Some(v) => bulk(out, v),
            None => out.extend_from_slice(b"$-1\r\n"),
        },
        b"DEL" if n >= 2 => {
            let removed = args[1..].iter().filter(|k| store.shard(k).lock().unwrap().remove(*k).is_some()).count();
            out.extend_from_slice(format!(":{removed}\r\n").as_bytes());
        }
        b"CONFIG" if n == 3 && args[1].eq_ignore_ascii_case(b"GET") => {
            out.extend_from_slice(b"*2\r\n");
            bulk(out, &args[2]);
            bulk(out, b"");
        }
        b"COMMAND" => out.extend_from_slice(b"*0\r\n"),
        b"PING" | b"ECHO" | b"SET" | b"GET" | b"DEL" => arity(out),
        _ => {
            out.extend_from_slice(b"-ERR unknown command '");
            out.extend_from_slice(&args[0]);
            out.extend_from_slice(b"'\r\n");
        }
    }
}

/// One line without "\r\n"; None at end of stream; Err(()) when longer than MAX_LINE.
async fn read_line<R: AsyncBufReadExt + Unpin>(r: &mut R, line: &mut Vec<u8>) -> std::io::Result<Option<Result<(), ()>>> {
    line.clear();
    let n = (&mut *r).take(MAX_LINE as u64 + 1).read_until(b'\n', line).await?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Ok(Some(if n > MAX_LINE { Err(()) } else { Ok(()) }));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(Ok(())))
}

fn parse_num(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Reads one request into `args`: Ok(false) at end of stream, Err(what) for a protocol error.
async fn read_command<R: AsyncBufReadExt + Unpin>(
    rd: &mut R,
    line: &mut Vec<u8>,
    args: &mut Vec<Vec<u8>>,
) -> std::io::Result<Result<bool, &'static str>> {
    args.clear();
    match read_line(rd, line).await? {
        None => return Ok(Ok(false)),
        Some(Err(())) => return Ok(Err("too big inline request")),
        Some(Ok(())) => {}
    }
    if line.first() != Some(&b'*') {
        args.extend(line.split(|&c| c == b' ').filter(|w| !w.is_empty()).map(|w| w.to_vec()));
        return Ok(Ok(true));
    }
    let count = match parse_num(&line[1..]).filter(|&c| (-1..=MAX_ARGS).contains(&c)) {
        Some(c) => c,
        None => return Ok(Err("invalid multibulk length")),
    };
    let mut request = 0; // the bulk lengths announced so far
    for _ in 0..count.max(0) {
        match read_line(rd, line).await? {
            None => return Ok(Err("unexpected end of stream")),
            Some(Err(())) => return Ok(Err("too big bulk count string")),
            Some(Ok(())) => {}
        }
        if line.first() != Some(&b'$') {
            return Ok(Err("expected '$'"));
        }
        let len = match parse_num(&line[1..]).filter(|&l| l >= 0 && l as usize <= MAX_BULK) {
            Some(l) => l as usize,
            None => return Ok(Err("invalid bulk length")),
        };
        request += len;
        if request > MAX_REQUEST {
            return Ok(Err("too big request"));
        }
        // Grows with the bytes that came, not to the announced length up front.
        let mut arg = Vec::new();
        if (&mut *rd).take(len as u64 + 2).read_to_end(&mut arg).await? != len + 2 {
            return Ok(Err("unexpected end of stream"));
        }
        if !arg.ends_with(b"\r\n") {
            return Ok(Err("bulk string without CRLF"));
        }
        arg.truncate(len);
        args.push(arg);
    }
    Ok(Ok(true))
}

async fn serve(store: Arc<Store>, mut s: tokio::net::TcpStream) -> std::io::Result<()> {
    let (r, w) = s.split();
    let mut rd = BufReader::with_capacity(16384, r);
    let mut wr = BufWriter::with_capacity(16384, w);
    let mut line = Vec::new();
    let mut args: Vec<Vec<u8>> = Vec::new();
    let mut out = Vec::new();
    loop {
        match read_command(&mut rd, &mut line, &mut args).await? {
            Ok(false) => return wr.flush().await,
            Ok(true) => {}
            Err(e) => {
                wr.write_all(format!("-ERR Protocol error: {e}\r\n").as_bytes()).await?;
                return wr.flush().await;
            }
        }
        if args.is_empty() {
            continue;
        }
        out.clear();
        execute(&store, &mut args, &mut out);
        wr.write_all(&out).await?;
        if rd.buffer().is_empty() {
            wr.flush().await?;
        }
    }
}

fn main() {
    let store = Arc::new(Store { shards: (0..16).map(|_| Mutex::new(HashMap::new())).collect() });
    tokio_servers::serve("kv_server", move |s| serve(store.clone(), s))
}
