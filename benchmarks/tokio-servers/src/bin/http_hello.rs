//! http_hello on Tokio: the same server as examples/http_hello.cpp (keep-alive, pipelined
//! answers flushed when no further request is buffered, GET/HEAD of "/" 200, other paths
//! 404, other methods 405, bodies by Content-Length dropped, bad input 400/431/501 and
//! closed; ambiguous framing 400: a Content-Length that is not plain digits, two that differ,
//! whitespace before a header's colon; a Content-Length over 1 MiB 413), written with
//! tokio::io::BufReader and BufWriter as a Tokio user would.
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};

const MAX_LINE: usize = 8 * 1024;
const MAX_HEADERS: usize = 100;
const MAX_BODY: usize = 1024 * 1024;

fn answer(out: &mut Vec<u8>, status: &str, body: &str, head: bool, close: bool) {
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\nServer: tokio\r\nContent-Type: text/plain\r\nContent-Length: ");
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.extend_from_slice(if close { b"\r\nConnection: close\r\n\r\n" as &[u8] } else { b"\r\n\r\n" });
    if !head {
        out.extend_from_slice(body.as_bytes());
    }
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

async fn serve(mut s: tokio::net::TcpStream) -> std::io::Result<()> {
    let (r, w) = s.split();
    let mut rd = BufReader::with_capacity(8192, r);
    let mut wr = BufWriter::with_capacity(16384, w);
    let mut line = String::new();
    let mut out = Vec::new();
    'conn: loop {
        // The request line (empty lines before it are allowed).
        loop {
            match read_line(&mut rd, &mut line).await? {
                None => break 'conn,
                Some(Err(())) => {
                    answer(&mut out, "431 Request Header Fields Too Large", "431 Request Header Fields Too Large", false, true);
                    wr.write_all(&out).await?;
                    break 'conn;
                }
                Some(Ok(())) if line.is_empty() => continue,
                Some(Ok(())) => break,
            }
        }
        let parts: Vec<&str> = line.splitn(3, ' ').collect();
        let bad = parts.len() != 3 || parts[0].is_empty() || parts[1].is_empty() || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0");
        if bad {
            answer(&mut out, "400 Bad Request", "400 Bad Request", false, true);
            wr.write_all(&out).await?;
            break;
        }
        let (method, target) = (parts[0].to_string(), parts[1].to_string());
        let mut close = parts[2] == "HTTP/1.0";
        let mut length: Option<usize> = None;
        let mut failure: Option<&str> = None;
        let mut headers = 0;
        loop {
            match read_line(&mut rd, &mut line).await? {
                None => break 'conn,
                Some(Err(())) => {
                    failure = Some("431 Request Header Fields Too Large");
                    break;
                }
                Some(Ok(())) if line.is_empty() => break,
                Some(Ok(())) => {}
            }
            if headers == MAX_HEADERS {
                failure = Some("431 Request Header Fields Too Large");
                break;
            }
            headers += 1;
            let (name, value) = match line.split_once(':') {
                Some(pair) => pair,
                None => {
                    failure = Some("400 Bad Request");
                    break;
                }
            };
            let value = value.trim_matches(|c| c == ' ' || c == '\t');
            if name.contains([' ', '\t']) {
                failure = Some("400 Bad Request");
                break;
            }
            if name.eq_ignore_ascii_case("content-length") {
                // Digits only: usize's parse would take a '+'.
                let n = value.bytes().all(|c| c.is_ascii_digit()).then(|| value.parse::<usize>().ok()).flatten();
                match n {
                    Some(n) if length.map_or(true, |l| l == n) => {
                        if n > MAX_BODY {
                            failure = Some("413 Content Too Large");
                            break;
                        }
                        length = Some(n);
                    }
                    _ => {
                        failure = Some("400 Bad Request");
                        break;
                    }
                }
            } else if name.eq_ignore_ascii_case("connection") {
                if value.eq_ignore_ascii_case("close") {
                    close = true;
                } else if value.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                failure = Some("501 Not Implemented");
                break;
            }
        }
        if let Some(status) = failure {
            answer(&mut out, status, status, false, true);
            wr.write_all(&out).await?;
            break;
        }
        let mut length = length.unwrap_or(0);
        while length > 0 {
            let chunk = rd.fill_buf().await?;
            if chunk.is_empty() {
                break 'conn;
            }
            let n = length.min(chunk.len());
            rd.consume(n);
            length -= n;
        }
        let head = method == "HEAD";
        if method != "GET" && !head {
            answer(&mut out, "405 Method Not Allowed", "Method Not Allowed", false, close);
        } else if target != "/" {
            answer(&mut out, "404 Not Found", "Not Found", head, close);
        } else {
            answer(&mut out, "200 OK", "Hello, world!", head, close);
        }
        wr.write_all(&out).await?;
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
    tokio_servers::serve("http_hello", serve)
}
