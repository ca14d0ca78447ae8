//! http_hello on Tokio: the same server as examples/http_hello.cpp (keep-alive, pipelined
//! answers flushed when no further request is buffered, GET/HEAD of "/" 200, other paths
//! 404, other methods 405, bodies by Content-Length dropped, bad input 400/431/501 and
//! closed; ambiguous framing 400: a Content-Length that is not plain digits, two that differ,
//! whitespace before a header's colon; a Content-Length over 1 MiB 413), written with
//! tokio::io::BufReader and BufWriter as a Tokio user would.
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio_servers::http::{read_request, skip_body};

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

async fn serve(mut s: tokio::net::TcpStream) -> std::io::Result<()> {
    let (r, w) = s.split();
    let mut rd = BufReader::with_capacity(8192, r);
    let mut wr = BufWriter::with_capacity(16384, w);
    let mut line = String::new();
    let mut out = Vec::new();
    loop {
        let req = match read_request(&mut rd, &mut line).await? {
            None => break,
            Some(Ok(req)) => req,
            Some(Err(status)) => {
                answer(&mut out, status, status, false, true);
                wr.write_all(&out).await?;
                break;
            }
        };
        if !skip_body(&mut rd, req.length).await? {
            break;
        }
        let (method, target, close) = (req.method, req.target, req.close);
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
