//! file_server on Tokio: the same server as examples/file_server.cpp (GET and HEAD of the
//! files under --root DIR, keep-alive, Content-Length; the target's path percent-decoded and
//! taken apart at '/', a ".." segment or a NUL byte 403, a bad escape 400, a missing file or a
//! directory 404, other methods 405), written as a Tokio user would: `tokio::fs::read` (one
//! trip to the blocking pool per file) and BufWriter's write_all. The request parsing is
//! http_hello's (tokio_servers::http).
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio_servers::http::{read_request, skip_body};


fn head(out: &mut Vec<u8>, status: &str, length: usize, close: bool) {
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\nServer: tokio\r\nContent-Length: ");
    out.extend_from_slice(length.to_string().as_bytes());
    out.extend_from_slice(if close { b"\r\nConnection: close\r\n\r\n" as &[u8] } else { b"\r\n\r\n" });
}

fn text(out: &mut Vec<u8>, status: &str, is_head: bool, close: bool) {
    head(out, status, status.len(), close);
    if !is_head {
        out.extend_from_slice(status.as_bytes());
    }
}

/// The path under the root a target names, or the status to refuse it with.
fn resolve(target: &str) -> Result<String, &'static str> {
    let target = target.split('?').next().unwrap_or("");
    if !target.starts_with('/') {
        return Err("400 Bad Request");
    }
    let bytes = target.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            decoded.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = |c: u8| (c as char).to_digit(16);
        match (bytes.get(i + 1).and_then(|&c| hex(c)), bytes.get(i + 2).and_then(|&c| hex(c))) {
            (Some(h), Some(l)) => decoded.push((h * 16 + l) as u8),
            _ => return Err("400 Bad Request"),
        }
        i += 3;
    }
    let mut path = String::new();
    for segment in decoded.split(|&c| c == b'/') {
        if segment.is_empty() || segment == b"." {
            continue;
        }
        if segment == b".." || segment.contains(&0) {
            return Err("403 Forbidden");
        }
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(&String::from_utf8_lossy(segment));
    }
    if path.is_empty() {
        return Err("404 Not Found");
    }
    Ok(path)
}

async fn serve(root: Arc<String>, mut s: tokio::net::TcpStream) -> std::io::Result<()> {
    let (r, w) = s.split();
    let mut rd = BufReader::with_capacity(8192, r);
    let mut wr = BufWriter::with_capacity(16384 + 512, w);
    let mut line = String::new();
    let mut out = Vec::new();
    loop {
        let req = match read_request(&mut rd, &mut line).await? {
            None => break,
            Some(Ok(req)) => req,
            Some(Err(status)) => {
                text(&mut out, status, false, true);
                wr.write_all(&out).await?;
                break;
            }
        };
        if !skip_body(&mut rd, req.length).await? {
            break;
        }
        let (method, target, close) = (req.method, req.target, req.close);
        let is_head = method == "HEAD";
        if method != "GET" && !is_head {
            text(&mut out, "405 Method Not Allowed", false, close);
            wr.write_all(&out).await?;
        } else {
            match resolve(&target) {
                Err(status) => {
                    text(&mut out, status, is_head, close);
                    wr.write_all(&out).await?;
                }
                Ok(path) => {
                    let full = format!("{}/{}", root, path);
                    let found = if is_head {
                        tokio::fs::metadata(&full).await.and_then(|m| {
                            if m.is_file() { Ok((m.len() as usize, Vec::new())) } else { Err(std::io::ErrorKind::NotFound.into()) }
                        })
                    } else {
                        tokio::fs::read(&full).await.map(|body| (body.len(), body))
                    };
                    match found {
                        Ok((length, body)) => {
                            head(&mut out, "200 OK", length, close);
                            wr.write_all(&out).await?;
                            wr.write_all(&body).await?;
                        }
                        Err(e) => {
                            let status = if e.kind() == std::io::ErrorKind::PermissionDenied { "403 Forbidden" } else { "404 Not Found" };
                            text(&mut out, status, is_head, close);
                            wr.write_all(&out).await?;
                        }
                    }
                }
            }
        }
        if close {
            break;
        }
        if rd.buffer().is_empty() {
            wr.flush().await?;
        }
    }
    wr.flush().await
}

fn main() {
    let root = Arc::new(tokio_servers::flag_value("--root").unwrap_or_else(|| {
        eprintln!("file_server: --root DIR must name a directory");
        std::process::exit(2)
    }));
    tokio_servers::serve("file_server", move |s| serve(root.clone(), s))
}
